/**
 * spec.quiesce (src/phases/quiesceRules.ts, src/phases/quiesce.ts): what is scaled down, the record
 * written once (never the 0 of an earlier scale-down), and the restore done once.
 */

import { describe, expect, it } from "vitest";
import { LABEL } from "../../../src/contracts/labels";
import { DEFAULT_MIGRATION_POLICY } from "../../../src/dvm/policy";
import { parseDvmSpec } from "../../../src/dvm/types";
import type { Cluster } from "../../../src/kube/cluster";
import { KINDS, type KubeObject, type ObjectRef } from "../../../src/kube/objects";
import { inUseValue } from "../../../src/phases/pvcUse";
import { quiesceApplications, unquiesceApplications, waitForApplicationsQuiesced } from "../../../src/phases/quiesce";
import {
  mountsAnyClaim,
  PRE_QUIESCE_REPLICAS,
  PRE_QUIESCE_SUSPEND,
  QUIESCED_BY,
  quiesceEnabled,
  quiescePatch,
  restorePatch,
  type Workload,
  workloadsToQuiesce,
} from "../../../src/phases/quiesceRules";
import type { PhaseContext } from "../../../src/phases/types";
import type { FakeCluster } from "../../support/fakeCluster";
import { fakeContext } from "../../support/phaseContext";

const HOLDER = "ns/cutover/uid-1";
const claimVolume = (claim: string) => ({ name: claim, persistentVolumeClaim: { claimName: claim } });
const podTemplate = (...claims: string[]) => ({ spec: { containers: [{ name: "app", image: "app" }], volumes: claims.map(claimVolume) } });

const deployment = (name: string, replicas: number | undefined, ...claims: string[]): KubeObject => ({
  ...KINDS.Deployment,
  metadata: { name, namespace: "shop" },
  spec: { ...(replicas === undefined ? {} : { replicas }), template: podTemplate(...claims) },
});
const statefulSet = (name: string, replicas: number, template: string): KubeObject => ({
  ...KINDS.StatefulSet,
  metadata: { name, namespace: "shop" },
  spec: { replicas, template: podTemplate(), volumeClaimTemplates: [{ metadata: { name: template } }] },
});
const replicaSet = (name: string, replicas: number, owner: string | undefined, ...claims: string[]): KubeObject => ({
  ...KINDS.ReplicaSet,
  metadata: {
    name,
    namespace: "shop",
    ...(owner ? { ownerReferences: [{ apiVersion: "apps/v1", kind: "Deployment", name: owner, uid: "d", controller: true }] } : {}),
  },
  spec: { replicas, template: podTemplate(...claims) },
});
const cronJob = (name: string, suspend: boolean | undefined, ...claims: string[]): KubeObject => ({
  ...KINDS.CronJob,
  metadata: { name, namespace: "shop" },
  spec: { schedule: "* * * * *", ...(suspend === undefined ? {} : { suspend }), jobTemplate: { spec: { template: podTemplate(...claims) } } },
});
const pod = (name: string, claim: string, phase = "Running", labels: Record<string, string> = {}): KubeObject => ({
  ...KINDS.Pod,
  metadata: { name, namespace: "shop", labels },
  spec: { nodeName: "n1", volumes: [claimVolume(claim)] },
  status: { phase },
});

const CUTOVER = {
  migrationType: "CutOver",
  persistentVolumeClaims: [
    { name: "db", namespace: "shop", targetNamespace: "shop-new", targetStorageClass: "fast", targetAccessModes: ["ReadWriteOnce"] },
    { name: "data-web-0", namespace: "shop", targetNamespace: "shop-new", targetStorageClass: "fast", targetAccessModes: ["ReadWriteOnce"] },
  ],
};
/** The test DVM's namespace is an admin one here (the tenant rule has its own test). */
const ADMIN_POLICY = { ...DEFAULT_MIGRATION_POLICY, adminNamespaces: ["openshift-migration"] };

function cutover(spec: unknown = CUTOVER, options: Parameters<typeof fakeContext>[1] = {}) {
  const made = fakeContext(spec, { policy: ADMIN_POLICY, phase: "QuiesceApplications", ...options });
  made.source.add(
    deployment("api", 2, "db"),
    deployment("unrelated", 3, "other"),
    statefulSet("web", 1, "data"),
    replicaSet("api-5d8", 2, "api", "db"),
    replicaSet("loose", 4, undefined, "db"),
    cronJob("backup", false, "db"),
    cronJob("paused", true, "db"),
  );
  return made;
}

const read = async (cluster: FakeCluster, kind: keyof typeof KINDS, name: string) =>
  (await cluster.get<Workload>({ ...KINDS[kind], namespace: "shop", name }))!;

/** Counts the guarded writes a body makes that change something (not the empty patches that confirm a read). */
function countingWrites(cluster: FakeCluster): { writes: { ref: ObjectRef; patch: Record<string, unknown> }[] } {
  const writes: { ref: ObjectRef; patch: Record<string, unknown> }[] = [];
  const original = cluster.patchGuarded.bind(cluster);
  cluster.patchGuarded = (async (ref: ObjectRef, patch: Record<string, unknown>, rv: string) => {
    if (Object.keys(patch).length > 0) writes.push({ ref, patch });
    return original(ref, patch, rv);
  }) as Cluster["patchGuarded"];
  return { writes };
}

describe("spec.quiesce in the spec", () => {
  it("defaults to on for a CutOver (and a Rollback's restore), off for a Stage, and is refused for a Stage naming spec.quiesce", () => {
    expect(quiesceEnabled({ migrationType: "CutOver" })).toBe(true);
    expect(quiesceEnabled({ migrationType: "CutOver", quiesce: false })).toBe(false);
    expect(quiesceEnabled({ migrationType: "Rollback" })).toBe(true);
    expect(quiesceEnabled({ migrationType: "Stage" })).toBe(false);
    expect(quiesceEnabled({})).toBe(false);
    for (const migrationType of ["Stage", undefined]) {
      const parsed = parseDvmSpec({ ...CUTOVER, migrationType, quiesce: true });
      expect(parsed.ok).toBe(false);
      if (!parsed.ok) expect(parsed.issues.map((i) => i.field)).toEqual(["spec.quiesce"]);
    }
    expect(parseDvmSpec({ ...CUTOVER, quiesce: true }).ok).toBe(true);
    expect(parseDvmSpec({ ...CUTOVER, migrationType: "Stage", quiesce: false }).ok).toBe(true);
  });
});

describe("what is quiesced", () => {
  it("Deployments, StatefulSets (by volumeClaimTemplates), ReplicaSets no Deployment controls and CronJobs whose pods mount a source PVC", () => {
    const claims = new Map([["shop", new Set(["db", "data-web-0"])]]);
    const found = [
      deployment("api", 2, "db"),
      deployment("unrelated", 3, "other"),
      statefulSet("web", 1, "data"),
      statefulSet("webby", 1, "data"),
      replicaSet("api-5d8", 2, "api", "db"),
      replicaSet("loose", 4, undefined, "db"),
      cronJob("backup", false, "db"),
    ].map((object) => ({ kind: object.kind as "Deployment", object: object as Workload }));
    expect(workloadsToQuiesce(found, claims).map((f) => `${f.kind} ${f.object.metadata.name}`)).toEqual([
      "Deployment api",
      "StatefulSet web",
      "ReplicaSet loose",
      "CronJob backup",
    ]);
    // "data-web-0" is web's claim, not webby's; an ordinal is digits only.
    expect(mountsAnyClaim("StatefulSet", statefulSet("web", 1, "data") as Workload, new Set(["data-web-x"]))).toBe(false);
  });
});

describe("the record-once rule", () => {
  it("records the count before the first scale-down in the same write, and never the 0 a repeated body reads", () => {
    const fresh = deployment("api", 2, "db") as Workload;
    const first = quiescePatch("Deployment", fresh, HOLDER);
    expect(first).toEqual({ metadata: { annotations: { [PRE_QUIESCE_REPLICAS]: "2", [QUIESCED_BY]: HOLDER } }, spec: { replicas: 0 } });
    const scaledDown = {
      ...fresh,
      metadata: { ...fresh.metadata, annotations: { [PRE_QUIESCE_REPLICAS]: "2", [QUIESCED_BY]: HOLDER } },
      spec: { replicas: 0 },
    };
    expect(quiescePatch("Deployment", scaledDown, HOLDER)).toBeUndefined();
    // Scaled back up by someone meanwhile: down again, the record kept as it was.
    expect(quiescePatch("Deployment", { ...scaledDown, spec: { replicas: 5 } }, "other/dvm/uid-2")).toEqual({ spec: { replicas: 0 } });
    // spec.replicas absent reads as the API server's default, 1.
    expect(quiescePatch("Deployment", deployment("d", undefined, "db") as Workload, HOLDER)).toMatchObject({
      metadata: { annotations: { [PRE_QUIESCE_REPLICAS]: "1" } },
    });
    expect(quiescePatch("CronJob", cronJob("c", undefined, "db") as Workload, HOLDER)).toEqual({
      metadata: { annotations: { [PRE_QUIESCE_SUSPEND]: "false", [QUIESCED_BY]: HOLDER } },
      spec: { suspend: true },
    });
  });

  it("restores the recorded count and removes the record in one write; a second restore finds nothing", () => {
    const quiesced = {
      ...(deployment("api", 0, "db") as Workload),
      metadata: { name: "api", namespace: "shop", annotations: { [PRE_QUIESCE_REPLICAS]: "2", [QUIESCED_BY]: HOLDER } },
    };
    expect(restorePatch("Deployment", quiesced, HOLDER)).toEqual({
      kind: "patch",
      patch: { metadata: { annotations: { [PRE_QUIESCE_REPLICAS]: null, [QUIESCED_BY]: null } }, spec: { replicas: 2 } },
    });
    expect(restorePatch("Deployment", { ...quiesced, metadata: { name: "api", namespace: "shop" }, spec: { replicas: 2 } }, HOLDER)).toEqual({ kind: "none" });
    // Another DVM's record is not this one's to restore on failure; a Rollback (no holder) restores it.
    expect(restorePatch("Deployment", quiesced, "other/dvm/uid-2")).toEqual({ kind: "none" });
    expect(restorePatch("Deployment", quiesced)).toMatchObject({ kind: "patch" });
    const garbled = { ...quiesced, metadata: { ...quiesced.metadata, annotations: { [PRE_QUIESCE_REPLICAS]: "-1", [QUIESCED_BY]: HOLDER } } };
    expect(restorePatch("Deployment", garbled, HOLDER)).toMatchObject({ kind: "unreadable" });
  });
});

describe("QuiesceApplications and UnquiesceApplications on a fake cluster", () => {
  it("scales down and suspends what mounts the source PVCs, lists it, and a repeated body records the same counts", async () => {
    const { ctx, source } = cutover();
    const first = await quiesceApplications(ctx);
    const listed = [
      { kind: "Deployment", namespace: "shop", name: "api", replicas: 2 },
      { kind: "StatefulSet", namespace: "shop", name: "web", replicas: 1 },
      { kind: "ReplicaSet", namespace: "shop", name: "loose", replicas: 4 },
      { kind: "CronJob", namespace: "shop", name: "backup", suspend: false },
      { kind: "CronJob", namespace: "shop", name: "paused", suspend: true },
    ];
    expect(first).toEqual({ kind: "advance", status: { quiescedApplications: listed } });
    expect((await read(source, "Deployment", "api")).spec?.replicas).toBe(0);
    expect((await read(source, "CronJob", "backup")).spec?.suspend).toBe(true);
    expect((await read(source, "Deployment", "unrelated")).spec?.replicas).toBe(3);
    expect((await read(source, "ReplicaSet", "api-5d8")).spec?.replicas).toBe(2);

    // The crash came after the scale-down: the body runs again and reads replicas 0.
    const { writes } = countingWrites(source);
    expect(await quiesceApplications(ctx)).toEqual(first);
    expect(writes).toEqual([]);
    expect((await read(source, "Deployment", "api")).metadata.annotations?.[PRE_QUIESCE_REPLICAS]).toBe("2");
  });

  it("refuses a stale read: the write guarded by its resourceVersion fails, and the fresh read keeps the first record", async () => {
    const { ctx, source } = cutover({ ...CUTOVER, persistentVolumeClaims: [CUTOVER.persistentVolumeClaims[0]] });
    const before = await read(source, "Deployment", "api");
    await quiesceApplications(ctx);
    // A reader that serves the object as it was before the scale-down, once (a cache behind the server).
    const realGet = source.get.bind(source);
    let stale = true;
    source.get = (async (ref: ObjectRef) => {
      if (stale && ref.kind === "Deployment" && ref.name === "api") {
        stale = false;
        return structuredClone(before);
      }
      return realGet(ref);
    }) as Cluster["get"];
    const again = await quiesceApplications(ctx);
    expect(again).toMatchObject({
      status: { quiescedApplications: expect.arrayContaining([{ kind: "Deployment", namespace: "shop", name: "api", replicas: 2 }]) },
    });
    expect((await read(source, "Deployment", "api")).metadata.annotations?.[PRE_QUIESCE_REPLICAS]).toBe("2");
  });

  it("waits while a pod mounts a source PVC, and not for finished pods or the DVM's own", async () => {
    const { ctx, source } = cutover();
    source.add(pod("done", "db", "Succeeded"), pod("own", "db", "Running", { [LABEL.dvmUid]: ctx.dvm.uid }));
    expect(await waitForApplicationsQuiesced(ctx)).toEqual({ kind: "advance" });
    source.add(pod("web-0", "data-web-0"));
    expect(await waitForApplicationsQuiesced(ctx)).toMatchObject({ kind: "wait", reason: "1 pods still mount the source volumes: shop/web-0" });
  });

  it("on the failure itinerary restores exactly the recorded values, once, and leaves another DVM's records", async () => {
    const { ctx, source } = cutover();
    const quiesced = await quiesceApplications(ctx);
    const status = quiesced.kind === "advance" ? quiesced.status! : {};
    // Another DVM's record on a workload that mounts the same PVC.
    source.add({
      ...deployment("theirs", 0, "db"),
      metadata: { name: "theirs", namespace: "shop", annotations: { [PRE_QUIESCE_REPLICAS]: "7", [QUIESCED_BY]: "x/y/z" } },
    });
    const failed: PhaseContext = { ...ctx, itinerary: "VolumeMigrationFailed", phase: "UnquiesceAfterFailure", status };
    const { writes } = countingWrites(source);
    const restored = await unquiesceApplications(failed);
    expect(restored).toMatchObject({ kind: "advance" });
    expect(restored.status?.quiescedApplications?.every((a) => a.restored)).toBe(true);
    expect((await read(source, "Deployment", "api")).spec?.replicas).toBe(2);
    expect((await read(source, "StatefulSet", "web")).spec?.replicas).toBe(1);
    expect((await read(source, "ReplicaSet", "loose")).spec?.replicas).toBe(4);
    expect((await read(source, "CronJob", "backup")).spec?.suspend).toBe(false);
    expect((await read(source, "CronJob", "paused")).spec?.suspend).toBe(true);
    expect((await read(source, "Deployment", "api")).metadata.annotations ?? {}).toEqual({});
    expect((await read(source, "Deployment", "theirs")).spec?.replicas).toBe(0);
    expect(writes).toHaveLength(5);

    // Run again (a duplicate delivery, a crash before the ledger write): nothing more is written.
    const again = await unquiesceApplications(failed);
    expect(writes).toHaveLength(5);
    expect(again.status?.quiescedApplications?.every((a) => a.restored)).toBe(true);
  });

  it("does nothing for a Stage or with quiesce: false", async () => {
    for (const spec of [
      { ...CUTOVER, migrationType: "Stage" },
      { ...CUTOVER, quiesce: false },
    ]) {
      const { ctx, source } = cutover(spec);
      const { writes } = countingWrites(source);
      expect(await quiesceApplications(ctx)).toEqual({ kind: "advance" });
      expect(await unquiesceApplications({ ...ctx, itinerary: "VolumeMigrationFailed" })).toEqual({ kind: "advance" });
      expect(writes).toEqual([]);
    }
  });

  it("a Rollback restores the CutOver's records on the original source once the data is back", async () => {
    const { ctx, source } = cutover();
    await quiesceApplications(ctx);
    const rollback = fakeContext({ ...CUTOVER, migrationType: "Rollback" }, { policy: ADMIN_POLICY, itinerary: "VolumeMigrationRollback" });
    // The rollback's clusters are swapped: its destination is the original source.
    const back: PhaseContext = { ...rollback.ctx, clusters: { ...rollback.ctx.clusters, destination: source } };
    const done = await unquiesceApplications(back);
    expect(done.status?.quiescedApplications?.map((a) => `${a.name}:${a.replicas ?? a.suspend}:${a.restored}`)).toEqual([
      "api:2:true",
      "web:1:true",
      "loose:4:true",
      "backup:false:true",
      "paused:true:true",
    ]);
    expect((await read(source, "Deployment", "api")).spec?.replicas).toBe(2);
  });
});

describe("a tenant's DVM", () => {
  it("quiesces nothing outside its own namespace, naming spec.quiesce", async () => {
    // Default policy: "openshift-migration" is not an admin namespace. The PVC namespace check of the
    // policy runs in the runner; this body must hold on its own (a context built elsewhere, a policy bug).
    const { ctx, source } = cutover(CUTOVER, { policy: DEFAULT_MIGRATION_POLICY });
    expect(ctx.adminNamespace).toBe(false);
    const { writes } = countingWrites(source);
    const outcome = await quiesceApplications(ctx);
    expect(outcome).toMatchObject({ kind: "fail", errors: [expect.stringMatching(/^spec\.quiesce: the workloads of namespace "shop" cannot be quiesced/)] });
    expect(writes).toEqual([]);
    expect((await read(source, "Deployment", "api")).spec?.replicas).toBe(2);
    // In its own namespace it may.
    const own: PhaseContext = { ...ctx, dvm: { ...ctx.dvm, namespace: "shop" } };
    expect(await quiesceApplications(own)).toMatchObject({ kind: "advance" });
    expect(inUseValue(own.dvm)).toContain("shop/");
  });
});
