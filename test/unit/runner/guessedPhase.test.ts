/**
 * A request that names the phase (the relay's guess) has that phase claimed before the DVM is read, so
 * one read serves as the fresh read and as the deletion fence. These check that the guess only ever
 * saves a read: a wrong, stale or forged guess runs nothing the fresh object does not call for, a DVM
 * deleted or recreated meanwhile gets nothing, and a deletion that begins after the claim waits for it.
 * In-memory stand-ins (pure logic), as in runner.test.ts.
 */

import { beforeEach, describe, expect, it, vi } from "vitest";
import type { ReconcileRequest } from "../../../src/contracts/request";
import { EXECUTABLE_PHASES, type ExecutablePhaseName } from "../../../src/dvm/itinerary";
import type { DvmSpec } from "../../../src/dvm/types";
import type { DvmStore } from "../../../src/kube/dvmStore";
import type { ClusterResolver } from "../../../src/kube/resolver";
import { silentLogger } from "../../../src/lib/log";
import { advance, type PhaseBody } from "../../../src/phases/types";
import { continueDeletion } from "../../../src/runner/deletion";
import { PhaseRunner } from "../../../src/runner/runner";
import { FakeCluster } from "../../support/fakeCluster";
import { MemoryLedger } from "../../support/memoryLedger";
import { MemoryDvmStore } from "../../support/memoryStore";

const SPEC = {
  persistentVolumeClaims: [{ name: "data", namespace: "openshift-migration", targetStorageClass: "standard", targetAccessModes: ["ReadWriteOnce"] }],
  destinationCluster: { kubeconfigSecretRef: { name: "destination", key: "kubeconfig" } },
};

describe("PhaseRunner with a guessed phase", () => {
  let now: number;
  let store: MemoryDvmStore;
  let ledger: MemoryLedger;
  let reads: number;
  let resolved: { namespace: string; spec: Pick<DvmSpec, "sourceCluster" | "destinationCluster"> }[];
  let executions: Map<string, number>;
  let beforeRead: () => Promise<void>;
  const clock = { now: () => now };
  const host = new FakeCluster("host");

  beforeEach(() => {
    now = Date.parse("2026-01-01T00:00:00Z");
    store = new MemoryDvmStore(SPEC);
    ledger = new MemoryLedger(() => now);
    reads = 0;
    resolved = [];
    executions = new Map();
    beforeRead = async () => {};
  });

  const counted: DvmStore = {
    get: async (namespace, name) => (reads++, await beforeRead(), store.get(namespace, name)),
    writeStatus: (dvm, status) => store.writeStatus(dvm, status),
    writeFinalizers: (dvm, finalizers) => store.writeFinalizers(dvm, finalizers),
  };
  const resolver: ClusterResolver = {
    resolve: async (namespace, spec) => (resolved.push({ namespace, spec }), { host, source: host, destination: host, sameCluster: false }),
  };
  const bodies = Object.fromEntries(
    EXECUTABLE_PHASES.map((phase) => [phase, (async () => (executions.set(phase, (executions.get(phase) ?? 0) + 1), advance())) as PhaseBody]),
  ) as Record<ExecutablePhaseName, PhaseBody>;
  const runner = () => new PhaseRunner({ store: counted, ledger, clusters: resolver, bodies, clock, leaseMs: 60_000 });

  function requestAt(phase?: string): ReconcileRequest {
    const { uid, namespace, name, generation } = store.current().metadata;
    return { uid, namespace, name, generation, ...(phase ? { phase } : {}) };
  }

  /** Runs Started without a guess (it adopts the DVM), so the DVM sits at CleanStaleRsyncResources. */
  async function started(r: PhaseRunner): Promise<void> {
    expect(await r.run(requestAt())).toMatchObject({ kind: "advanced", next: "CleanStaleRsyncResources" });
    reads = 0;
  }

  it("runs the guessed phase on one read of the DVM", async () => {
    const r = runner();
    await started(r);
    expect(await r.run(requestAt("CleanStaleRsyncResources"))).toMatchObject({ kind: "advanced", phase: "CleanStaleRsyncResources" });
    expect(reads).toBe(1);
    expect(executions.get("CleanStaleRsyncResources")).toBe(1);
    const entry = (await ledger.history(requestAt().uid)).find((e) => e.key.phase === "CleanStaleRsyncResources");
    expect(entry).toMatchObject({ state: "COMPLETED", attempts: 1, waits: 0 });
  });

  it("without a guess reads twice: once to decide, once after the claim as the deletion fence", async () => {
    const r = runner();
    await started(r);
    expect(await r.run(requestAt())).toMatchObject({ kind: "advanced", phase: "CleanStaleRsyncResources" });
    expect(reads).toBe(2);
  });

  it("a stale guess (a phase already completed) runs the phase the fresh read shows, and nothing again", async () => {
    const r = runner();
    await started(r);
    expect(await r.run(requestAt("Started"))).toMatchObject({ kind: "advanced", phase: "CleanStaleRsyncResources" });
    expect(executions.get("Started")).toBe(1);
    expect(executions.get("CleanStaleRsyncResources")).toBe(1);
    expect(store.current().status.phase).toBe("WaitForStaleRsyncResourcesTerminated");
  });

  it("a guess of a phase the DVM is not in gives its claim back unrun and runs the right one", async () => {
    const r = runner();
    await started(r);
    expect(await r.run(requestAt("CreateRsyncTransferPods"))).toMatchObject({ kind: "advanced", phase: "CleanStaleRsyncResources" });
    expect(executions.get("CreateRsyncTransferPods")).toBeUndefined();
    const guessed = (await ledger.history(requestAt().uid)).find((e) => e.key.phase === "CreateRsyncTransferPods");
    expect(guessed).toMatchObject({ state: "WAITING", attempts: 1 });
    expect(store.current().status.phase).toBe("WaitForStaleRsyncResourcesTerminated");
  });

  it("a guess of another generation is not taken for the fresh one", async () => {
    const r = runner();
    await started(r);
    const result = await r.run({ ...requestAt("CleanStaleRsyncResources"), generation: 7 });
    expect(result).toMatchObject({ kind: "advanced", phase: "CleanStaleRsyncResources" });
    const history = await ledger.history(requestAt().uid);
    expect(history.find((e) => e.key.generation === 7)).toMatchObject({ state: "WAITING" });
    expect(history.find((e) => e.key.generation === 1 && e.key.phase === "CleanStaleRsyncResources")).toMatchObject({ state: "COMPLETED" });
  });

  it("a guess that is not an executable phase is ignored", async () => {
    const r = runner();
    await started(r);
    expect(await r.run(requestAt("Completed"))).toMatchObject({ kind: "advanced", phase: "CleanStaleRsyncResources" });
    expect(await r.run(requestAt("no such phase"))).toMatchObject({ kind: "advanced", phase: "WaitForStaleRsyncResourcesTerminated" });
  });

  it("a guessed phase held by another invocation answers busy without reading the DVM", async () => {
    const r = runner();
    await started(r);
    const { uid, generation } = store.current().metadata;
    await ledger.claim({ uid, phase: "CleanStaleRsyncResources", generation: generation! }, { leaseMs: 30_000 });
    expect(await r.run(requestAt("CleanStaleRsyncResources"))).toMatchObject({ kind: "busy", phase: "CleanStaleRsyncResources", retryAfterMs: 30_000 });
    expect(reads).toBe(0);
    expect(executions.get("CleanStaleRsyncResources")).toBeUndefined();
  });

  it("a completed guessed phase whose status write was lost is repaired, not run again", async () => {
    const r = runner();
    await started(r);
    store.beforeWrite = () => {
      throw new Error("crash before the status write");
    };
    await expect(r.run(requestAt("CleanStaleRsyncResources"))).rejects.toThrow("crash");
    delete store.beforeWrite;
    expect(await r.run(requestAt("CleanStaleRsyncResources"))).toMatchObject({ kind: "duplicate", statusRepaired: true });
    expect(executions.get("CleanStaleRsyncResources")).toBe(1);
    expect(store.current().status.phase).toBe("WaitForStaleRsyncResourcesTerminated");
  });

  it("a DVM being deleted gets nothing run for its guess: the claim is given back and the deletion goes on", async () => {
    const r = runner();
    await started(r);
    const request = requestAt("CleanStaleRsyncResources");
    store.markDeleted();
    // Nothing was created for it, so its deletion finishes in this very invocation.
    expect(await r.run(request)).toEqual({ kind: "gone" });
    expect(executions.get("CleanStaleRsyncResources")).toBeUndefined();
    const guessed = (await ledger.history(request.uid)).find((e) => e.key.phase === "CleanStaleRsyncResources");
    expect(guessed?.state).toBe("WAITING");
  });

  it("a deletion that begins after the guessed claim waits for it, and the read after the claim stops the body", async () => {
    const r = runner();
    await started(r);
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    // The read after the claim is held; meanwhile the DVM is deleted and its deletion tries to finish.
    beforeRead = () => held;
    const running = r.run(requestAt("CleanStaleRsyncResources"));
    await vi.waitFor(() => expect(reads).toBeGreaterThan(0), { timeout: 100, interval: 1 });
    beforeRead = async () => {};
    store.markDeleted();
    const deletion = await continueDeletion({ store, ledger, clusters: resolver, clock, log: silentLogger }, store.current());
    expect(deletion).toMatchObject({ kind: "leaseHeld", phases: ["CleanStaleRsyncResources"] });
    release();
    // Given back unrun, and the deletion it then carries on finishes: nothing was created.
    expect(await running).toEqual({ kind: "gone" });
    expect(executions.get("CleanStaleRsyncResources")).toBeUndefined();
    expect(await store.get("openshift-migration", "dvm")).toBeUndefined();
  });

  it("a guess for a DVM that is gone, or was recreated under another uid, runs nothing and leaves the entry retired", async () => {
    const r = runner();
    await started(r);
    const old = requestAt("CleanStaleRsyncResources");
    store.remove();
    expect(await r.run(old)).toEqual({ kind: "gone" });
    const entries = [...ledger.entries.values()].filter((e) => e.key.phase === "CleanStaleRsyncResources");
    expect(entries).toHaveLength(1);
    expect(entries[0]).toMatchObject({ state: "WAITING" });
    expect(entries[0]!.expiresAt).toBeDefined();

    store = new MemoryDvmStore(SPEC, { uid: "99999999-2222-3333-4444-555555555555" });
    expect(await r.run(old)).toEqual({ kind: "gone" });
    expect(executions.get("CleanStaleRsyncResources")).toBeUndefined();
  });

  it("starts reading the Secrets the DVM named last time before it reads the DVM, and uses them only if the fresh spec names the same", async () => {
    const r = runner();
    await started(r);
    expect(resolved).toHaveLength(1);
    // Next invocation: the resolve starts before the DVM is read.
    let resolvesBeforeRead = -1;
    beforeRead = async () => {
      resolvesBeforeRead = resolved.length;
    };
    expect(await r.run(requestAt("CleanStaleRsyncResources"))).toMatchObject({ kind: "advanced" });
    expect(resolvesBeforeRead).toBe(2);
    expect(resolved).toHaveLength(2);

    // A spec that names another Secret (an edit that got through) is resolved fresh, after the read.
    store.touch((dvm) => ((dvm.spec as typeof SPEC).destinationCluster = { kubeconfigSecretRef: { name: "other", key: "kubeconfig" } }));
    await r.run(requestAt("CreateDestinationNamespaces"));
    expect(resolved.slice(2).map((x) => x.spec.destinationCluster?.kubeconfigSecretRef.name)).toEqual(["destination", "other"]);
  });
});
