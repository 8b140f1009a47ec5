/**
 * Whole migrations on two real control planes (source hosts the DVM, destination receives the data), with
 * kwok running the pods and DynamoDB Local holding the ledger. The runner is called the way the relay
 * calls it; nothing here drives phases by hand.
 */

import { CoreV1Api, CustomObjectsApi } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoPhaseLedger } from "../../src/aws/ledger";
import { LABEL } from "../../src/contracts/labels";
import { findCondition } from "../../src/dvm/conditions";
import { ITINERARIES, PHASES } from "../../src/dvm/itinerary";
import { KubeCluster } from "../../src/kube/kubeCluster";
import { KINDS } from "../../src/kube/objects";
import { definedFields } from "../../src/lib/definedFields";
import { PHASE_BODIES } from "../../src/phases";
import { transferNames } from "../../src/phases/names";
import { testClusters } from "../support/clusters";
import { type FreshTable, freshLedgerTable } from "../support/dynamo";
import {
  type CountedBodies,
  CreationCounter,
  countedBodies,
  createDvm,
  createMigrationFixture,
  driveToCompletion,
  leftovers,
  type MigrationFixture,
  readDvm,
  requestFor,
  testPhaseRunner,
} from "../support/migration";

const clusters = testClusters();
const run = Date.now().toString(36);
let fixture: MigrationFixture;
let table: FreshTable;

function runnerWith(bodies: CountedBodies["bodies"], extra: { credentialGraceMs?: number } = {}) {
  return testPhaseRunner(clusters, table, { bodies, ...extra });
}

beforeAll(async () => {
  fixture = await createMigrationFixture(clusters, run);
  table = await freshLedgerTable();
});

afterAll(async () => {
  await table?.drop();
});

describe("a DVM moving 3 PVCs from 2 namespaces", () => {
  it("goes from an empty status to Completed, creating then removing the transfer resources, each phase once", async () => {
    const dvm = await createDvm(clusters.source, fixture.dvmNamespace, "move-three", fixture.spec);
    const { uid } = dvm.metadata;
    const counter = await CreationCounter.start(clusters.source, uid, ["/api/v1/pods", "/api/v1/secrets"]);
    const counterDst = fixture.sameCluster
      ? counter
      : await CreationCounter.start(clusters.destination, uid, ["/api/v1/pods", "/api/v1/secrets", "/api/v1/services"]);
    const { bodies, entered } = countedBodies();

    // Look at the transfer resources while they exist, right after the phase that made them.
    const seen: Record<string, unknown> = {};
    bodies.WaitForRsyncTransferPodsRunning = async (ctx) => {
      const dst = new KubeCluster("destination", clusters.destination);
      seen.serverPod ??= await dst.get({ ...KINDS.Pod, namespace: fixture.namespaces.shopTarget, name: transferNames(ctx.dvm).serverPod });
      seen.service ??= await dst.get({ ...KINDS.Service, namespace: fixture.namespaces.opsTarget, name: transferNames(ctx.dvm).endpointService });
      return PHASE_BODIES.WaitForRsyncTransferPodsRunning(ctx);
    };

    const results = await driveToCompletion(runnerWith(bodies), requestFor(dvm));
    counter.stop();
    counterDst.stop();

    const done = await readDvm(clusters.source, fixture.dvmNamespace, "move-three");
    expect(done.status).toMatchObject({
      phase: "Completed",
      itinerary: "VolumeMigration",
      step: `${ITINERARIES.VolumeMigration.length}/${ITINERARIES.VolumeMigration.length}`,
    });
    expect(findCondition(done.status.conditions, "Succeeded")?.status).toBe("True");
    expect(findCondition(done.status.conditions, "Failed")).toBeUndefined();
    expect(done.status.rsyncOperations).toEqual([
      { pvcReference: { namespace: fixture.namespaces.shop, name: "db" }, currentAttempt: 1, succeeded: true, percent: 100, secondsLeft: 0 },
      { pvcReference: { namespace: fixture.namespaces.shop, name: "media" }, currentAttempt: 1, succeeded: true, percent: 100, secondsLeft: 0 },
      { pvcReference: { namespace: fixture.namespaces.ops, name: "logs" }, currentAttempt: 1, succeeded: true, percent: 100, secondsLeft: 0 },
    ]);
    expect(done.status.successfulPods).toHaveLength(3);

    // Destination namespaces and PVCs, with the expected specs.
    const dstCore = clusters.destination.makeApiClient(CoreV1Api);
    const opsNs = await dstCore.readNamespace({ name: fixture.namespaces.opsTarget });
    expect(opsNs.metadata?.labels).toMatchObject({ team: "ops", [LABEL.dvmUid]: uid });
    const media = await dstCore.readNamespacedPersistentVolumeClaim({ namespace: fixture.namespaces.shopTarget, name: "media-new" });
    expect(media.spec).toMatchObject({
      storageClassName: fixture.storageClass,
      accessModes: ["ReadWriteMany"],
      volumeMode: "Filesystem",
      resources: { requests: { storage: "5Gi" } },
    });
    expect(media.metadata?.labels).toMatchObject({ app: "media", [LABEL.dvmUid]: uid });
    const logs = await dstCore.readNamespacedPersistentVolumeClaim({ namespace: fixture.namespaces.opsTarget, name: "logs" });
    expect(logs.spec?.resources?.requests?.storage).toBe("2Gi");

    // The transfer resources existed with the expected specs...
    const serverPod = seen.serverPod as {
      spec: { volumes: { persistentVolumeClaim?: { claimName: string } }[]; containers: { name: string }[]; securityContext: { runAsNonRoot?: boolean } };
    };
    expect(serverPod.spec.volumes.flatMap((v) => (v.persistentVolumeClaim ? [v.persistentVolumeClaim.claimName] : [])).sort()).toEqual(["db", "media-new"]);
    expect(serverPod.spec.containers.map((c) => c.name).sort()).toEqual(["rsync", "stunnel"]);
    expect(serverPod.spec.securityContext.runAsNonRoot).toBe(true);
    expect(seen.service).toMatchObject({ spec: { type: "ClusterIP", ports: [{ port: 6443 }] } });
    // ...were each created exactly once (server pods per target namespace, one client pod per volume)...
    expect(counter.repeated()).toEqual([]);
    expect(counterDst.repeated()).toEqual([]);
    expect(counterDst.count(`/api/v1/pods:${fixture.namespaces.shopTarget}/${transferNames({ uid }).serverPod}`)).toBe(1);
    expect(counter.count(`/api/v1/pods:${fixture.namespaces.shop}`)).toBe(2);
    expect(counter.count(`/api/v1/pods:${fixture.namespaces.ops}`)).toBe(1);
    // ...and are gone now, on both clusters and on the host.
    expect(await leftovers(clusters.source, uid, [fixture.namespaces.shop, fixture.namespaces.ops, fixture.dvmNamespace])).toEqual([]);
    expect(await leftovers(clusters.destination, uid, [fixture.namespaces.shopTarget, fixture.namespaces.opsTarget])).toEqual([]);
    const hostSecrets = await clusters.source
      .makeApiClient(CoreV1Api)
      .listNamespacedSecret({ namespace: fixture.dvmNamespace, labelSelector: `${LABEL.dvmUid}=${uid}` });
    expect(hostSecrets.items).toEqual([]);

    // The progress records stay (deleteProgressReportingCRs is off), one per volume.
    const records = (await clusters.source.makeApiClient(CustomObjectsApi).listNamespacedCustomObject({
      group: "migration.openshift.io",
      version: "v1alpha1",
      namespace: fixture.dvmNamespace,
      plural: "directvolumemigrationprogresses",
    })) as { items: { status?: { phase?: string } }[] };
    expect(records.items.map((r) => r.status?.phase)).toEqual(["succeeded", "succeeded", "succeeded"]);

    // Each non-waiting phase body entered once; the ledger has exactly one completed entry per phase.
    const steps = ITINERARIES.VolumeMigration.filter((p) => p !== "Completed");
    for (const phase of steps) if (!PHASES[phase].waits) expect(entered.get(phase), phase).toBe(1);
    const history = await new DynamoPhaseLedger({ client: table.client, tableName: table.tableName }).history(uid);
    expect(history.map((e) => e.key.phase)).toEqual(steps);
    expect(history.every((e) => e.state === "COMPLETED" && e.takeovers === 0)).toBe(true);
    expect(results.filter((r) => r.kind === "duplicate" || r.kind === "retry")).toEqual([]);
  });

  it("runs no phase body twice when every request is delivered twice at once and replayed stale", async () => {
    const dvm = await createDvm(clusters.source, fixture.dvmNamespace, "move-duplicated", {
      ...fixture.spec,
      persistentVolumeClaims: (fixture.spec.persistentVolumeClaims as object[]).slice(0, 2),
    });
    const { uid } = dvm.metadata;
    const counter = await CreationCounter.start(clusters.source, uid, ["/api/v1/pods", "/api/v1/secrets"]);
    const { bodies, entered } = countedBodies();
    const runner = runnerWith(bodies);
    const stale = requestFor(dvm);
    await driveToCompletion(runner, requestFor(dvm), {
      // Around every step: two concurrent deliveries of the same request, then the first, stale one.
      each: () => Promise.all([runner.run(stale), runner.run(requestFor(dvm))]).then(() => runner.run(stale)),
    });
    counter.stop();
    const done = await readDvm(clusters.source, fixture.dvmNamespace, "move-duplicated");
    expect(done.status.phase).toBe("Completed");
    for (const phase of ITINERARIES.VolumeMigration) if (phase !== "Completed" && !PHASES[phase].waits) expect(entered.get(phase), phase).toBe(1);
    expect(counter.repeated()).toEqual([]);
    expect(counter.count("/api/v1/pods:")).toBe(2);
    const history = await new DynamoPhaseLedger({ client: table.client, tableName: table.tableName }).history(uid);
    expect(history.filter((e) => e.state === "COMPLETED")).toHaveLength(ITINERARIES.VolumeMigration.length - 1);
  });
});

describe("a rollback", () => {
  it("moves the data back: client pods on the original destination, the server on the original source", async () => {
    const spec = { ...fixture.spec, persistentVolumeClaims: [(fixture.spec.persistentVolumeClaims as object[])[1]] };
    const forward = await createDvm(clusters.source, fixture.dvmNamespace, "move-media", spec);
    await driveToCompletion(runnerWith(PHASE_BODIES), requestFor(forward));
    const back = await createDvm(clusters.source, fixture.dvmNamespace, "move-media-back", { ...spec, migrationType: "Rollback" });
    const { uid } = back.metadata;
    const onSource = await CreationCounter.start(clusters.source, uid, ["/api/v1/pods"]);
    const onDestination = fixture.sameCluster ? onSource : await CreationCounter.start(clusters.destination, uid, ["/api/v1/pods"]);
    const { bodies, entered } = countedBodies();
    await driveToCompletion(runnerWith(bodies), requestFor(back));
    onSource.stop();
    onDestination.stop();
    const done = await readDvm(clusters.source, fixture.dvmNamespace, "move-media-back");
    expect(done.status).toMatchObject({ phase: "Completed", itinerary: "VolumeMigrationRollback" });
    expect(findCondition(done.status.conditions, "Succeeded")?.status).toBe("True");
    expect(done.status.rsyncOperations).toEqual([
      { pvcReference: { namespace: fixture.namespaces.shopTarget, name: "media-new" }, currentAttempt: 1, succeeded: true, percent: 100, secondsLeft: 0 },
    ]);
    expect(entered.get("CreateDestinationPVCs")).toBeUndefined();
    // The rsync server ran where the data originally came from, the client where it had gone.
    expect(onSource.count(`/api/v1/pods:${fixture.namespaces.shop}/${transferNames({ uid }).serverPod}`)).toBe(1);
    if (!fixture.sameCluster) expect(onDestination.count(`/api/v1/pods:${fixture.namespaces.shopTarget}/`)).toBe(1);
  });
});

describe("the failure path", () => {
  it("fails after backOffLimit failed attempts, names the PVC, and still cleans up", async () => {
    const spec = {
      ...fixture.spec,
      persistentVolumeClaims: [(fixture.spec.persistentVolumeClaims as object[])[2]],
      backOffLimit: 2,
      // kwok fails pods carrying this annotation (infra/dev/kwok/stages.yaml); server pods keep running.
      // Exit code 10 as rsync gives it for a broken connection: a failure that may pass on the next attempt.
      transferPodAnnotations: { "dvm.test/fail": "true", "dvm.test/exit-code": "10", "dvm.test/fail-message": "rsync error: error in socket IO (code 10)" },
    };
    const dvm = await createDvm(clusters.source, fixture.dvmNamespace, "move-failing", spec);
    const { uid } = dvm.metadata;
    const counter = await CreationCounter.start(clusters.source, uid, ["/api/v1/pods"]);
    await driveToCompletion(runnerWith(PHASE_BODIES), requestFor(dvm));
    counter.stop();
    const done = await readDvm(clusters.source, fixture.dvmNamespace, "move-failing");
    expect(done.status).toMatchObject({ phase: "Completed", itinerary: "VolumeMigrationFailed" });
    expect(done.status.errors).toHaveLength(1);
    expect(done.status.errors![0]).toMatch(
      new RegExp(
        `^spec\\.persistentVolumeClaims\\[0\\]: rsync of ${fixture.namespaces.ops}/logs to ${fixture.namespaces.opsTarget}/logs failed after 2 attempts`,
      ),
    );
    expect(findCondition(done.status.conditions, "Failed")).toMatchObject({
      status: "True",
      reason: "RunRsyncOperations",
      category: "Critical",
      durable: true,
    });
    expect(findCondition(done.status.conditions, "Succeeded")).toBeUndefined();
    expect(done.status.rsyncOperations).toEqual([{ pvcReference: { namespace: fixture.namespaces.ops, name: "logs" }, currentAttempt: 2, failed: true }]);
    expect(counter.count("/api/v1/pods:")).toBe(2);
    expect(await leftovers(clusters.source, uid, [fixture.namespaces.ops, fixture.dvmNamespace])).toEqual([]);
    expect(await leftovers(clusters.destination, uid, [fixture.namespaces.opsTarget])).toEqual([]);
    const history = await new DynamoPhaseLedger({ client: table.client, tableName: table.tableName }).history(uid);
    expect(history.find((e) => e.key.phase === "RunRsyncOperations")?.outcome).toMatchObject({ result: "failed", nextPhase: "MigrationFailed" });
    expect(history.map((e) => e.key.phase).slice(-5)).toEqual([
      "RunRsyncOperations",
      "MigrationFailed",
      "CleanupAfterFailure",
      "WaitForCleanupAfterFailure",
      "UnquiesceAfterFailure",
    ]);
  });

  it("completes when rsync exits 24 (files vanished), with a Warn condition naming the PVC and the count", async () => {
    const vanished = [
      'file has vanished: "/mnt/source/tmp/a.lock"',
      'file has vanished: "/mnt/source/tmp/b.lock"',
      "rsync warning: some files vanished before they could be transferred (code 24) at main.c(1338) [sender=3.2.7]",
    ];
    const spec = {
      ...fixture.spec,
      persistentVolumeClaims: [(fixture.spec.persistentVolumeClaims as object[])[2]],
      // kwok ends the client pod with this exit code and termination message (infra/dev/kwok/stages.yaml).
      transferPodAnnotations: { "dvm.test/fail": "true", "dvm.test/exit-code": "24", "dvm.test/fail-message": vanished.join("\n") },
    };
    const dvm = await createDvm(clusters.source, fixture.dvmNamespace, "move-vanishing", spec);
    const counter = await CreationCounter.start(clusters.source, dvm.metadata.uid, ["/api/v1/pods"]);
    await driveToCompletion(runnerWith(PHASE_BODIES), requestFor(dvm));
    counter.stop();
    const done = await readDvm(clusters.source, fixture.dvmNamespace, "move-vanishing");
    expect(done.status).toMatchObject({ phase: "Completed", itinerary: "VolumeMigration" });
    expect(findCondition(done.status.conditions, "Succeeded")?.status).toBe("True");
    expect(findCondition(done.status.conditions, "Failed")).toBeUndefined();
    const warning = findCondition(done.status.conditions, "RsyncFilesVanished");
    expect(warning).toMatchObject({ status: "True", category: "Warn", reason: "SourceFilesVanished" });
    expect(warning?.message).toContain(`${fixture.namespaces.ops}/logs: 2 files vanished during the transfer`);
    expect(done.status.rsyncOperations).toEqual([
      { pvcReference: { namespace: fixture.namespaces.ops, name: "logs" }, currentAttempt: 1, succeeded: true, percent: 100, secondsLeft: 0 },
    ]);
    // One client pod: exit 24 is not retried.
    expect(counter.count(`/api/v1/pods:${fixture.namespaces.ops}`)).toBe(1);
  });

  it("fails a DVM that cannot be migrated, naming each field, and creates nothing on the destination", async () => {
    const spec = {
      destinationCluster: { kubeconfigSecretRef: { name: "destination-kubeconfig" } },
      persistentVolumeClaims: [
        {
          name: "missing",
          namespace: fixture.namespaces.shop,
          targetNamespace: `nowhere-${run}`,
          targetStorageClass: fixture.storageClass,
          targetAccessModes: ["ReadWriteOnce"],
        },
        {
          name: "db",
          namespace: fixture.namespaces.shop,
          targetNamespace: `nowhere-${run}`,
          targetStorageClass: "no-such-class",
          targetAccessModes: ["ReadWriteOnce"],
        },
      ],
    };
    const dvm = await createDvm(clusters.source, fixture.dvmNamespace, "move-invalid", spec);
    await driveToCompletion(runnerWith(PHASE_BODIES), requestFor(dvm));
    const done = await readDvm(clusters.source, fixture.dvmNamespace, "move-invalid");
    expect(done.status.itinerary).toBe("VolumeMigrationFailed");
    expect(done.status.errors).toEqual([
      `spec.persistentVolumeClaims[0].name: PersistentVolumeClaim ${fixture.namespaces.shop}/missing not found on the source cluster`,
      'spec.persistentVolumeClaims[1].targetStorageClass: StorageClass "no-such-class" not found on the destination cluster',
    ]);
    expect(findCondition(done.status.conditions, "Failed")?.reason).toBe("Started");
    await expect(clusters.destination.makeApiClient(CoreV1Api).readNamespace({ name: `nowhere-${run}` })).rejects.toMatchObject({ code: 404 });
  });

  it("fails a DVM whose cluster reference stays unresolved past the credential grace, naming the field", async () => {
    const spec = { ...fixture.spec, destinationCluster: { kubeconfigSecretRef: { name: "no-such-secret" } } };
    const dvm = await createDvm(clusters.source, fixture.dvmNamespace, "move-unresolved", spec);
    // No grace: the first failure is past it (the rotation test below has the default's behaviour).
    await driveToCompletion(runnerWith(PHASE_BODIES, { credentialGraceMs: 0 }), requestFor(dvm));
    const done = await readDvm(clusters.source, fixture.dvmNamespace, "move-unresolved");
    expect(done.status).toMatchObject({ phase: "Completed", itinerary: "VolumeMigrationFailed" });
    expect(done.status.errors?.[0]).toMatch(
      new RegExp(
        `^spec\\.destinationCluster\\.kubeconfigSecretRef\\.name: Secret ${fixture.dvmNamespace}/no-such-secret not found: still failing 0 s after the first failure`,
      ),
    );
    expect(findCondition(done.status.conditions, "CleanupIncomplete")?.message).toContain(`${LABEL.dvmUid}=${done.metadata.uid}`);
  });

  it("completes when its kubeconfig Secret is deleted and re-created mid-migration (rotation)", async () => {
    const core = clusters.source.makeApiClient(CoreV1Api);
    const secret = { name: `rotating-${run}`, namespace: fixture.dvmNamespace };
    const kubeconfig = () => core.readNamespacedSecret({ name: "destination-kubeconfig", namespace: fixture.dvmNamespace });
    const create = async () =>
      core.createNamespacedSecret({
        namespace: secret.namespace,
        body: { metadata: { name: secret.name }, ...definedFields({ data: (await kubeconfig()).data }) },
      });
    await create();
    const spec = { ...fixture.spec, destinationCluster: { kubeconfigSecretRef: { name: secret.name } } };
    const dvm = await createDvm(clusters.source, fixture.dvmNamespace, "move-rotated", spec);
    let missingSeen = false;
    const results = await driveToCompletion(runnerWith(PHASE_BODIES), requestFor(dvm), {
      each: async (step) => {
        if (step === 2) await core.deleteNamespacedSecret(secret);
        if (step > 2 && !missingSeen) {
          const current = await readDvm(clusters.source, fixture.dvmNamespace, "move-rotated");
          missingSeen = findCondition(current.status.conditions, "ClusterCredentialsUnavailable")?.status === "True";
          if (missingSeen) await create();
        }
      },
    });
    expect(missingSeen).toBe(true);
    expect(results.some((r) => r.kind === "retry")).toBe(true);
    const done = await readDvm(clusters.source, fixture.dvmNamespace, "move-rotated");
    expect(done.status).toMatchObject({ phase: "Completed", itinerary: "VolumeMigration" });
    expect(done.status.errors ?? []).toEqual([]);
    expect(findCondition(done.status.conditions, "ClusterCredentialsUnavailable")).toBeUndefined();
  });
});
