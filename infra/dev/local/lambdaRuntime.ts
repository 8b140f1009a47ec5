/**
 * One Lambda sandbox, as AWS runs a function: AWS's Lambda Runtime Interface Emulator (aws-lambda-rie)
 * starting AWS's Node runtime interface client (aws-lambda-ric) on Node 24, in an unzipped deployment
 * artifact, with the function's handler, environment, timeout, memory and credentials. The emulator
 * serves one invocation at a time at POST /2015-03-31/functions/function/invocations (whatever the
 * function's name), initialises the function on the first one (a cold start, reported in its log), and
 * SIGKILLs the runtime when an invocation runs past the timeout, as Lambda does; the next invocation
 * then starts it again. infra/dev/local/lambdaInvokeApi.ts puts Lambda's Invoke API for named functions in
 * front of a pool of these.
 *
 * The tools come from infra/dev/lambda/build.sh (run by infra/dev/bootstrap.mjs for `npm test`), which
 * writes their paths to runtime.json in its cache:
 *   DVM_LAMBDA_RUNTIME_DIR   that cache (default ~/.cache/dvm-lambda-runtime)
 *
 * Differences from Lambda that remain: no microVM (the function runs as this user, on this machine's
 * file system and network), the memory size bounds V8's heap as the nodejs runtime's bootstrap does
 * rather than a cgroup, and the architecture is this machine's.
 */
import { readFileSync } from "node:fs";
import { connect } from "node:net";
import { homedir } from "node:os";
import { dirname, join } from "node:path";
import type { Environment } from "../../../src/config/environment";
import { localEnvironment } from "./config";
import { findFreePort } from "./ports";
import { type ManagedProcess, spawnLogged, stopProcess, tailFile } from "./processes";
import { GiveUp, waitFor } from "./wait";

const HOST = "127.0.0.1";

export interface LambdaRuntimeTools {
  /** Node's binary (v24.x, nodejs24.x's Node). */
  node: string;
  nodeVersion: string;
  /** aws-lambda-rie. */
  rie: string;
  /** aws-lambda-ric's entry point (index.mjs), its native addon built against `node`. */
  ric: string;
}

/** Where infra/dev/lambda/build.sh put the runtime; throws with the command that builds it. */
export function lambdaRuntimeTools(env: Environment = localEnvironment()): LambdaRuntimeTools {
  const dir = env.DVM_LAMBDA_RUNTIME_DIR || join(homedir(), ".cache", "dvm-lambda-runtime");
  const manifest = join(dir, "runtime.json");
  try {
    const tools = JSON.parse(readFileSync(manifest, "utf8")) as LambdaRuntimeTools;
    if (tools.node && tools.rie && tools.ric && tools.nodeVersion) return tools;
  } catch {
    // missing or unreadable: the same advice
  }
  throw new Error(`the Lambda runtime (Node 24, aws-lambda-rie, aws-lambda-ric) is not built: ${manifest} is missing; run bash infra/dev/lambda/build.sh`);
}

/** A function's configuration, as Lambda's GetFunctionConfiguration gives it. */
export interface LambdaFunctionSpec {
  /** The function's name: what the Invoke API is called with, and AWS_LAMBDA_FUNCTION_NAME. */
  name: string;
  /** The unzipped deployment package (LAMBDA_TASK_ROOT). */
  codeDir: string;
  /** e.g. functions/phase.handler */
  handler: string;
  /** The function's environment variables (its configuration's Environment.Variables). */
  environment: Record<string, string>;
  timeoutSeconds: number;
  memoryMb: number;
  region: string;
  /** The execution role's credentials (Lambda hands the function a session of its role). */
  credentials: { accessKeyId: string; secretAccessKey: string; sessionToken?: string };
  /** Sandboxes at most, i.e. invocations at once (Lambda's concurrency for the function); default 4. */
  concurrency?: number;
}

/** The variables Lambda sets itself; a function's configuration cannot override them. */
export function runtimeEnvironment(spec: LambdaFunctionSpec, tools: LambdaRuntimeTools): Record<string, string> {
  const major = tools.nodeVersion.replace(/^v/, "").split(".")[0];
  return {
    PATH: `${dirname(tools.node)}:/usr/local/bin:/usr/bin:/bin`,
    LANG: "en_US.UTF-8",
    TZ: ":UTC",
    LAMBDA_TASK_ROOT: spec.codeDir,
    LAMBDA_RUNTIME_DIR: dirname(tools.ric),
    _HANDLER: spec.handler,
    AWS_EXECUTION_ENV: `AWS_Lambda_nodejs${major}.x`,
    AWS_LAMBDA_FUNCTION_NAME: spec.name,
    AWS_LAMBDA_FUNCTION_VERSION: "$LATEST",
    AWS_LAMBDA_FUNCTION_MEMORY_SIZE: String(spec.memoryMb),
    // The emulator's own setting: it stops an invocation after this many seconds.
    AWS_LAMBDA_FUNCTION_TIMEOUT: String(spec.timeoutSeconds),
    AWS_LAMBDA_LOG_GROUP_NAME: `/aws/lambda/${spec.name}`,
    AWS_LAMBDA_LOG_STREAM_NAME: "$LATEST",
    AWS_REGION: spec.region,
    AWS_DEFAULT_REGION: spec.region,
    AWS_ACCESS_KEY_ID: spec.credentials.accessKeyId,
    AWS_SECRET_ACCESS_KEY: spec.credentials.secretAccessKey,
    ...(spec.credentials.sessionToken ? { AWS_SESSION_TOKEN: spec.credentials.sessionToken } : {}),
  };
}

export interface LambdaSandbox {
  /** http://127.0.0.1:<port>/2015-03-31/functions/function/invocations */
  invokeUrl: string;
  logFile: string;
  /** Whether the emulator process is still up (it outlives its runtime's timeouts). */
  isRunning(): boolean;
  stop(): Promise<void>;
}

/** Starts the emulator for `spec`; the function itself starts on the first invocation. */
export async function startLambdaSandbox(spec: LambdaFunctionSpec, logFile: string, tools: LambdaRuntimeTools = lambdaRuntimeTools()): Promise<LambdaSandbox> {
  const port = await findFreePort(HOST);
  // Each emulator serves its runtime the Runtime API on a port of its own (default 9001, shared otherwise).
  const runtimeApiPort = await findFreePort(HOST);
  // Like the nodejs runtime's bootstrap: the old generation gets 90 % of the function's memory.
  const heapMb = Math.max(64, Math.floor(spec.memoryMb * 0.9));
  const child: ManagedProcess = spawnLogged({
    name: `aws-lambda-rie ${spec.name}`,
    command: "sh",
    // The emulator runs the bootstrap in its working directory: the task root, as in Lambda.
    args: [
      "-c",
      'cd "$0" && exec "$@"',
      spec.codeDir,
      tools.rie,
      "--runtime-interface-emulator-address",
      `${HOST}:${port}`,
      "--runtime-api-address",
      `${HOST}:${runtimeApiPort}`,
      tools.node,
      `--max-old-space-size=${heapMb}`,
      tools.ric,
      spec.handler,
    ],
    logFile,
    // Exactly the function's environment: the emulator passes its own on to the runtime.
    env: { ...(spec.environment as Environment), ...runtimeEnvironment(spec, tools) },
  });
  const invokeUrl = `http://${HOST}:${port}/2015-03-31/functions/function/invocations`;
  try {
    await waitFor(
      `aws-lambda-rie for ${spec.name}`,
      async () => {
        if (!child.isRunning()) throw new GiveUp(`aws-lambda-rie for ${spec.name} exited:\n${tailFile(logFile)}`);
        // A connection, not a request: the emulator takes any request on its path for an invocation.
        return await portOpen(port);
      },
      15_000,
      () => tailFile(logFile),
    );
  } catch (error) {
    await stopProcess(child);
    throw error;
  }
  return { invokeUrl, logFile, isRunning: () => child.isRunning(), stop: () => stopProcess(child) };
}

/** What the emulator logged about one invocation (its END and REPORT lines, and rapid's INIT REPORT). */
export interface InvocationReport {
  requestId: string;
  durationMs: number;
  /** Set on a cold start: the runtime's init as rapid measured it (INIT REPORT durationMs). */
  initDurationMs?: number;
}

/**
 * The REPORT lines of a sandbox's log. The emulator's own REPORT line prints an "Init Duration" that only
 * times handing the init over (well under a millisecond); the function's init as rapid measured it is
 * the INIT REPORT line before the invocation, which this takes instead.
 */
export function invocationReports(log: string): InvocationReport[] {
  const reports: InvocationReport[] = [];
  let pendingInitMs: number | undefined;
  for (const line of log.split("\n")) {
    const init = /INIT REPORT\(durationMs: ([\d.]+)\)/.exec(line);
    if (init) pendingInitMs = Number(init[1]);
    const report = /^REPORT RequestId: (\S+)\t(?:Init Duration: [\d.]+ ms\t)?Duration: ([\d.]+) ms/.exec(line);
    if (report?.[1] && report[2]) {
      reports.push({ requestId: report[1], durationMs: Number(report[2]), ...(pendingInitMs !== undefined ? { initDurationMs: pendingInitMs } : {}) });
      pendingInitMs = undefined;
    }
  }
  return reports;
}

function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, HOST);
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}
