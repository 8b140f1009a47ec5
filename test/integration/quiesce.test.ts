/**
 * spec.quiesce on a real API server (kwok runs the pods, DynamoDB Local holds the ledger): a CutOver
 * scales down a Deployment, a StatefulSet and a CronJob that mount its source PVCs before the final sync;
 * a crash right after the scale-down and the takeover that follows record the counts from before it; a
 * failure, a cancel and a Rollback restore exactly those, once. No controller-manager runs here, so the
 * test deletes a scaled-down workload's pods itself, as the ReplicaSet and StatefulSet controllers would.
 */

import { CoreV1Api, CustomObjectsApi } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoPhaseLedger } from "../../src/aws/ledger";
import { findCondition } from "../../src/dvm/conditions";
import type { ExecutablePhaseName } from "../../src/dvm/itinerary";
import { DVM_GROUP, DVM_PLURAL, DVM_VERSION, type QuiescedApplication } from "../../src/dvm/types";
import { KubeDvmStore } from "../../src/kube/dvmStore";
import { KubeCluster } from "../../src/kube/kubeCluster";
import { KINDS, type KubeObject } from "../../src/kube/objects";
import { SecretClusterResolver } from "../../src/kube/resolver";
import type { PhaseLedger } from "../../src/ledger";
import { silentLogger } from "../../src/lib/log";
import { PHASE_BODIES } from "../../src/phases";
import { inUseValue } from "../../src/phases/pvcUse";
import { restoreApplications } from "../../src/phases/quiesce";
import { PRE_QUIESCE_REPLICAS, PRE_QUIESCE_SUSPEND, QUIESCED_BY, type Workload } from "../../src/phases/quiesceRules";
import type { PhaseBody } from "../../src/phases/types";
import { PhaseRunner } from "../../src/runner/runner";
import { testClusters } from "../support/clusters";
import { type FreshTable, freshLedgerTable } from "../support/dynamo";
import { createDvm, createMigrationFixture, driveToCompletion, type MigrationFixture, readDvm, requestFor, TEST_MIGRATION_POLICY } from "../support/migration";

const clusters = testClusters();
const run = Date.now().toString(36);
const source = new KubeCluster("source", clusters.source);
let table: FreshTable;

type Bodies = Record<ExecutablePhaseName, PhaseBody>;

beforeAll(async () => {
  table = await freshLedgerTable();
});

afterAll(async () => {
  await table?.drop();
});

const ledger = (): PhaseLedger => new DynamoPhaseLedger({ client: table.client, tableName: table.tableName });

function runnerWith(options: { bodies?: Partial<Bodies>; ledger?: PhaseLedger; leaseMs?: number } = {}) {
  return new PhaseRunner({
    store: new KubeDvmStore(clusters.source),
    ledger: options.ledger ?? ledger(),
    clusters: new SecretClusterResolver(clusters.source),
    bodies: { ...PHASE_BODIES, ...options.bodies },
    leaseMs: options.leaseMs ?? 30_000,
    policy: TEST_MIGRATION_POLICY,
  });
}

const labels = (app: string) => ({ app });
const podSpec = (claim: string) => ({
  containers: [{ name: "app", image: "registry.example/app:1" }],
  volumes: [{ name: "data", persistentVolumeClaim: { claimName: claim } }],
});

/**
 * The fixture's PVCs (shop/db, shop/media, ops/logs) plus the StatefulSet's own claim shop/data-web-0,
 * and the workloads that mount them: Deployment api (2 replicas, db), StatefulSet web (3 replicas, its
 * volumeClaimTemplate "data"), CronJob backup (logs), and a Deployment that mounts none (left alone).
 * Their running pods: api-0, api-1, web-0.
 */
async function applicationFixture(suffix: string): Promise<{ fixture: MigrationFixture; spec: Record<string, unknown> }> {
  const fixture = await createMigrationFixture(clusters, `${run}${suffix}`);
  const { shop, ops, shopTarget } = fixture.namespaces;
  const core = clusters.source.makeApiClient(CoreV1Api);
  await core.createNamespacedPersistentVolumeClaim({
    namespace: shop,
    body: { metadata: { name: "data-web-0" }, spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } } } },
  });
  const workloads: KubeObject[] = [
    {
      ...KINDS.Deployment,
      metadata: { name: "api", namespace: shop },
      spec: { replicas: 2, selector: { matchLabels: labels("api") }, template: { metadata: { labels: labels("api") }, spec: podSpec("db") } },
    },
    {
      ...KINDS.Deployment,
      metadata: { name: "unrelated", namespace: shop },
      spec: {
        replicas: 1,
        selector: { matchLabels: labels("unrelated") },
        template: { metadata: { labels: labels("unrelated") }, spec: { containers: [{ name: "app", image: "registry.example/app:1" }] } },
      },
    },
    {
      ...KINDS.StatefulSet,
      metadata: { name: "web", namespace: shop },
      spec: {
        replicas: 3,
        serviceName: "web",
        selector: { matchLabels: labels("web") },
        template: {
          metadata: { labels: labels("web") },
          spec: { containers: [{ name: "web", image: "registry.example/web:1", volumeMounts: [{ name: "data", mountPath: "/data" }] }] },
        },
        volumeClaimTemplates: [{ metadata: { name: "data" }, spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } } } }],
      },
    },
    {
      ...KINDS.CronJob,
      metadata: { name: "backup", namespace: ops },
      spec: { schedule: "0 3 * * *", jobTemplate: { spec: { template: { spec: { ...podSpec("logs"), restartPolicy: "Never" } } } } },
    },
  ];
  for (const workload of workloads) await source.ensure(workload);
  const pods = [
    { name: "api-0", app: "api", claim: "db" },
    { name: "api-1", app: "api", claim: "db" },
    { name: "web-0", app: "web", claim: "data-web-0" },
  ];
  for (const pod of pods)
    await source.ensure({ ...KINDS.Pod, metadata: { name: pod.name, namespace: shop, labels: labels(pod.app) }, spec: podSpec(pod.claim) });
  const spec = {
    ...fixture.spec,
    migrationType: "CutOver",
    persistentVolumeClaims: [
      ...(fixture.spec.persistentVolumeClaims as object[]),
      { name: "data-web-0", namespace: shop, targetNamespace: shopTarget, targetStorageClass: fixture.storageClass, targetAccessModes: ["ReadWriteOnce"] },
    ],
  };
  return { fixture, spec };
}

const workload = async (kind: "Deployment" | "StatefulSet" | "CronJob", namespace: string, name: string) =>
  (await source.get<Workload>({ ...KINDS[kind], namespace, name }))!;

/** What the ReplicaSet and StatefulSet controllers would do: a workload at 0 replicas loses its pods. */
async function actAsControllers(fixture: MigrationFixture): Promise<void> {
  const { shop } = fixture.namespaces;
  for (const [kind, name] of [
    ["Deployment", "api"],
    ["StatefulSet", "web"],
  ] as const) {
    if ((await workload(kind, shop, name)).spec?.replicas !== 0) continue;
    for (const pod of await source.list(KINDS.Pod, shop, labels(name))) await source.delete({ ...KINDS.Pod, namespace: shop, name: pod.metadata.name });
  }
}

/** The state of the applications when the final sync starts (its first entry), and nothing after. */
function recordingFinalSync(fixture: MigrationFixture) {
  // What the cluster showed, undefined included.
  const seen: { api?: number | undefined; web?: number | undefined; backupSuspended?: boolean | undefined; podsMounting?: string[] } = {};
  const body: PhaseBody = async (ctx) => {
    if (seen.api === undefined) {
      const { shop, ops } = fixture.namespaces;
      seen.api = (await workload("Deployment", shop, "api")).spec?.replicas;
      seen.web = (await workload("StatefulSet", shop, "web")).spec?.replicas;
      seen.backupSuspended = (await workload("CronJob", ops, "backup")).spec?.suspend;
      seen.podsMounting = (await source.list(KINDS.Pod, shop, {}))
        .filter((p) => !p.metadata.labels?.["dvm.migration.openshift.io/uid"])
        .map((p) => p.metadata.name);
    }
    return PHASE_BODIES.RunRsyncOperations(ctx);
  };
  return { seen, body };
}

const EXPECTED = (fixture: MigrationFixture): QuiescedApplication[] => [
  { kind: "Deployment", namespace: fixture.namespaces.shop, name: "api", replicas: 2 },
  { kind: "StatefulSet", namespace: fixture.namespaces.shop, name: "web", replicas: 3 },
  { kind: "CronJob", namespace: fixture.namespaces.ops, name: "backup", suspend: false },
];

class InjectedCrash extends Error {}

describe("spec.quiesce in the CRD", () => {
  it("is refused on a Stage (explicit or by default) by the API server, naming spec.quiesce", async () => {
    const fixture = await createMigrationFixture(clusters, `${run}v`);
    for (const migrationType of ["Stage", undefined]) {
      const refused = await createDvm(clusters.source, fixture.dvmNamespace, `stage-quiesce-${migrationType ?? "default"}`, {
        ...fixture.spec,
        ...(migrationType ? { migrationType } : {}),
        quiesce: true,
      }).then(
        () => undefined,
        (error: { code?: number; body?: unknown }) => error,
      );
      expect(refused?.code).toBe(422);
      expect(String(refused?.body)).toMatch(/spec\.quiesce: Invalid value: .*is for a CutOver/);
    }
  });
});

describe("a CutOver with spec.quiesce", () => {
  it("scales down before the final sync; a crash right after the scale-down, then a takeover, keeps the counts; a failure after that restores exactly those, once", async () => {
    const { fixture, spec } = await applicationFixture("c");
    const { shop, ops } = fixture.namespaces;
    const dvm = await createDvm(clusters.source, fixture.dvmNamespace, "cutover-crash", spec);
    const each = () => actAsControllers(fixture);

    // The process dies right after QuiesceApplications' body returned: its effect is done, the ledger
    // never hears of it, and its claim stays until its lease runs out.
    const real = ledger();
    const dying = new Proxy(real, {
      get(target, property) {
        if (property === "complete") {
          return (claim: Parameters<PhaseLedger["complete"]>[0], outcome: Parameters<PhaseLedger["complete"]>[1]) =>
            claim.key.phase === "QuiesceApplications"
              ? Promise.reject(new InjectedCrash("process killed after the scale-down"))
              : target.complete(claim, outcome);
        }
        const value = Reflect.get(target, property, target) as unknown;
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    const shortLeaseMs = 4_000;
    await expect(driveToCompletion(runnerWith({ ledger: dying, leaseMs: shortLeaseMs }), requestFor(dvm), { each })).rejects.toThrow(InjectedCrash);
    expect((await workload("Deployment", shop, "api")).spec?.replicas).toBe(0);
    expect((await workload("Deployment", shop, "api")).metadata.annotations?.[PRE_QUIESCE_REPLICAS]).toBe("2");
    expect((await readDvm(clusters.source, fixture.dvmNamespace, "cutover-crash")).status.phase).toBe("QuiesceApplications");

    // The takeover after the lease ended: the body runs again on workloads already at 0.
    await new Promise((resolve) => setTimeout(resolve, shortLeaseMs + 500));
    const finalSync = recordingFinalSync(fixture);
    const failingSync: PhaseBody = async (ctx) => {
      const outcome = await finalSync.body(ctx);
      return outcome.kind === "advance" ? { kind: "fail", errors: ["injected: the final sync failed"] } : outcome;
    };
    await driveToCompletion(runnerWith({ bodies: { RunRsyncOperations: failingSync } }), requestFor(dvm), { each });

    const history = await ledger().history(dvm.metadata.uid);
    const quiesce = history.find((e) => e.key.phase === "QuiesceApplications")!;
    expect(quiesce).toMatchObject({ state: "COMPLETED", attempts: 2, takeovers: 1 });
    expect(quiesce.outcome?.statusUpdate?.quiescedApplications).toEqual(EXPECTED(fixture));
    // Before the final sync: all at 0 or suspended, no application pod left on the volumes.
    expect(finalSync.seen).toEqual({ api: 0, web: 0, backupSuspended: true, podsMounting: [] });

    const done = await readDvm(clusters.source, fixture.dvmNamespace, "cutover-crash");
    expect(done.status.phase).toBe("Completed");
    expect(findCondition(done.status.conditions, "Failed")?.status).toBe("True");
    expect(done.status.quiescedApplications).toEqual(EXPECTED(fixture).map((a) => ({ ...a, restored: true })));
    expect(history.filter((e) => e.key.phase === "UnquiesceAfterFailure").map((e) => e.attempts)).toEqual([1]);
    // Restored to what they had before the first scale-down, the records gone.
    const api = await workload("Deployment", shop, "api");
    const web = await workload("StatefulSet", shop, "web");
    const backup = await workload("CronJob", ops, "backup");
    expect([api.spec?.replicas, web.spec?.replicas, backup.spec?.suspend]).toEqual([2, 3, false]);
    for (const object of [api, web, backup]) {
      expect(Object.keys(object.metadata.annotations ?? {}).filter((k) => [PRE_QUIESCE_REPLICAS, PRE_QUIESCE_SUSPEND, QUIESCED_BY].includes(k))).toEqual([]);
    }
    expect((await workload("Deployment", shop, "unrelated")).spec?.replicas).toBe(1);

    // A restore delivered again writes nothing: the objects keep their resourceVersions.
    const versions = [api, web, backup].map((o) => o.metadata.resourceVersion);
    const again = await restoreApplications(
      { dvm: { ...done.metadata, generation: done.metadata.generation ?? 1 }, adminNamespace: true, log: silentLogger },
      source,
      (spec.persistentVolumeClaims as { namespace: string; name: string }[]).map((p) => ({ namespace: p.namespace, name: p.name })),
      inUseValue(done.metadata),
    );
    expect(again.restored).toEqual([]);
    const after = [await workload("Deployment", shop, "api"), await workload("StatefulSet", shop, "web"), await workload("CronJob", ops, "backup")];
    expect(after.map((o) => o.metadata.resourceVersion)).toEqual(versions);
  });

  it("on success leaves the source quiesced and lists it; a Rollback then restores it once the data is back", async () => {
    const { fixture, spec } = await applicationFixture("s");
    const { shop, ops } = fixture.namespaces;
    const dvm = await createDvm(clusters.source, fixture.dvmNamespace, "cutover-ok", spec);
    const finalSync = recordingFinalSync(fixture);
    await driveToCompletion(runnerWith({ bodies: { RunRsyncOperations: finalSync.body } }), requestFor(dvm), { each: () => actAsControllers(fixture) });
    const done = await readDvm(clusters.source, fixture.dvmNamespace, "cutover-ok");
    expect(findCondition(done.status.conditions, "Succeeded")?.status).toBe("True");
    expect(done.status.quiescedApplications).toEqual(EXPECTED(fixture));
    expect(finalSync.seen).toEqual({ api: 0, web: 0, backupSuspended: true, podsMounting: [] });
    expect((await workload("Deployment", shop, "api")).spec?.replicas).toBe(0);
    expect((await workload("CronJob", ops, "backup")).spec?.suspend).toBe(true);

    // Deleting the succeeded CutOver restores nothing: the data lives on the destination now.
    await clusters.source
      .makeApiClient(CustomObjectsApi)
      .deleteNamespacedCustomObject({ group: DVM_GROUP, version: DVM_VERSION, namespace: fixture.dvmNamespace, plural: DVM_PLURAL, name: "cutover-ok" });
    expect((await runnerWith().run(requestFor(done))).kind).toBe("gone");
    expect((await workload("Deployment", shop, "api")).spec?.replicas).toBe(0);

    const rollback = await createDvm(clusters.source, fixture.dvmNamespace, "rollback", { ...spec, migrationType: "Rollback" });
    await driveToCompletion(runnerWith(), requestFor(rollback));
    const back = await readDvm(clusters.source, fixture.dvmNamespace, "rollback");
    expect(findCondition(back.status.conditions, "Succeeded")?.status).toBe("True");
    expect(back.status.quiescedApplications).toEqual(EXPECTED(fixture).map((a) => ({ ...a, restored: true })));
    const api = await workload("Deployment", shop, "api");
    expect([api.spec?.replicas, (await workload("StatefulSet", shop, "web")).spec?.replicas, (await workload("CronJob", ops, "backup")).spec?.suspend]).toEqual(
      [2, 3, false],
    );
    expect(api.metadata.annotations?.[PRE_QUIESCE_REPLICAS]).toBeUndefined();
  });

  it("cancelled while it waits for the pods to end, restores what it quiesced, once", async () => {
    const { fixture, spec } = await applicationFixture("x");
    const { shop, ops } = fixture.namespaces;
    const dvm = await createDvm(clusters.source, fixture.dvmNamespace, "cutover-cancel", spec);
    const runner = runnerWith();
    // No controller deletes the pods: the CutOver waits in WaitForApplicationsQuiesced.
    for (let i = 0; i < 400; i++) {
      const current = await readDvm(clusters.source, fixture.dvmNamespace, "cutover-cancel");
      if (current.status.phase === "WaitForApplicationsQuiesced") break;
      await runner.run(requestFor(dvm));
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const waiting = await runner.run(requestFor(dvm));
    expect(waiting).toMatchObject({
      kind: "waiting",
      phase: "WaitForApplicationsQuiesced",
      reason: expect.stringMatching(/^3 pods still mount the source volumes/),
    });
    expect((await workload("StatefulSet", shop, "web")).spec?.replicas).toBe(0);

    await clusters.source
      .makeApiClient(CustomObjectsApi)
      .deleteNamespacedCustomObject({ group: DVM_GROUP, version: DVM_VERSION, namespace: fixture.dvmNamespace, plural: DVM_PLURAL, name: "cutover-cancel" });
    await driveToCompletion(runner, requestFor(dvm));
    const restored = [await workload("Deployment", shop, "api"), await workload("StatefulSet", shop, "web"), await workload("CronJob", ops, "backup")];
    expect([restored[0]!.spec?.replicas, restored[1]!.spec?.replicas, restored[2]!.spec?.suspend]).toEqual([2, 3, false]);
    // Once: the restore removed the records with it, so a second pass finds none.
    expect(restored.map((o) => o.metadata.annotations?.[QUIESCED_BY])).toEqual([undefined, undefined, undefined]);
  });
});
