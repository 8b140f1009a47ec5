/**
 * The runner's decisions, with in-memory stand-ins for the store, the ledger and the clusters (pure
 * logic). The same guarantees are checked against the real API server and DynamoDB Local in
 * test/integration.
 */

import { beforeEach, describe, expect, it, vi } from "vitest";
import type { ReconcileRequest } from "../../../src/contracts/request";
import { findCondition } from "../../../src/dvm/conditions";
import { EXECUTABLE_PHASES, type ExecutablePhaseName, ITINERARIES, type PhaseName } from "../../../src/dvm/itinerary";
import { DEFAULT_MIGRATION_POLICY } from "../../../src/dvm/policy";
import type { DvmStore } from "../../../src/kube/dvmStore";
import { KubeApiError } from "../../../src/kube/errors";
import type { ClusterResolver } from "../../../src/kube/resolver";
import { advance, type PhaseBody, type PhaseOutcome } from "../../../src/phases/types";
import { PhaseRunner } from "../../../src/runner/runner";
import { FakeCluster } from "../../support/fakeCluster";
import { MemoryLedger } from "../../support/memoryLedger";
import { MemoryDvmStore } from "../../support/memoryStore";

/** In the DVM's own namespace (MemoryDvmStore's), which the default migration policy allows. */
const SPEC = {
  persistentVolumeClaims: [{ name: "data", namespace: "openshift-migration", targetStorageClass: "standard", targetAccessModes: ["ReadWriteOnce"] }],
};

type Bodies = Record<ExecutablePhaseName, PhaseBody>;

function countingBodies(overrides: Partial<Record<PhaseName, () => Promise<PhaseOutcome>>> = {}) {
  const executions = new Map<string, number>();
  const bodies = Object.fromEntries(
    EXECUTABLE_PHASES.map((phase) => [
      phase,
      async () => {
        executions.set(phase, (executions.get(phase) ?? 0) + 1);
        return (overrides[phase] ?? (async () => advance()))();
      },
    ]),
  ) as unknown as Bodies;
  return { bodies, executions };
}

describe("PhaseRunner", () => {
  let now: number;
  let store: MemoryDvmStore;
  let ledger: MemoryLedger;
  let resolver: ClusterResolver;
  let request: ReconcileRequest;
  const clock = { now: () => now };

  beforeEach(() => {
    now = Date.parse("2026-01-01T00:00:00Z");
    store = new MemoryDvmStore(SPEC);
    ledger = new MemoryLedger(() => now);
    const host = new FakeCluster("host");
    resolver = { resolve: async () => ({ host, source: host, destination: host, sameCluster: true }) };
    const { uid, namespace, name } = store.current().metadata;
    request = { uid, namespace, name };
  });

  const runner = (bodies: Bodies, leaseMs = 60_000) => new PhaseRunner({ store, ledger, clusters: resolver, bodies, clock, leaseMs });

  async function drive(r: PhaseRunner, limit = 100) {
    for (let i = 0; i < limit; i++) {
      const result = await r.run(request);
      now += 1_000;
      if (result.kind === "finished") return;
    }
    throw new Error("did not finish");
  }

  it("drives a DVM from an empty status to Completed, each phase body once, one ledger entry each", async () => {
    const { bodies, executions } = countingBodies();
    await drive(runner(bodies));
    const status = store.current().status;
    expect(status.phase).toBe("Completed");
    expect(findCondition(status.conditions, "Succeeded")?.status).toBe("True");
    const expected = ITINERARIES.VolumeMigration.filter((p) => p !== "Completed");
    expect([...executions.keys()]).toEqual(expected);
    expect([...executions.values()].every((n) => n === 1)).toBe(true);
    const history = await ledger.history(request.uid);
    expect(history.map((e) => e.key.phase)).toEqual(expected);
    expect(history.every((e) => e.state === "COMPLETED")).toBe(true);
  });

  it("resolves the clusters while the deletion fence re-reads the DVM, and runs the body only after both", async () => {
    const { bodies, executions } = countingBodies();
    const host = new FakeCluster("host");
    let resolves = 0;
    resolver = { resolve: async () => (resolves++, { host, source: host, destination: host, sameCluster: true }) };
    let reads = 0;
    let release!: () => void;
    const fence = new Promise<void>((resolve) => (release = resolve));
    const gated: DvmStore = {
      // The second read of the invocation is the fence's, right after the claim: held until released.
      get: async (namespace, name) => (++reads === 2 && (await fence), store.get(namespace, name)),
      writeStatus: (dvm, status) => store.writeStatus(dvm, status),
      writeFinalizers: (dvm, finalizers) => store.writeFinalizers(dvm, finalizers),
    };
    const running = new PhaseRunner({ store: gated, ledger, clusters: resolver, bodies, clock, leaseMs: 60_000 }).run(request);
    await vi.waitFor(() => expect(reads).toBe(2), { timeout: 100, interval: 1 });
    expect(resolves).toBe(1);
    expect(executions.get("Started")).toBeUndefined();
    release();
    expect(await running).toMatchObject({ kind: "advanced", phase: "Started" });
    expect(executions.get("Started")).toBe(1);
  });

  it("decides from the fresh object, not from a stale request", async () => {
    const { bodies, executions } = countingBodies();
    const r = runner(bodies);
    const stale = { ...request, resourceVersion: "1", generation: 1 };
    await r.run(stale);
    await r.run(stale);
    await r.run(stale);
    expect(executions.get("Started")).toBe(1);
    expect(executions.get("CleanStaleRsyncResources")).toBe(1);
    expect(store.current().status.phase).toBe("CreateDestinationNamespaces");
  });

  it("does not run a completed phase again when the status lags; it repairs the status", async () => {
    const { bodies, executions } = countingBodies();
    const r = runner(bodies);
    // The status write after completion is lost (a crash between ledger and status).
    store.beforeWrite = () => {
      throw new Error("crash before the status write");
    };
    await expect(r.run(request)).rejects.toThrow("crash");
    delete store.beforeWrite;
    expect(store.current().status.phase).toBeUndefined();
    const result = await r.run(request);
    expect(result).toMatchObject({ kind: "duplicate", phase: "Started", next: "CleanStaleRsyncResources", statusRepaired: true });
    expect(executions.get("Started")).toBe(1);
    expect(store.current().status.phase).toBe("CleanStaleRsyncResources");
  });

  it("runs a phase body once under concurrent invocations", async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const { bodies, executions } = countingBodies({ Started: async () => (await gate, advance()) });
    const r = runner(bodies);
    const results = Promise.all([r.run(request), r.run(request), r.run(request)]);
    await new Promise((resolve) => setTimeout(resolve, 10));
    release();
    const kinds = (await results).map((x) => x.kind).sort();
    expect(kinds).toEqual(["advanced", "busy", "busy"]);
    expect(executions.get("Started")).toBe(1);
  });

  it("re-reads on a conflict and writes on the new resourceVersion", async () => {
    const { bodies } = countingBodies();
    let touched = false;
    store.beforeWrite = (s) => {
      if (!touched) {
        touched = true;
        s.touch((dvm) => (dvm.metadata.labels = { unrelated: "change" }));
      }
    };
    const result = await runner(bodies).run(request);
    expect(result.kind).toBe("advanced");
    expect(store.current().status.phase).toBe("CleanStaleRsyncResources");
    expect(store.current().metadata.labels).toEqual({ unrelated: "change" });
  });

  it("never overwrites a status that someone else moved on", async () => {
    const { bodies } = countingBodies();
    store.beforeWrite = (s) => {
      s.touch((dvm) => (dvm.status = { ...dvm.status, itinerary: "VolumeMigration", phase: "CreateDestinationPVCs" }));
      delete s.beforeWrite;
    };
    await runner(bodies).run(request);
    expect(store.current().status.phase).toBe("CreateDestinationPVCs");
  });

  it("retries a transient error on the same phase, without failing the migration", async () => {
    let calls = 0;
    const { bodies, executions } = countingBodies({
      CleanStaleRsyncResources: async () => {
        if (++calls === 1) throw new Error("etcdserver: request timed out");
        return advance();
      },
    });
    const r = runner(bodies);
    await r.run(request);
    const retry = await r.run(request);
    expect(retry).toMatchObject({ kind: "retry", phase: "CleanStaleRsyncResources" });
    expect(findCondition(store.current().status.conditions, "PhaseRetrying")?.message).toMatch(/timed out/);
    expect((await r.run(request)).kind).toBe("advanced");
    expect(executions.get("CleanStaleRsyncResources")).toBe(2);
    expect(findCondition(store.current().status.conditions, "PhaseRetrying")).toBeUndefined();
    expect(store.current().status.errors).toBeUndefined();
  });

  it("waits as long as the API server's Retry-After asks when a body was throttled (429), up to the backoff cap", async () => {
    let calls = 0;
    const { bodies } = countingBodies({
      CleanStaleRsyncResources: async () => {
        calls++;
        throw new KubeApiError("create Pod: Too many requests", 429, "TooManyRequests", calls === 1 ? 7_000 : 600_000);
      },
    });
    const r = runner(bodies);
    await r.run(request);
    expect(await r.run(request)).toMatchObject({ kind: "retry", phase: "CleanStaleRsyncResources", retryAfterMs: 7_000 });
    // A Retry-After beyond the runner's cap (30 s by default) waits the cap.
    expect(await r.run(request)).toMatchObject({ kind: "retry", retryAfterMs: 30_000 });
  });

  it("polls a wait phase without completing it, then advances", async () => {
    let polls = 0;
    const { bodies } = countingBodies({ Started: async () => (++polls < 3 ? { kind: "wait", reason: "not yet" } : advance()) });
    const r = runner(bodies);
    expect(await r.run(request)).toMatchObject({ kind: "waiting", requeueAfterMs: 100 });
    expect(await r.run(request)).toMatchObject({ kind: "waiting" });
    expect(await r.run(request)).toMatchObject({ kind: "advanced" });
    const [entry] = await ledger.history(request.uid);
    expect(entry).toMatchObject({ state: "COMPLETED", attempts: 3, waits: 2 });
  });

  it("lets a wait phase's progress write go when it loses every conflict retry: the next poll writes it", async () => {
    const warning = { type: "StillWaiting", status: "True" as const, category: "Warn" as const, reason: "Started", message: "not yet" };
    const { bodies } = countingBodies({ Started: async () => ({ kind: "wait", reason: "not yet", warnings: [warning] }) });
    // Someone else changes the DVM before each of the runner's writes: every guarded write conflicts.
    store.beforeWrite = (s) => s.touch((dvm) => (dvm.metadata.labels = { unrelated: `change-${now++}` }));
    expect(await runner(bodies).run(request)).toMatchObject({ kind: "waiting", phase: "Started" });
    expect(findCondition(store.current().status.conditions, "StillWaiting")).toBeUndefined();
  });

  it("takes over an expired lease; the previous holder cannot complete", async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let calls = 0;
    const { bodies, executions } = countingBodies({ Started: async () => (++calls === 1 ? (await gate, advance()) : advance()) });
    const r = runner(bodies, 5_000);
    const stalled = r.run(request);
    await new Promise((resolve) => setTimeout(resolve, 10));
    now += 10_000;
    expect(await r.run(request)).toMatchObject({ kind: "advanced", phase: "Started" });
    release();
    expect(await stalled).toMatchObject({ kind: "busy" });
    expect(executions.get("Started")).toBe(2);
    const [entry] = await ledger.history(request.uid);
    expect(entry).toMatchObject({ takeovers: 1, attempts: 2 });
    expect(store.current().status.phase).toBe("CleanStaleRsyncResources");
  });

  it("fails into the failure itinerary, cleans up, and completes without Succeeded", async () => {
    const { bodies, executions } = countingBodies({
      RunRsyncOperations: async () => ({ kind: "fail", errors: ["spec.persistentVolumeClaims[0]: app/data failed after 3 attempts"] }),
    });
    await drive(runner(bodies));
    const status = store.current().status;
    expect(status).toMatchObject({ phase: "Completed", itinerary: "VolumeMigrationFailed" });
    expect(status.errors).toEqual(["spec.persistentVolumeClaims[0]: app/data failed after 3 attempts"]);
    expect(findCondition(status.conditions, "Failed")).toMatchObject({ reason: "RunRsyncOperations", durable: true });
    expect(findCondition(status.conditions, "Succeeded")).toBeUndefined();
    expect(executions.get("CleanupAfterFailure")).toBe(1);
    expect(executions.get("DeleteRsyncResources")).toBeUndefined();
  });

  it("fails an invalid spec with the field named, before any phase body runs", async () => {
    store = new MemoryDvmStore({ persistentVolumeClaims: [{ name: "data", namespace: "app", targetAccessModes: ["ReadWriteOnce"] }] });
    const { bodies, executions } = countingBodies();
    await drive(runner(bodies));
    const status = store.current().status;
    expect(status.itinerary).toBe("VolumeMigrationFailed");
    expect(status.errors?.[0]).toMatch(/^spec\.persistentVolumeClaims\[0\]\.targetStorageClass: /);
    expect(executions.get("Started")).toBeUndefined();
  });

  it("refuses what the migration policy forbids before any body runs or any Secret is resolved, naming each field", async () => {
    store = new MemoryDvmStore({
      ...SPEC,
      runAsRoot: true,
      destinationCluster: { kubeconfigSecretRef: { name: "dst", namespace: "kube-system" } },
      persistentVolumeClaims: [{ ...SPEC.persistentVolumeClaims[0], namespace: "other-team" }],
    });
    const resolved: unknown[] = [];
    const host = new FakeCluster("host");
    resolver = { resolve: async (_ns, spec) => (resolved.push(spec), { host, source: host, destination: host, sameCluster: true }) };
    const { bodies, executions } = countingBodies();
    await drive(runner(bodies));
    const status = store.current().status;
    expect(status).toMatchObject({ phase: "Completed", itinerary: "VolumeMigrationFailed" });
    expect(status.errors).toEqual([
      expect.stringMatching(/^spec\.persistentVolumeClaims\[0\]\.namespace: must be the DVM's namespace "openshift-migration"/),
      expect.stringMatching(/^spec\.destinationCluster\.kubeconfigSecretRef\.namespace: /),
      expect.stringMatching(/^spec\.runAsRoot: only DVMs in an admin namespace/),
    ]);
    expect(findCondition(status.conditions, "Failed")).toMatchObject({ category: "Critical" });
    expect(executions.get("Started")).toBeUndefined();
    // The cleanup of a refused DVM follows none of its references.
    expect(resolved).toEqual(resolved.map(() => ({ persistentVolumeClaims: [] })));
  });

  it("allows the same spec from an admin namespace the operator configured", async () => {
    store = new MemoryDvmStore({ ...SPEC, runAsRoot: true, persistentVolumeClaims: [{ ...SPEC.persistentVolumeClaims[0], namespace: "other-team" }] });
    const { bodies, executions } = countingBodies();
    const admin = new PhaseRunner({
      store,
      ledger,
      clusters: resolver,
      bodies,
      clock,
      policy: { ...DEFAULT_MIGRATION_POLICY, adminNamespaces: ["openshift-migration"] },
    });
    await drive(admin);
    expect(store.current().status).toMatchObject({ phase: "Completed", itinerary: "VolumeMigration" });
    expect(executions.get("Started")).toBe(1);
  });

  it("reports a DVM that is gone or was recreated under another uid", async () => {
    const { bodies } = countingBodies();
    expect(await runner(bodies).run({ ...request, uid: "another" })).toEqual({ kind: "gone" });
    store.remove();
    expect(await runner(bodies).run(request)).toEqual({ kind: "gone" });
  });

  it("starts a Rollback DVM on the rollback itinerary", async () => {
    store = new MemoryDvmStore({ ...SPEC, migrationType: "Rollback" });
    const { bodies, executions } = countingBodies();
    await drive(runner(bodies));
    expect(store.current().status.itinerary).toBe("VolumeMigrationRollback");
    expect(executions.get("CreateDestinationPVCs")).toBeUndefined();
  });
});
