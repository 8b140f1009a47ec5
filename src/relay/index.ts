/** The watch relay: watch DVMs and what they own, coalesce per uid, forward reconcile requests. */
export { Relay, RELAY_DEFAULTS, type RelayCluster, type RelayOptions, type RelayStats, type WatchStats } from "./relay";
export { InProcessTransport, type ForwardContext, type RelayTransport } from "./transport";
export {
  functionPerPhase,
  LambdaInvokeError,
  LambdaTransport,
  RemoteFunctionError,
  sharedFunction,
  type LambdaTransportOptions,
  type RelayInvocationType,
} from "./lambdaTransport";
export { WorkQueue, DEFAULT_CONCURRENCY, type WorkQueueOptions } from "./queue";
export { startHealthServer, DEFAULT_HEALTH_PORT, type HealthServer, type HealthServerOptions } from "./health";
export { parseRelayEnv, RelayConfigError, type RelayConfig } from "./config";
export { LeaderElector, LEADER_ELECTION_DEFAULTS, type LeaderElectionTiming, type LeadershipStats } from "./leaderElection";
export { KubeLeaseStore, type LeaseStore, type LeaseRecord } from "./leaseStore";
export { RelayReplica, type ReplicaRole, type ReplicaStats } from "./replica";
