/**
 * The whole controller on one machine: DynamoDB Local (or the endpoint AWS_ENDPOINT_URL* names), the phase
 * function behind serverless-offline's Lambda Invoke API (the API the relay uses against AWS), and the
 * relay watching the cluster in KUBECONFIG — or, when none is configured, two embedded clusters ("source",
 * which hosts the DVMs, and "destination"; real nodes where the machine allows, else kwok, see
 * embeddedClusters.ts) and a demo to migrate.
 * `npm start` (src/cli/start.ts) and the end-to-end tests both use this.
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { DEFAULT_MIGRATION_POLICY, type MigrationPolicy } from "../dvm/policy";
import { policyEnv } from "../dvm/policyConfig";
import { createLedgerClient, ensureLedgerTable } from "../ledger";
import type { Logger } from "../log";
import { runRelay } from "../relay/main";
import { type DynamoLocal, startDynamoLocal } from "./dynamoLocal";
import { type ClusterMode, startEmbeddedClusters } from "./embeddedClusters";
import { findFreePort } from "./ports";
import { type ServerlessOffline, startServerlessOffline } from "./serverlessOffline";

export interface LocalControllerOptions {
  /** The host cluster's kubeconfig; default $KUBECONFIG; neither: embedded control planes. */
  kubeconfig?: string;
  ledgerTableName?: string;
  /** More clusters whose pods the relay watches (the destination, when KUBECONFIG is given). */
  podClusters?: { name: string; kubeconfigPath: string }[];
  /** Relay health port; default a free one. */
  healthPort?: number;
  /** Where the embedded clusters' kubeconfigs and the demo files go. */
  stateDir: string;
  log: Logger;
  /** Progress lines for a person ("starting DynamoDB Local ..."). */
  say?: (line: string) => void;
  /** Embedded clusters: "node" (real pods), "kwok" (fake pods), default "auto" (node where possible). */
  clusterMode?: ClusterMode | "auto";
  /**
   * The operator's migration policy handed to the phase function (admin namespaces, transfer image
   * allow-list, default image); default: the function's own defaults (src/dvm/policyConfig.ts). Unset
   * here, the DVM_* variables of this process's environment apply. An empty admin list cannot be passed
   * (osls refuses an empty --param): name a namespace nobody may create DVMs in instead.
   */
  policy?: MigrationPolicy;
}

export interface LocalController {
  /** Where the DVMs live; its kubeconfig path. */
  hostKubeconfig: string;
  /** Set when the clusters are embedded. */
  embedded?: { mode: ClusterMode; destinationKubeconfig: string; demoManifest: string; arrivalsCommand?: string };
  /** The migration policy the phase function runs with. */
  policy: MigrationPolicy;
  dynamoEndpoint: string;
  ledgerTableName: string;
  lambdaEndpoint: string;
  /** The trigger's HTTP route: CloudEvents are POSTed here. */
  triggerUrl: string;
  /** Lambda names behind `lambdaEndpoint`, for `aws lambda invoke --function-name`. */
  functionNames: { phase: string; trigger: string };
  /** Everything the phase function printed (its structured log lines). */
  functionLogFile: string;
  healthUrl: string;
  stop(): Promise<void>;
}

/** The local DynamoDB and Lambda endpoints need credentials the SDK accepts; nothing checks them. */
const LOCAL_CREDENTIALS = { AWS_ACCESS_KEY_ID: "dvmlocal", AWS_SECRET_ACCESS_KEY: "dvmlocal" };

export async function startLocalController(options: LocalControllerOptions): Promise<LocalController> {
  const say = options.say ?? (() => {});
  const stops: (() => Promise<void>)[] = [];
  const stopAll = async () => {
    for (const stop of stops.reverse()) await stop().catch((error) => options.log.warn("stop failed", { error: String(error) }));
  };
  try {
    mkdirSync(join(options.stateDir, "logs"), { recursive: true });
    process.env.AWS_REGION ??= "us-east-1";

    // 1. Clusters.
    let hostKubeconfig = options.kubeconfig ?? process.env.KUBECONFIG;
    let embedded: LocalController["embedded"];
    let policy: MigrationPolicy = options.policy ?? DEFAULT_MIGRATION_POLICY;
    if (!hostKubeconfig) {
      const clusters = await startEmbeddedClusters({ stateDir: options.stateDir, say, ...(options.clusterMode ? { mode: options.clusterMode } : {}) });
      stops.push(() => clusters.stop());
      hostKubeconfig = clusters.hostKubeconfig;
      embedded = {
        mode: clusters.mode,
        destinationKubeconfig: clusters.destinationKubeconfig,
        demoManifest: clusters.demoManifest,
        ...(clusters.arrivalsCommand ? { arrivalsCommand: clusters.arrivalsCommand } : {}),
      };
      // Node mode runs the image it built: it is the default, so the demo needs to name none.
      if (clusters.transferImage && !options.policy) policy = { ...DEFAULT_MIGRATION_POLICY, defaultTransferImage: clusters.transferImage };
    }

    // The relay and the function read the host cluster from KUBECONFIG.
    process.env.KUBECONFIG = hostKubeconfig;

    // 2. The ledger.
    let dynamoEndpoint = process.env.AWS_ENDPOINT_URL_DYNAMODB ?? process.env.AWS_ENDPOINT_URL;
    if (!dynamoEndpoint) {
      say("starting DynamoDB Local");
      const dynamo: DynamoLocal = await startDynamoLocal({ logDir: join(options.stateDir, "logs") });
      stops.push(() => dynamo.stop());
      dynamoEndpoint = dynamo.endpoint;
      process.env.AWS_ENDPOINT_URL_DYNAMODB = dynamoEndpoint;
      Object.assign(process.env, { ...LOCAL_CREDENTIALS, ...pick(process.env, Object.keys(LOCAL_CREDENTIALS)) });
    }
    const ledgerTableName = options.ledgerTableName ?? "dvm-local-ledger";
    await ensureLedgerTable(createLedgerClient({ endpoint: dynamoEndpoint }), ledgerTableName);

    // 3. The phase function behind the Lambda Invoke API.
    say("bundling the phase function and starting serverless-offline");
    const offline: ServerlessOffline = await startServerlessOffline({
      env: { LEDGER_TABLE_NAME: ledgerTableName, KUBECONFIG: hostKubeconfig, AWS_ENDPOINT_URL_DYNAMODB: dynamoEndpoint, ...policyEnv(policy) },
      logFile: join(options.stateDir, "logs", "phase-function.log"),
    });
    stops.push(() => offline.stop());

    // 4. The relay, invoking it. RequestResponse locally, so the relay sees each result's requeue delay.
    process.env.AWS_ENDPOINT_URL_LAMBDA = offline.lambdaEndpoint;
    const healthPort = options.healthPort ?? (await findFreePort("127.0.0.1"));
    const stopRelay = await runRelay(
      {
        KUBECONFIG: hostKubeconfig,
        RELAY_FUNCTION_NAME: offline.functionName(),
        RELAY_INVOCATION_TYPE: "RequestResponse",
        RELAY_HEALTH_PORT: String(healthPort),
        RELAY_RESYNC_MS: "30000",
        ...podClustersEnv(embedded ? [{ name: "destination", kubeconfigPath: embedded.destinationKubeconfig }] : (options.podClusters ?? [])),
      },
      options.log,
    );
    stops.push(stopRelay);

    return {
      hostKubeconfig,
      policy,
      ...(embedded ? { embedded } : {}),
      dynamoEndpoint,
      ledgerTableName,
      lambdaEndpoint: offline.lambdaEndpoint,
      triggerUrl: `${offline.httpEndpoint}/migrations`,
      functionNames: { phase: offline.functionName(), trigger: offline.triggerFunctionName },
      functionLogFile: offline.logFile,
      healthUrl: `http://127.0.0.1:${healthPort}/readyz`,
      stop: stopAll,
    };
  } catch (error) {
    await stopAll();
    throw error;
  }
}

function podClustersEnv(clusters: { name: string; kubeconfigPath: string }[]): Record<string, string> {
  return clusters.length > 0 ? { RELAY_POD_CLUSTERS: clusters.map((c) => `${c.name}=${c.kubeconfigPath}`).join(",") } : {};
}

function pick(env: NodeJS.ProcessEnv, keys: string[]): Record<string, string> {
  return Object.fromEntries(keys.flatMap((k) => (env[k] ? [[k, env[k]!]] : [])));
}
