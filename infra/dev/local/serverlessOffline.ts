/**
 * serverless-offline serving the phase function(s) locally: the same serverless.yml, the same esbuild
 * bundle, and the real Lambda Invoke API (RequestResponse and Event) on `lambdaEndpoint`, so the relay
 * and tests use @aws-sdk/client-lambda exactly as against AWS. The trigger function's HTTP API route
 * (POST /migrations) is served on `httpEndpoint`, without IAM authorization (offline cannot check it).
 *
 * It runs under stage `offline` (serverless.yml params.offline): the host kubeconfig is the KUBECONFIG
 * file of `env`, the ledger table is env[ENV.ledgerTable], and DynamoDB is whatever env's
 * AWS_ENDPOINT_URL_DYNAMODB (or AWS_ENDPOINT_URL) names. The whole process group is stopped by stop(),
 * or by the exit handlers of processes.ts if the parent ends first.
 */

import { rmdirSync, rmSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { DEFAULT_FUNCTION_LAYOUT, type FunctionLayout, phaseFunctionName } from "../../../src/aws/functionLayout";
import { ENV } from "../../../src/config/environment";
import type { PhaseName } from "../../../src/dvm/itinerary";
import { POLICY_ENV } from "../../../src/dvm/policyConfig";
import { childEnvironment, localTools } from "./config";
import { findFreePort } from "./ports";
import { spawnLogged, stopProcess, tailFile } from "./processes";
import { GiveUp, waitFor } from "./wait";

const SERVICE_DIR = fileURLToPath(new URL("../../../", import.meta.url));
const SERVICE = "dvm-serverless";
const HOST = "127.0.0.1";

export interface ServerlessOfflineOptions {
  /**
   * The function's environment on top of this process's: LEDGER_TABLE_NAME, KUBECONFIG,
   * AWS_ENDPOINT_URL_DYNAMODB, AWS_REGION, credentials, LOG_LEVEL. DVM_KUBECONFIG_PARAMETER, if set,
   * makes it read the kubeconfig from SSM (e.g. LocalStack) instead.
   */
  env?: NodeJS.ProcessEnv;
  /** Port of the Lambda Invoke API; default a free one. */
  lambdaPort?: number;
  /** Port of the HTTP API server (the trigger's POST /migrations); default a free one. */
  httpPort?: number;
  /** Default: shared. */
  functionLayout?: FunctionLayout;
  /** Default: <tmp>/dvm-serverless-offline-<lambdaPort>.log, removed by stop() unless DVM_KEEP_LOGS is set. */
  logFile?: string;
  /** Bundling and start-up; default 120 s (esbuild on a busy 2-CPU machine takes a while). */
  startTimeoutMs?: number;
}

export interface ServerlessOffline {
  /** http://127.0.0.1:<lambdaPort>: `endpoint` of a LambdaClient. */
  lambdaEndpoint: string;
  /** http://127.0.0.1:<httpPort>: the HTTP API (POST <httpEndpoint>/migrations reaches the trigger). */
  httpEndpoint: string;
  stage: string;
  functionLayout: FunctionLayout;
  /** The Lambda function name that serves `phase` (any phase in the shared layout). */
  functionName(phase?: PhaseName): string;
  /** The trigger function's Lambda name (for EventBridge-shaped events through the Invoke API). */
  triggerFunctionName: string;
  logFile: string;
  stop(): Promise<void>;
}

export const OFFLINE_STAGE = "offline";

export async function startServerlessOffline(options: ServerlessOfflineOptions = {}): Promise<ServerlessOffline> {
  const lambdaPort = options.lambdaPort ?? (await findFreePort(HOST));
  const httpPort = options.httpPort ?? (await findFreePort(HOST));
  const functionLayout = options.functionLayout ?? DEFAULT_FUNCTION_LAYOUT;
  const env = childEnvironment(options.env);
  const logFile = options.logFile ?? join(tmpdir(), `dvm-serverless-offline-${lambdaPort}.log`);
  // Its own esbuild folder, so it never shares one with `osls package` or another instance.
  const workFolder = join(".esbuild", `offline-${lambdaPort}`);

  const params = [`functionLayout=${functionLayout}`];
  if (env[ENV.ledgerTable]) params.push(`ledgerTableName=${env[ENV.ledgerTable]}`);
  if (env[ENV.kubeconfigParameter]) params.push(`kubeconfigParameter=${env[ENV.kubeconfigParameter]}`);
  // serverless.yml's environment wins over this process's: these settings go in as params.
  if (env[ENV.triggerAllowedSources]) params.push(`triggerAllowedSources=${env[ENV.triggerAllowedSources]}`);
  if (env[ENV.triggerAllowedNamespaces]) params.push(`triggerAllowedNamespaces=${env[ENV.triggerAllowedNamespaces]}`);
  if (env[ENV.triggerAllowAdminNamespaces]) params.push(`triggerAllowAdminNamespaces=${env[ENV.triggerAllowAdminNamespaces]}`);
  if (env[ENV.eventsSink]) params.push(`eventsSink=${env[ENV.eventsSink]}`);
  if (env[ENV.eventsHttpUrl]) params.push(`eventsHttpUrl=${env[ENV.eventsHttpUrl]}`);
  if (env[ENV.eventsHttpMode]) params.push(`eventsHttpMode=${env[ENV.eventsHttpMode]}`);
  // The migration policy: serverless.yml's params carry POLICY_ENV's keys as names.
  for (const [param, variable] of Object.entries(POLICY_ENV)) if (env[variable]) params.push(`${param}=${env[variable]}`);

  const child = spawnLogged({
    name: "serverless-offline",
    // osls reads serverless.yml from its working directory. `exec` keeps one pid: the one we track
    // (and whose process group we stop) is osls itself, from node_modules/.bin rather than npx.
    command: "sh",
    args: [
      "-c",
      'cd "$0" && exec "$@"',
      SERVICE_DIR,
      join(SERVICE_DIR, "node_modules", ".bin", "osls"),
      "offline",
      "start",
      "--stage",
      OFFLINE_STAGE,
      "--host",
      HOST,
      "--lambdaPort",
      String(lambdaPort),
      "--httpPort",
      String(httpPort),
      // The function sees this environment (KUBECONFIG, endpoints, credentials), not only AWS_*.
      "--localEnvironment",
      ...params.map((p) => `--param=${p}`),
    ],
    logFile,
    env: { ...env, DVM_ESBUILD_WORK_FOLDER: workFolder },
  });
  const removeBuild = () => {
    rmSync(join(SERVICE_DIR, workFolder), { recursive: true, force: true });
    try {
      rmdirSync(join(SERVICE_DIR, ".esbuild")); // only when no other build is in there
    } catch {
      // not empty, or already gone
    }
  };

  const stop = async () => {
    await stopProcess(child);
    removeBuild();
    if (!options.logFile && !localTools().keepLogs) rmSync(logFile, { force: true });
  };
  try {
    await waitFor(
      `serverless-offline on ports ${lambdaPort} and ${httpPort}`,
      async () => {
        if (!child.isRunning()) throw new GiveUp(`serverless-offline exited during start-up (log ${logFile}):\n${tailFile(logFile)}`);
        return (await portOpen(lambdaPort)) && (await portOpen(httpPort));
      },
      options.startTimeoutMs ?? 120_000,
      () => `log ${logFile}:\n${tailFile(logFile)}`,
      250,
    );
  } catch (error) {
    await stopProcess(child);
    removeBuild();
    throw error; // the log stays: the error names it
  }
  return {
    lambdaEndpoint: `http://${HOST}:${lambdaPort}`,
    httpEndpoint: `http://${HOST}:${httpPort}`,
    stage: OFFLINE_STAGE,
    functionLayout,
    functionName: (phase = "Started") => phaseFunctionName(SERVICE, OFFLINE_STAGE, functionLayout, phase),
    triggerFunctionName: `${SERVICE}-${OFFLINE_STAGE}-trigger`,
    logFile,
    stop,
  };
}

function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: HOST, port });
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}
