/**
 * The composition root of a phase function: the real store, ledger and cluster resolver wired into the
 * runner. Handlers (functions/) and local runs call this; tests may wire the parts themselves.
 */

import type { KubeConfig } from "@kubernetes/client-node";
import type { ExecutablePhaseName } from "../dvm/itinerary";
import type { MigrationPolicy } from "../dvm/policy";
import { KubeDvmStore } from "../kube/dvmStore";
import { SecretClusterResolver } from "../kube/resolver";
import type { Clock } from "../lib/clock";
import { definedFields } from "../lib/definedFields";
import type { Logger } from "../lib/log";
import type { PhaseBody } from "../phases/types";
import { PhaseRunner, type RunnerOptions } from "../runner/runner";
import { createLedgerClient, DynamoPhaseLedger, type LedgerDynamoClient } from "./ledger";

export interface PhaseRunnerConfig {
  /** The host cluster: where the DVMs live. */
  hostKubeConfig: KubeConfig;
  ledgerTableName: string;
  /** Default: a client for AWS_ENDPOINT_URL(_DYNAMODB) or AWS, with the ledger's own retries. */
  dynamo?: LedgerDynamoClient;
  clock?: Clock;
  log?: Logger;
  leaseMs?: number;
  bodies?: Record<ExecutablePhaseName, PhaseBody>;
  /** What a DVM may reference; default DEFAULT_MIGRATION_POLICY (src/dvm/policy.ts). */
  policy?: MigrationPolicy;
  /** RunnerOptions.credentialGraceMs. */
  credentialGraceMs?: number;
  onResult?: RunnerOptions["onResult"];
}

export function createPhaseRunner(config: PhaseRunnerConfig): PhaseRunner {
  const clock = config.clock;
  return new PhaseRunner({
    store: new KubeDvmStore(config.hostKubeConfig),
    ledger: new DynamoPhaseLedger({
      client: config.dynamo ?? createLedgerClient(),
      tableName: config.ledgerTableName,
      ...(clock ? { now: () => clock.now() } : {}),
    }),
    clusters: new SecretClusterResolver(config.hostKubeConfig),
    ...definedFields({
      clock,
      log: config.log,
      // 0 leaves the runner's default, as unset does.
      leaseMs: config.leaseMs || undefined,
      bodies: config.bodies,
      onResult: config.onResult,
      policy: config.policy,
      credentialGraceMs: config.credentialGraceMs,
    }),
  });
}
