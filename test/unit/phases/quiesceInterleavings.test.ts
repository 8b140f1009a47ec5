/**
 * The exactly-once hazard of quiescing, under seeded interleavings of the three faults that repeat a
 * body after its effect: a crash right after the scale-down (the outcome never recorded, the body runs
 * again), duplicate delivery (the same body twice in a row) and stale reads (a cache that serves the
 * object as it was before the last write). Ours (quiesceRules.ts through quiesce.ts) against a naive
 * body that keeps the count in the DVM's status from what it read, as a reconciler would without a
 * record on the object: the naive one records 0 after a repeat, and restores to it.
 */
import { describe, expect, it } from "vitest";
import { DEFAULT_MIGRATION_POLICY } from "../../../src/dvm/policy";
import type { Cluster } from "../../../src/kube/cluster";
import { KINDS, type KubeObject, type ObjectRef } from "../../../src/kube/objects";
import { quiesceApplications, unquiesceApplications } from "../../../src/phases/quiesce";
import type { Workload } from "../../../src/phases/quiesceRules";
import type { PhaseContext } from "../../../src/phases/types";
import type { FakeCluster } from "../../support/fakeCluster";
import { fakeContext } from "../../support/phaseContext";

const SPEC = {
  migrationType: "CutOver",
  persistentVolumeClaims: [{ name: "db", namespace: "shop", targetNamespace: "shop-new", targetStorageClass: "fast", targetAccessModes: ["ReadWriteOnce"] }],
};
const ORIGINAL = { api: 2, worker: 5 };

function seeded(seed: number): () => number {
  let state = Math.imul(seed, 2654435761) >>> 0 || 1;
  const next = () => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return (state >>> 0) / 2 ** 32;
  };
  // Small seeds start small: the first outputs are thrown away.
  for (let i = 0; i < 16; i++) next();
  return next;
}

/** Reads that are, with probability `p`, the object as it was before its last write (a lagging cache). */
function staleReads(cluster: FakeCluster, random: () => number, p: number): { cluster: Cluster; replicaWrites: () => number } {
  const previous = new Map<string, KubeObject>();
  let replicaWrites = 0;
  const realGet = cluster.get.bind(cluster);
  const realPatch = cluster.patchGuarded.bind(cluster);
  const key = (ref: ObjectRef) => `${ref.kind}/${ref.namespace}/${ref.name}`;
  const wrapped = Object.create(cluster) as Cluster;
  wrapped.get = (async (ref: ObjectRef) => {
    const old = previous.get(key(ref));
    return old && random() < p ? structuredClone(old) : realGet(ref);
  }) as Cluster["get"];
  wrapped.patchGuarded = (async (ref: ObjectRef, patch: Record<string, unknown>, rv: string) => {
    const before = await realGet(ref);
    const after = await realPatch(ref, patch, rv);
    if (before) previous.set(key(ref), before);
    if ((before as Workload | undefined)?.spec?.replicas !== (after as Workload).spec?.replicas) replicaWrites++;
    return after;
  }) as Cluster["patchGuarded"];
  return { cluster: wrapped, replicaWrites: () => replicaWrites };
}

const deployment = (name: string, replicas: number): KubeObject => ({
  ...KINDS.Deployment,
  metadata: { name, namespace: "shop" },
  spec: { replicas, template: { spec: { volumes: [{ name: "d", persistentVolumeClaim: { claimName: "db" } }] } } },
});

/** The naive body: the count read is the count recorded (in the status), whatever it reads. */
async function naiveQuiesce(cluster: Cluster, server: FakeCluster): Promise<Record<string, number>> {
  const recorded: Record<string, number> = {};
  for (const name of Object.keys(ORIGINAL)) {
    const ref = { ...KINDS.Deployment, namespace: "shop", name };
    const read = (await cluster.get<Workload>(ref))!;
    recorded[name] = read.spec?.replicas ?? 1;
    // Unguarded, as a merge patch without resourceVersion is: the server's current version.
    await cluster.patchGuarded(ref, { spec: { replicas: 0 } }, (await server.get(ref))!.metadata.resourceVersion!);
  }
  return recorded;
}

async function naiveRestore(cluster: Cluster, server: FakeCluster, recorded: Record<string, number>): Promise<void> {
  for (const [name, replicas] of Object.entries(recorded)) {
    const ref = { ...KINDS.Deployment, namespace: "shop", name };
    await cluster.patchGuarded(ref, { spec: { replicas } }, (await server.get(ref))!.metadata.resourceVersion!);
  }
}

/** A body that threw (conflicts past its attempts, on reads that stayed stale) is run again, as the runner retries it. */
async function retried<T>(body: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await body();
    } catch (error) {
      if (attempt >= 20) throw error;
    }
  }
}

interface Trial {
  wrongRecords: number;
  wrongRestores: number;
  extraRestoreWrites: number;
}

/**
 * One migration: the quiesce body runs 1 + crashes + duplicates times (each repeat after the effect),
 * the status keeps what the last run returned; then the migration fails and the restore runs 1-3 times.
 */
async function trial(seed: number, body: "ours" | "naive"): Promise<Trial> {
  const random = seeded(seed);
  const { ctx, source } = fakeContext(SPEC, { policy: { ...DEFAULT_MIGRATION_POLICY, adminNamespaces: ["openshift-migration"] } });
  source.add(deployment("api", ORIGINAL.api), deployment("worker", ORIGINAL.worker));
  const stale = staleReads(source, random, 0.5);
  const quiesceCtx: PhaseContext = { ...ctx, clusters: { ...ctx.clusters, source: stale.cluster } };
  const runs = 1 + Math.floor(random() * 3);
  let recorded: Record<string, number> = {};
  for (let i = 0; i < runs; i++) {
    if (body === "naive") recorded = await naiveQuiesce(stale.cluster, source);
    else {
      const outcome = await retried(() => quiesceApplications(quiesceCtx));
      recorded = Object.fromEntries((outcome.status?.quiescedApplications ?? []).map((a) => [a.name, a.replicas ?? -1]));
    }
  }
  const wrongRecords = Object.entries(ORIGINAL).filter(([name, count]) => recorded[name] !== count).length;
  const writesBeforeRestore = stale.replicaWrites();
  const restores = 1 + Math.floor(random() * 3);
  for (let i = 0; i < restores; i++) {
    if (body === "naive") await naiveRestore(stale.cluster, source, recorded);
    else await retried(() => unquiesceApplications({ ...quiesceCtx, itinerary: "VolumeMigrationFailed", phase: "UnquiesceAfterFailure" }));
  }
  let wrongRestores = 0;
  for (const [name, count] of Object.entries(ORIGINAL)) {
    const now = await source.get<Workload>({ ...KINDS.Deployment, namespace: "shop", name });
    if (now?.spec?.replicas !== count) wrongRestores++;
  }
  const restoreWrites = stale.replicaWrites() - writesBeforeRestore;
  return { wrongRecords, wrongRestores, extraRestoreWrites: Math.max(0, restoreWrites - Object.keys(ORIGINAL).length) };
}

async function totals(body: "ours" | "naive", trials: number): Promise<Trial> {
  const sum = { wrongRecords: 0, wrongRestores: 0, extraRestoreWrites: 0 };
  for (let seed = 1; seed <= trials; seed++) {
    const result = await trial(seed, body);
    sum.wrongRecords += result.wrongRecords;
    sum.wrongRestores += result.wrongRestores;
    sum.extraRestoreWrites += result.extraRestoreWrites;
  }
  return sum;
}

describe("quiesce under repeats after the effect and stale reads (200 seeded interleavings)", () => {
  it("ours: every record is the count before the first scale-down, every restore lands once on it", async () => {
    const ours = await totals("ours", 200);
    console.log(`[figures] quiesce interleavings, ours: ${JSON.stringify(ours)}`);
    expect(ours).toMatchObject({ wrongRecords: 0, wrongRestores: 0, extraRestoreWrites: 0 });
  });

  it("the naive body (count kept from its read) records 0 after a repeat and restores to 0", async () => {
    const naive = await totals("naive", 200);
    console.log(`[figures] quiesce interleavings, naive: ${JSON.stringify(naive)}`);
    expect(naive.wrongRecords).toBeGreaterThan(0);
    expect(naive.wrongRestores).toBeGreaterThan(0);
  });
});
