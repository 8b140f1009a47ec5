/**
 * The whole controller on one machine: DynamoDB Local (or an existing DynamoDB), the phase function
 * behind serverless-offline's Lambda Invoke API (the API the relay uses against AWS), and the relay
 * watching the given cluster — or, when none is given, two embedded clusters ("source", which hosts the
 * DVMs, and "destination"; real nodes where the machine allows, else kwok, see embeddedClusters.ts) and
 * a demo to migrate. `npm start` (infra/dev/local/start.ts, settings from infra/dev/local/config.ts) and the
 * end-to-end tests both use this; every setting comes in through LocalControllerOptions.
 */

import { mkdirSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { createLedgerClient } from "../../../src/aws/ledger";
import { ENV, type Environment } from "../../../src/config/environment";
import { DEFAULT_MIGRATION_POLICY, type MigrationPolicy } from "../../../src/dvm/policy";
import { policyEnv } from "../../../src/dvm/policyConfig";
import type { Logger, LogLevel } from "../../../src/lib/log";
import { LEADER_ELECTION_DEFAULTS } from "../../../src/relay/leaderElection";
import { runRelay } from "../../../src/relay/main";
import { type AwsAccess, LOCAL_CREDENTIALS, LOCAL_REGION } from "./config";
import { type DynamoLocal, startDynamoLocal } from "./dynamoLocal";
import { type ClusterMode, startEmbeddedClusters } from "./embeddedClusters";
import { ensureLedgerTable } from "./ledgerTable";
import { findFreePort } from "./ports";
import { type ServerlessOffline, startServerlessOffline } from "./serverlessOffline";

export interface LocalControllerOptions {
  /** The host cluster's kubeconfig; unset: embedded control planes. */
  kubeconfig?: string;
  /** An existing DynamoDB for the ledger; unset: DynamoDB Local, started for the run. */
  dynamoEndpoint?: string;
  /** Region and credentials for the ledger and the Lambda Invoke API; default us-east-1 and dummy keys. */
  aws?: AwsAccess;
  /** The relay's log level (its logger is `log`; this is what it is told); default info. */
  logLevel?: LogLevel;
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
   * allow-list, default image); default: DEFAULT_MIGRATION_POLICY (in node mode with the image it built
   * as the default). An empty admin list cannot be passed (osls refuses an empty --param): name a
   * namespace nobody may create DVMs in instead.
   */
  policy?: MigrationPolicy;
  /** More of the phase function's own settings (DVM_EVENTS_*, POWERTOOLS_LOG_LEVEL...), as the environment it reads. */
  functionSettings?: Environment;
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

export async function startLocalController(options: LocalControllerOptions): Promise<LocalController> {
  const say = options.say ?? (() => {});
  const stops: (() => Promise<void>)[] = [];
  const stopAll = async () => {
    for (const stop of stops.reverse()) await stop().catch((error) => options.log.warn("stop failed", { error: String(error) }));
  };
  try {
    mkdirSync(join(options.stateDir, "logs"), { recursive: true });
    const region = options.aws?.region ?? LOCAL_REGION;

    // 1. Clusters.
    let hostKubeconfig = options.kubeconfig;
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

    // 2. The ledger.
    let dynamoEndpoint = options.dynamoEndpoint;
    if (!dynamoEndpoint) {
      say("starting DynamoDB Local");
      const dynamo: DynamoLocal = await startDynamoLocal({ logDir: join(options.stateDir, "logs") });
      stops.push(() => dynamo.stop());
      dynamoEndpoint = dynamo.endpoint;
    }
    // Local endpoints check no credentials, but the SDK wants some to sign with.
    const credentials = options.aws?.credentials ?? (options.dynamoEndpoint ? undefined : LOCAL_CREDENTIALS);
    const aws = { region, ...(credentials ? { credentials } : {}) };
    const ledgerTableName = options.ledgerTableName ?? "dvm-local-ledger";
    await ensureLedgerTable(createLedgerClient({ endpoint: dynamoEndpoint, ...aws }), ledgerTableName);

    // 3. The phase function behind the Lambda Invoke API.
    say("bundling the phase function and starting serverless-offline");
    const offline: ServerlessOffline = await startServerlessOffline({
      // The function is its own deployable: it gets its settings as the environment it reads in Lambda.
      env: {
        [ENV.ledgerTable]: ledgerTableName,
        [ENV.kubeconfig]: hostKubeconfig,
        [ENV.awsDynamoEndpoint]: dynamoEndpoint,
        [ENV.awsRegion]: aws.region,
        ...(credentials ? { [ENV.awsAccessKeyId]: credentials.accessKeyId, [ENV.awsSecretAccessKey]: credentials.secretAccessKey } : {}),
        ...policyEnv(policy),
        ...options.functionSettings,
      },
      logFile: join(options.stateDir, "logs", "phase-function.log"),
    });
    stops.push(() => offline.stop());

    // 4. The relay, invoking it. RequestResponse locally, so the relay sees each result's requeue delay.
    // It elects a leader as the Deployment's replicas do (a second `npm start` on the same cluster waits).
    const healthPort = options.healthPort ?? (await findFreePort("127.0.0.1"));
    const stopRelay = await runRelay(
      {
        kubeconfigPath: hostKubeconfig,
        inCluster: false,
        logLevel: options.logLevel ?? "info",
        target: { kind: "shared", name: offline.functionName() },
        invocationType: "RequestResponse",
        healthPort,
        resyncMs: 30_000,
        concurrency: 16,
        metricsMaxDvmSeries: 1_000,
        podClusters: embedded ? [{ name: "destination", kubeconfigPath: embedded.destinationKubeconfig }] : (options.podClusters ?? []),
        leaderElection: { enabled: true, namespace: "default", name: "dvm-relay", identity: `${hostname()}-${process.pid}`, ...LEADER_ELECTION_DEFAULTS },
      },
      options.log,
      { lambda: { endpoint: offline.lambdaEndpoint, ...aws } },
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
