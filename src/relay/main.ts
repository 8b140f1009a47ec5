/**
 * Entry point of the relay Deployment: settings from the environment (src/relay/config.ts), Lambda as
 * the transport, leader election among the replicas (only the leader forwards), the health server for
 * the probes, and a graceful stop on SIGTERM/SIGINT (the kubelet's way of ending a pod) so that forwards
 * in flight are not cut and the Lease is handed to a standby at once.
 *
 *   KUBECONFIG=... RELAY_FUNCTION_NAME=dvm-phase npx tsx src/relay/main.ts
 */
import { realpathSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { KubeConfig } from "@kubernetes/client-node";
import { functionPerPhase, type LambdaEndpoint, LambdaTransport, sharedFunction } from "../aws/lambdaTransport";
import { ENV } from "../config/environment";
import { ConfigurationError } from "../config/error";
import { jsonLogger, type Logger } from "../lib/log";
import { parseRelayEnv, type RelayConfig, relayEnvironment } from "./config";
import { startHealthServer } from "./health";
import { KubeLeaderLeaseStore } from "./leaderLeaseStore";
import { RelayMetrics } from "./metrics";
import { RelayReplica } from "./replica";

/** The host cluster: KUBECONFIG when set, the pod's service account in a cluster, else ~/.kube/config. */
function hostKubeConfig(config: RelayConfig): KubeConfig {
  const kc = new KubeConfig();
  if (config.kubeconfigPath) kc.loadFromFile(config.kubeconfigPath);
  else if (config.inCluster) kc.loadFromCluster();
  else kc.loadFromDefault();
  if (!kc.getCurrentCluster()) throw new ConfigurationError(`relay configuration: ${ENV.kubeconfig}: no current cluster in the kubeconfig`, ENV.kubeconfig);
  return kc;
}

function kubeConfigFile(path: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(path);
  return kc;
}

export interface RunRelayOptions {
  /** The Lambda client's endpoint, region, credentials; default: the SDK's own resolution (AWS_* variables, IRSA). */
  lambda?: LambdaEndpoint;
}

/** Starts the relay and its health server; resolves with a function that stops both. */
export async function runRelay(config: RelayConfig, log: Logger, options: RunRelayOptions = {}): Promise<() => Promise<void>> {
  const kubeConfig = hostKubeConfig(config);
  const transport = new LambdaTransport({
    functionFor: config.target.kind === "shared" ? sharedFunction(config.target.name) : functionPerPhase(config.target.prefix),
    invocationType: config.invocationType,
    ...(options.lambda ? { endpoint: options.lambda } : {}),
    log,
  });
  const { leaderElection } = config;
  // The gauges read the replica at scrape time; it exists by the first scrape (the server starts after it).
  const metrics = new RelayMetrics({ maxDvmSeries: config.metricsMaxDvmSeries, source: () => replica.stats() });
  const replica: RelayReplica = new RelayReplica({
    relay: {
      kubeConfig,
      transport,
      clusters: config.podClusters.map((c) => ({ name: c.name, kubeConfig: kubeConfigFile(c.kubeconfigPath) })),
      ...(config.namespace ? { namespace: config.namespace } : {}),
      resyncMs: config.resyncMs,
      concurrency: config.concurrency,
      log,
      metrics,
    },
    ...(leaderElection.enabled
      ? { election: { ...leaderElection, store: new KubeLeaderLeaseStore(kubeConfig, leaderElection.namespace, leaderElection.name) } }
      : {}),
    log,
    metrics,
  });
  const health = await startHealthServer({
    port: config.healthPort,
    ready: () => replica.ready(),
    role: () => replica.role(),
    stats: () => replica.stats(),
    metrics: () => metrics.render(),
  });
  replica.start();
  log.info("relay running", {
    target: config.target,
    invocationType: config.invocationType,
    healthPort: health.port,
    podClusters: config.podClusters.map((c) => c.name),
    leaderElection: leaderElection.enabled ? { lease: `${leaderElection.namespace}/${leaderElection.name}`, identity: leaderElection.identity } : "off",
  });
  return async () => {
    await replica.stop();
    await health.close();
  };
}

async function main(): Promise<void> {
  let log = jsonLogger({ component: "relay" });
  let stop: () => Promise<void>;
  try {
    const config = parseRelayEnv(relayEnvironment());
    log = jsonLogger({ component: "relay" }, config.logLevel);
    stop = await runRelay(config, log);
  } catch (error) {
    if (error instanceof ConfigurationError) {
      log.error(error.message);
      process.exit(2);
    }
    throw error;
  }
  let stopping = false;
  const onSignal = (signal: NodeJS.Signals) => {
    // A second signal means "now": do not wait for forwards in flight.
    if (stopping) process.exit(1);
    stopping = true;
    log.info("stopping", { signal });
    stop().then(
      () => process.exit(0),
      (error: unknown) => {
        log.error("stop failed", { error: String(error) });
        process.exit(1);
      },
    );
  };
  process.on("SIGTERM", onSignal);
  process.on("SIGINT", onSignal);
}

function isEntryPoint(): boolean {
  const script = process.argv[1];
  if (!script) return false;
  try {
    return realpathSync(script) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

if (isEntryPoint()) {
  main().catch((error: unknown) => {
    process.stderr.write(`relay: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  });
}
