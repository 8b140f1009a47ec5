/** The watch relay: watch DVMs and what they own, coalesce per uid, forward reconcile requests. */

export { parseRelayEnv, type RelayConfig, RelayConfigError } from "./config";
export { DEFAULT_HEALTH_PORT, type HealthServer, type HealthServerOptions, startHealthServer } from "./health";
export {
  functionPerPhase,
  LambdaInvokeError,
  LambdaTransport,
  type LambdaTransportOptions,
  type RelayInvocationType,
  RemoteFunctionError,
  sharedFunction,
} from "./lambdaTransport";
export { LEADER_ELECTION_DEFAULTS, type LeaderElectionTiming, LeaderElector, type LeadershipStats } from "./leaderElection";
export { KubeLeaseStore, type LeaseRecord, type LeaseStore } from "./leaseStore";
export { DEFAULT_CONCURRENCY, WorkQueue, type WorkQueueOptions } from "./queue";
export { RELAY_DEFAULTS, Relay, type RelayCluster, type RelayOptions, type RelayStats, type WatchStats } from "./relay";
export { RelayReplica, type ReplicaRole, type ReplicaStats } from "./replica";
export { type ForwardContext, InProcessTransport, type RelayTransport } from "./transport";
