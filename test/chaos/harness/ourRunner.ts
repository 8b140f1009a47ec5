/**
 * Our phase runner as the harness runs it (in this process, or in a worker): the real PhaseRunner with
 * the real store, ledger and cluster resolver, the real bodies wrapped for counting, and one seam: an
 * invocation may be handed a stale DVM to serve as its first read (the lagging cache of the upstream
 * bug), to show that the guarantee does not rest on the read being fresh.
 */

import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { KubeConfig } from "@kubernetes/client-node";
import { DynamoPhaseLedger } from "../../../src/aws/ledger";
import type { ReconcileRequest, RunResult, RunStats } from "../../../src/contracts/request";
import { DEFAULT_MIGRATION_POLICY, type MigrationPolicy } from "../../../src/dvm/policy";
import type { DirectVolumeMigration, DvmStatus } from "../../../src/dvm/types";
import { type DvmStore, KubeDvmStore } from "../../../src/kube/dvmStore";
import { SecretClusterResolver } from "../../../src/kube/resolver";
import { PhaseRunner } from "../../../src/runner/runner";
import { type BodyHooks, countedBodies, invocationScope } from "./bodies";

/**
 * The harness's DVMs live in the namespace prepareMigrations names ("cx-…" for the chaos scenarios,
 * "scale" and "scale-baseline" for bench/scale.ts) and move PVCs across namespaces, as an admin's would.
 */
export const CHAOS_MIGRATION_POLICY: MigrationPolicy = {
  ...DEFAULT_MIGRATION_POLICY,
  adminNamespaces: ["cx-*", "scale", "scale-*"],
  // kwok's test annotations (infra/dev/kwok/stages.yaml) steer the fake pods.
  transfer: { ...DEFAULT_MIGRATION_POLICY.transfer, podAnnotations: ["dvm.test/*"] },
};

export interface OurRunnerOptions {
  hostKubeConfig: KubeConfig;
  dynamo: DynamoDBClient;
  tableName: string;
  leaseMs: number;
  hooks: BodyHooks;
  /** Called before every status write (crash injection between the ledger completion and the status write). */
  beforeStatusWrite?: (dvm: DirectVolumeMigration, status: DvmStatus) => Promise<void>;
}

export interface OurInvocation {
  result: RunResult;
  stats: RunStats;
  bodyMs: number;
}

export interface OurRunner {
  invoke(request: ReconcileRequest, staleDvm?: DirectVolumeMigration): Promise<OurInvocation>;
}

export function buildOurRunner(options: OurRunnerOptions): OurRunner {
  const fresh = new KubeDvmStore(options.hostKubeConfig);
  const store: DvmStore = {
    async get(namespace, name) {
      const scope = invocationScope.getStore();
      const stale = scope?.staleDvm;
      if (stale && stale.metadata.namespace === namespace && stale.metadata.name === name) {
        // Only the invocation's first read lags; re-reads after a 409 go to the API server.
        delete scope.staleDvm;
        return stale;
      }
      return fresh.get(namespace, name);
    },
    async writeStatus(dvm, status) {
      await options.beforeStatusWrite?.(dvm, status);
      return fresh.writeStatus(dvm, status);
    },
    writeFinalizers: (dvm, finalizers) => fresh.writeFinalizers(dvm, finalizers),
  };
  const runner = new PhaseRunner({
    store,
    ledger: new DynamoPhaseLedger({ client: options.dynamo, tableName: options.tableName }),
    clusters: new SecretClusterResolver(options.hostKubeConfig),
    bodies: countedBodies(options.hooks),
    leaseMs: options.leaseMs,
    maxRetryDelayMs: 2_000,
    policy: CHAOS_MIGRATION_POLICY,
  });
  return {
    async invoke(request, staleDvm) {
      const scope = { bodyMs: 0, ...(staleDvm ? { staleDvm } : {}) };
      const { result, stats } = await invocationScope.run(scope, () => runner.runWithStats(request));
      return { result, stats, bodyMs: scope.bodyMs };
    },
  };
}
