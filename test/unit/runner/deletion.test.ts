/**
 * Deletion, spec edits and unreadable statuses, as the runner decides them (in-memory store, ledger and
 * cluster: pure logic). test/integration/lifecycle.test.ts does the same through real API servers.
 */

import { beforeEach, describe, expect, it } from "vitest";
import type { ReconcileRequest } from "../../../src/contracts/request";
import { findCondition } from "../../../src/dvm/conditions";
import { EXECUTABLE_PHASES, type ExecutablePhaseName, type PhaseName } from "../../../src/dvm/itinerary";
import { type DirectVolumeMigration, DVM_FINALIZER } from "../../../src/dvm/types";
import type { DvmStore } from "../../../src/kube/dvmStore";
import { KINDS } from "../../../src/kube/objects";
import { ClusterCredentialsUnavailableError, type ClusterResolver } from "../../../src/kube/resolver";
import { dvmShortId, transferLabels } from "../../../src/phases/names";
import { advance, type PhaseBody, type PhaseContext, type PhaseOutcome } from "../../../src/phases/types";
import { PhaseRunner } from "../../../src/runner/runner";
import { FakeCluster } from "../../support/fakeCluster";
import { MemoryLedger } from "../../support/memoryLedger";
import { MemoryDvmStore } from "../../support/memoryStore";

/** A store whose first read returns `before` (the invocation read the DVM just before it changed). */
function staleOnce(store: MemoryDvmStore, before: DirectVolumeMigration): DvmStore {
  let first = true;
  return {
    get: async (namespace, name) => (first ? ((first = false), before) : store.get(namespace, name)),
    writeStatus: (dvm, status) => store.writeStatus(dvm, status),
    writeFinalizers: (dvm, finalizers) => store.writeFinalizers(dvm, finalizers),
  };
}

// In the DVM's own namespace (MemoryDvmStore's), which the default migration policy allows.
const SPEC = {
  persistentVolumeClaims: [{ name: "data", namespace: "openshift-migration", targetStorageClass: "standard", targetAccessModes: ["ReadWriteOnce"] }],
};

describe("the runner and the DVM's lifecycle", () => {
  let store: MemoryDvmStore;
  let ledger: MemoryLedger;
  let cluster: FakeCluster;
  let resolver: ClusterResolver;
  let request: ReconcileRequest;
  let entered: Map<string, number>;

  beforeEach(() => {
    store = new MemoryDvmStore(SPEC);
    ledger = new MemoryLedger();
    cluster = new FakeCluster("both");
    resolver = { resolve: async () => ({ host: cluster, source: cluster, destination: cluster, sameCluster: true }) };
    const { uid, namespace, name } = store.current().metadata;
    request = { uid, namespace, name };
    entered = new Map();
  });

  /** Bodies that count entries; CreateRsyncConfig creates a transfer Secret (something to clean up). */
  function runner(
    overrides: Partial<Record<PhaseName, (ctx: PhaseContext) => Promise<PhaseOutcome>>> = {},
    over: Partial<ConstructorParameters<typeof PhaseRunner>[0]> = {},
  ) {
    const bodies = Object.fromEntries(
      EXECUTABLE_PHASES.map((phase) => [
        phase,
        async (ctx: PhaseContext) => {
          entered.set(phase, (entered.get(phase) ?? 0) + 1);
          if (overrides[phase]) return overrides[phase]!(ctx);
          if (phase === "CreateRsyncConfig") {
            await ctx.clusters.source.ensure({
              ...KINDS.Secret,
              metadata: { name: `dvm-${dvmShortId(ctx.dvm)}-rsync-config`, namespace: "openshift-migration", labels: transferLabels(ctx.dvm, "config") },
            });
          }
          return advance();
        },
      ]),
    ) as unknown as Record<ExecutablePhaseName, PhaseBody>;
    return new PhaseRunner({ store, ledger, clusters: resolver, bodies, ...over });
  }

  async function runUntil(r: PhaseRunner, phase: PhaseName): Promise<void> {
    for (let i = 0; i < 50 && store.current().status.phase !== phase; i++) await r.run(request);
    expect(store.current().status.phase).toBe(phase);
  }

  const transferObjects = async () => cluster.list(KINDS.Secret, "openshift-migration", {});

  it("puts the finalizer on a DVM before the first phase runs", async () => {
    const r = runner({ Started: async () => (expect(store.current().metadata.finalizers).toEqual([DVM_FINALIZER]), advance()) });
    await r.run(request);
    expect(entered.get("Started")).toBe(1);
    expect(store.current().metadata.finalizers).toEqual([DVM_FINALIZER]);
  });

  it("on deletion removes the transfer objects, retires the ledger entries and releases the finalizer", async () => {
    const r = runner();
    await runUntil(r, "CreateStunnelConfig");
    expect(await transferObjects()).toHaveLength(1);
    store.markDeleted();
    expect(store.current().metadata.deletionTimestamp).toBeDefined();

    const results = [];
    for (let i = 0; i < 5 && results.at(-1)?.kind !== "gone"; i++) results.push(await r.run(request));
    expect(results.at(-1)).toEqual({ kind: "gone" });
    expect(await transferObjects()).toEqual([]);
    expect(await store.get(request.namespace, request.name)).toBeUndefined();
    expect([...ledger.entries.values()].every((e) => e.expiresAt !== undefined)).toBe(true);
  });

  it("on deletion waits for a kubeconfig Secret missing for a moment (rotation), then cleans up", async () => {
    let secretPresent = true;
    const both = resolver;
    resolver = {
      resolve: async (namespace, spec) => {
        if (!secretPresent)
          throw new ClusterCredentialsUnavailableError(["spec.destinationCluster.kubeconfigSecretRef.name: Secret openshift-migration/dst not found"]);
        return both.resolve(namespace, spec);
      },
    };
    let now = Date.parse("2026-01-01T00:00:00Z");
    const r = runner({}, { clock: { now: () => now } });
    await runUntil(r, "CreateStunnelConfig");
    store.markDeleted(new Date(now).toISOString());
    secretPresent = false;
    // Not released while the Secret may come back: the objects (a Secret with keys, in a cluster) stay reachable.
    expect(await r.run(request)).toMatchObject({ kind: "waiting", phase: "Deleting" });
    expect(await transferObjects()).toHaveLength(1);
    expect(store.current().metadata.finalizers).toContain(DVM_FINALIZER);
    secretPresent = true;
    now += 10_000;
    const results = [];
    for (let i = 0; i < 5 && results.at(-1)?.kind !== "gone"; i++) results.push(await r.run(request));
    expect(results.at(-1)).toEqual({ kind: "gone" });
    expect(await transferObjects()).toEqual([]);
  });

  it("on deletion gives up on a kubeconfig Secret still missing after the grace, and releases the DVM", async () => {
    const both = resolver;
    let secretPresent = true;
    resolver = {
      resolve: async (namespace, spec) => {
        if (!secretPresent)
          throw new ClusterCredentialsUnavailableError(["spec.destinationCluster.kubeconfigSecretRef.name: Secret openshift-migration/dst not found"]);
        return both.resolve(namespace, spec);
      },
    };
    let now = Date.parse("2026-01-01T00:00:00Z");
    const r = runner({}, { clock: { now: () => now }, credentialGraceMs: 60_000 });
    await runUntil(r, "CreateStunnelConfig");
    store.markDeleted(new Date(now).toISOString());
    secretPresent = false;
    now += 59_000;
    expect(await r.run(request)).toMatchObject({ kind: "waiting", phase: "Deleting" });
    now += 1_000;
    expect(await r.run(request)).toEqual({ kind: "gone" });
  });

  it("deleting a DVM whose spec the policy refuses follows none of its references: no Secret is read to clean up", async () => {
    // Another namespace's kubeconfig Secret: refused outside an admin namespace, so the migration failed
    // before anything was read; its deletion must not read it either.
    store = new MemoryDvmStore({ ...SPEC, destinationCluster: { kubeconfigSecretRef: { name: "theirs", namespace: "victim", key: "kubeconfig" } } });
    request = { ...request, uid: store.current().metadata.uid };
    const resolved: string[] = [];
    resolver = {
      resolve: async (_namespace, spec) => (
        resolved.push(spec.destinationCluster?.kubeconfigSecretRef.name ?? "(host)"),
        { host: cluster, source: cluster, destination: cluster, sameCluster: true }
      ),
    };
    const r = runner();
    await runUntil(r, "Completed");
    expect(store.current().status.conditions?.some((c) => c.type === "Failed")).toBe(true);
    store.markDeleted();
    for (let i = 0; i < 5 && (await r.run(request)).kind !== "gone"; i++);
    expect(await store.get(request.namespace, request.name)).toBeUndefined();
    expect(resolved).not.toContain("theirs");
  });

  it("never runs a body for an invocation that read the DVM just before its deletion (the claim is fenced)", async () => {
    const r = runner();
    await runUntil(r, "CreateRsyncConfig");
    // The invocation read the DVM before the deletion; the deletion and its cleanup happen before it claims.
    const before: DirectVolumeMigration = store.current();
    store.markDeleted();
    while ((await r.run(request)).kind !== "gone");
    const stale = runner({}, { store: staleOnce(store, before) });

    expect(await stale.run(request)).toEqual({ kind: "gone" });
    expect(entered.get("CreateRsyncConfig")).toBeUndefined();
    expect(await transferObjects()).toEqual([]);
    expect([...ledger.entries.values()].every((e) => e.expiresAt !== undefined)).toBe(true);
  });

  it("waits for a phase that holds its lease before cleaning up, so nothing it creates is left behind", async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const r = runner({
      CreateRsyncConfig: async (ctx) => {
        await gate;
        await ctx.clusters.source.ensure({
          ...KINDS.Secret,
          metadata: { name: `dvm-${dvmShortId(ctx.dvm)}-late`, namespace: "openshift-migration", labels: transferLabels(ctx.dvm, "config") },
        });
        return advance();
      },
    });
    await runUntil(r, "CreateRsyncConfig");
    const running = r.run(request);
    await new Promise((resolve) => setTimeout(resolve, 20));
    store.markDeleted();
    expect(await r.run(request)).toMatchObject({ kind: "busy", phase: "Deleting" });
    release();
    await running;
    while ((await r.run(request)).kind !== "gone");
    expect(await transferObjects()).toEqual([]);
  });

  it("fails a migration whose spec changed after it started, naming the change, and cleans up", async () => {
    const r = runner();
    await runUntil(r, "CreateDestinationPVCs");
    store.touch((dvm) => {
      dvm.spec = { persistentVolumeClaims: [...SPEC.persistentVolumeClaims, { ...SPEC.persistentVolumeClaims[0]!, name: "more" }] };
      dvm.metadata.generation = 2;
    });
    for (let i = 0; i < 20 && store.current().status.phase !== "Completed"; i++) await r.run(request);
    const status = store.current().status;
    expect(status).toMatchObject({ phase: "Completed", itinerary: "VolumeMigrationFailed" });
    expect(entered.get("CreateDestinationPVCs")).toBeUndefined();
    expect(findCondition(status.conditions, "Failed")?.message).toMatch(/spec: changed after the migration started \(generation 1 -> 2\).*create a new DVM/);
  });

  it("stops a DVM whose status does not parse with a condition naming the field, and never starts it again", async () => {
    const r = runner();
    await runUntil(r, "CreateDestinationPVCs");
    store.touch((dvm) => ((dvm.status as Record<string, unknown>).observedGeneration = "one"));
    for (let i = 0; i < 3; i++) expect(await r.run(request)).toMatchObject({ kind: "stopped" });
    const stored = store.current();
    expect(findCondition(stored.status.conditions, "StatusUnreadable")).toMatchObject({ status: "True", category: "Critical", durable: true });
    expect(findCondition(stored.status.conditions, "StatusUnreadable")?.message).toContain("status.observedGeneration");
    expect(entered.get("Started")).toBe(1);
    expect(entered.get("CreateDestinationPVCs")).toBeUndefined();
  });
});
