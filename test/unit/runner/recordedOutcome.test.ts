/**
 * The crash window between the ledger's completion and the status write: the repair that follows must
 * apply exactly what the body decided (its status update, its failure category), as recorded with the
 * completion. In-memory stand-ins (pure logic); test/integration/ledger.test.ts round-trips the same
 * record through DynamoDB Local.
 */

import { beforeEach, describe, expect, it } from "vitest";
import type { ReconcileRequest } from "../../../src/contracts/request";
import { findCondition } from "../../../src/dvm/conditions";
import { EXECUTABLE_PHASES, type ExecutablePhaseName } from "../../../src/dvm/itinerary";
import type { ClusterResolver } from "../../../src/kube/resolver";
import { advance, type PhaseBody, type PhaseOutcome, type StatusUpdate } from "../../../src/phases/types";
import { PhaseRunner } from "../../../src/runner/runner";
import { FakeCluster } from "../../support/fakeCluster";
import { MemoryLedger } from "../../support/memoryLedger";
import { MemoryDvmStore } from "../../support/memoryStore";

// In the DVM's own namespace (MemoryDvmStore's), which the default migration policy allows.
const SPEC = {
  persistentVolumeClaims: [{ name: "data", namespace: "openshift-migration", targetStorageClass: "standard", targetAccessModes: ["ReadWriteOnce"] }],
};
const PVC = { name: "data", namespace: "openshift-migration" };
const POD = { name: "rsync-client-1", namespace: "openshift-migration", pvcRef: PVC };

function bodiesWith(rsync: () => Promise<PhaseOutcome>): Record<ExecutablePhaseName, PhaseBody> {
  const bodies = Object.fromEntries(EXECUTABLE_PHASES.map((phase) => [phase, async () => advance()])) as unknown as Record<ExecutablePhaseName, PhaseBody>;
  bodies.RunRsyncOperations = rsync;
  return bodies;
}

describe("a crash between the ledger completion and the status write", () => {
  let store: MemoryDvmStore;
  let ledger: MemoryLedger;
  let resolver: ClusterResolver;
  let request: ReconcileRequest;

  beforeEach(() => {
    store = new MemoryDvmStore(SPEC);
    ledger = new MemoryLedger();
    const host = new FakeCluster("host");
    resolver = { resolve: async () => ({ host, source: host, destination: host, sameCluster: true }) };
    const { uid, namespace, name } = store.current().metadata;
    request = { uid, namespace, name };
  });

  /** Runs the migration; the first status write that leaves RunRsyncOperations "crashes" the invocation. */
  async function runWithCrashAfterRsync(runner: PhaseRunner): Promise<void> {
    let crashed = false;
    store.beforeWrite = (s) => {
      if (!crashed && s.current().status.phase === "RunRsyncOperations") {
        crashed = true;
        throw new Error("process killed after the ledger write");
      }
    };
    for (let i = 0; i < 100; i++) {
      const result = await runner.run(request).catch((error: Error) => ({ kind: "crashed", error }));
      if (result.kind === "finished") break;
    }
    expect(crashed).toBe(true);
  }

  it("keeps the per-PVC results the body decided (the repair replays the recorded status update)", async () => {
    const status: StatusUpdate = {
      rsyncOperations: [{ pvcReference: PVC, currentAttempt: 1, succeeded: true }],
      successfulPods: [POD],
      runningPods: [],
      pendingPods: [],
    };
    let executions = 0;
    const runner = new PhaseRunner({ store, ledger, clusters: resolver, bodies: bodiesWith(async () => (executions++, advance(status))) });
    await runWithCrashAfterRsync(runner);

    const done = store.current().status;
    expect(done.phase).toBe("Completed");
    expect(executions).toBe(1);
    expect(done.rsyncOperations).toEqual(status.rsyncOperations);
    expect(done.successfulPods).toEqual([POD]);
    const entry = (await ledger.history(request.uid)).find((e) => e.key.phase === "RunRsyncOperations");
    expect(entry?.outcome?.statusUpdate).toEqual(status);
  });

  it("keeps the warnings the body raised with its outcome (files vanished) past the phase change", async () => {
    const warning = {
      type: "RsyncFilesVanished",
      status: "True" as const,
      category: "Warn" as const,
      reason: "SourceFilesVanished",
      message: "app/data: 2 files vanished during the transfer",
    };
    const runner = new PhaseRunner({
      store,
      ledger,
      clusters: resolver,
      bodies: bodiesWith(async () => ({
        kind: "advance",
        status: { rsyncOperations: [{ pvcReference: PVC, currentAttempt: 1, succeeded: true }] },
        warnings: [warning],
      })),
    });
    await runWithCrashAfterRsync(runner);
    const done = store.current().status;
    expect(done.phase).toBe("Completed");
    expect(findCondition(done.conditions, "RsyncFilesVanished")).toMatchObject({ ...warning, durable: true });
    expect(findCondition(done.conditions, "Succeeded")?.status).toBe("True");
  });

  it("keeps a failure's category and its per-PVC results", async () => {
    const status: StatusUpdate = { rsyncOperations: [{ pvcReference: PVC, currentAttempt: 3, failed: true }], failedPods: [POD] };
    const runner = new PhaseRunner({
      store,
      ledger,
      clusters: resolver,
      bodies: bodiesWith(async () => ({ kind: "fail", category: "Warn", errors: ["spec.persistentVolumeClaims[0]: rsync failed"], status })),
    });
    await runWithCrashAfterRsync(runner);

    const done = store.current().status;
    expect(done).toMatchObject({ phase: "Completed", itinerary: "VolumeMigrationFailed" });
    expect(findCondition(done.conditions, "Failed")).toMatchObject({ status: "True", category: "Warn", reason: "RunRsyncOperations" });
    expect(done.rsyncOperations).toEqual(status.rsyncOperations);
    expect(done.failedPods).toEqual([POD]);
  });
});
