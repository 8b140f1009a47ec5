/**
 * spec.quiesce on real pods: a namespace runs a Deployment (2 replicas writing to one PVC), a StatefulSet
 * (its own claim from a volumeClaimTemplate, writing too) and a CronJob that mounts a third PVC. A CutOver
 * without any manual scale-down: the controller scales them to 0 and suspends the CronJob before the
 * final sync, the real controller-manager removes their pods, the final sync runs on still volumes, and
 * the destination's files equal the source's. The status lists what was quiesced; the source stays so.
 */

import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { AppsV1Api, BatchV1Api, CoreV1Api, type V1Volume } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { DynamoPhaseLedger } from "../../src/aws/ledger";
import type { ExecutablePhaseName } from "../../src/dvm/itinerary";
import { DEFAULT_MIGRATION_POLICY } from "../../src/dvm/policy";
import type { DirectVolumeMigration } from "../../src/dvm/types";
import { KubeDvmStore } from "../../src/kube/dvmStore";
import { SecretClusterResolver } from "../../src/kube/resolver";
import type { PhaseLedger } from "../../src/ledger";
import { PHASE_BODIES } from "../../src/phases";
import type { PhaseBody } from "../../src/phases/types";
import { PhaseRunner } from "../../src/runner/runner";
import { testClusters } from "../support/clusters";
import { writeDataset } from "../support/dataset";
import { createDvm, driveToCompletion, readDvm, requestFor } from "../support/migration";
import {
  appPodTemplate,
  createBoundPvc,
  ensureNamespace,
  expectSameCopy,
  NODE_ADMIN_NAMESPACE,
  nodeMigrationsForFile,
  testNodes,
  volumeFolder,
} from "../support/nodes";
import { found } from "../support/poll";

const clusters = testClusters();
const nodes = testNodes();
const run = `q${Date.now().toString(36)}`;
const MiB = 1024 * 1024;
const sourceNode2 = nodes.sourceNodes[1]?.nodeName ?? "";
const migrations = nodeMigrationsForFile(clusters, nodes, run, () => {
  if (!sourceNode2) throw new Error("the source cluster has fewer than two nodes");
});

const WRITE = 'mkdir -p /data/live; i=0; while :; do i=$((i+1)); echo "$i" >> /data/live/$(hostname); sleep 0.2; done';

/**
 * In `namespace` on source node 2: Deployment api (2 replicas) and StatefulSet web (1, its claim
 * data-web-0 from a volumeClaimTemplate) writing to their volumes, and CronJob backup mounting
 * backup-data; returns once the three app pods run.
 */
async function startApps(namespace: string): Promise<void> {
  await ensureNamespace(clusters.source, namespace);
  const core = clusters.source.makeApiClient(CoreV1Api);
  const apps = clusters.source.makeApiClient(AppsV1Api);
  await core.createNamespacedPersistentVolumeClaim({
    namespace,
    body: {
      metadata: { name: "api-data" },
      spec: { accessModes: ["ReadWriteOnce"], storageClassName: nodes.storageClass, resources: { requests: { storage: "1Gi" } } },
    },
  });
  await createBoundPvc(clusters.source, namespace, "backup-data", { storageClass: nodes.storageClass, node: sourceNode2 });
  const claimVolume = (claim: string): V1Volume[] => [{ name: "data", persistentVolumeClaim: { claimName: claim } }];
  await apps.createNamespacedDeployment({
    namespace,
    body: {
      metadata: { name: "api" },
      spec: { replicas: 2, selector: { matchLabels: { app: "api" } }, template: appPodTemplate(nodes, "api", sourceNode2, WRITE, claimVolume("api-data")) },
    },
  });
  await apps.createNamespacedStatefulSet({
    namespace,
    body: {
      metadata: { name: "web" },
      spec: {
        replicas: 1,
        serviceName: "web",
        selector: { matchLabels: { app: "web" } },
        template: appPodTemplate(nodes, "web", sourceNode2, WRITE, []),
        volumeClaimTemplates: [
          {
            metadata: { name: "data" },
            spec: { accessModes: ["ReadWriteOnce"], storageClassName: nodes.storageClass, resources: { requests: { storage: "1Gi" } } },
          },
        ],
      },
    },
  });
  const backup = appPodTemplate(nodes, "backup", sourceNode2, "ls /data", claimVolume("backup-data"));
  const backupTemplate = { ...backup, spec: { ...backup.spec, restartPolicy: "Never" } };
  await clusters.source.makeApiClient(BatchV1Api).createNamespacedCronJob({
    namespace,
    body: {
      metadata: { name: "backup" },
      spec: {
        schedule: "*/30 * * * *",
        jobTemplate: { spec: { template: backupTemplate } },
      },
    },
  });
  await appPodsRunning(namespace, "the api and web pods Running");
}

/** Waits until the three app pods (api 2, web 1) run in `namespace`. */
async function appPodsRunning(namespace: string, what: string): Promise<void> {
  const core = clusters.source.makeApiClient(CoreV1Api);
  await found(what, async () => (await core.listNamespacedPod({ namespace })).items.filter((p) => p.status?.phase === "Running").length === 3, {
    timeoutMs: 180_000,
    intervalMs: 100,
    retryErrors: true,
  });
}

const APP_CLAIMS = ["api-data", "data-web-0", "backup-data"];

/** A CutOver of the apps' three claims in `namespace`, from the admin namespace. */
function createCutOver(name: string, namespace: string): Promise<DirectVolumeMigration> {
  return createDvm(clusters.source, NODE_ADMIN_NAMESPACE, name, {
    ...migrations.toDestination,
    runAsRoot: true,
    migrationType: "CutOver",
    persistentVolumeClaims: APP_CLAIMS.map((claim) => ({
      name: claim,
      namespace,
      targetStorageClass: nodes.storageClass,
      targetAccessModes: ["ReadWriteOnce"],
    })),
  });
}

describe("a CutOver with spec.quiesce on real pods", () => {
  it("scales the Deployment, StatefulSet and CronJob down before the final sync, lists them, and the volumes end equal", async () => {
    const namespace = `quiesce-${run}`;
    await startApps(namespace);
    const core = clusters.source.makeApiClient(CoreV1Api);
    const apps = clusters.source.makeApiClient(AppsV1Api);
    const apiFolder = await volumeFolder(clusters.source, nodes.source, namespace, "api-data");
    mkdirSync(join(apiFolder, "seed"));
    writeDataset(join(apiFolder, "seed"), { bytes: 16 * MiB, files: 200, seed: 28 });
    writeDataset(await volumeFolder(clusters.source, nodes.source, namespace, "backup-data"), { bytes: 4 * MiB, files: 50, seed: 29 });

    const seenAtFinalSync: string[] = [];
    let finishedAtFinalSync = 0;
    const name = `quiesce-cutover-${run}`;
    const dvm = await createCutOver(name, namespace);
    await migrations.drive(dvm, {
      each: async () => {
        const current = await readDvm(clusters.source, NODE_ADMIN_NAMESPACE, name);
        if (current.status.phase !== "RunRsyncOperations" || seenAtFinalSync.length > 0) return;
        // A pod being removed may still be listed as Failed or Succeeded: its containers are gone, so are its mounts.
        const pods = (await core.listNamespacedPod({ namespace })).items.filter((p) => ["api", "web", "backup"].includes(p.metadata?.labels?.app ?? ""));
        const live = pods.filter((p) => p.status?.phase !== "Failed" && p.status?.phase !== "Succeeded");
        seenAtFinalSync.push(`app pods not finished: ${live.map((p) => `${p.metadata?.name}/${p.status?.phase}`).join(",") || "none"}`);
        finishedAtFinalSync = pods.length - live.length;
      },
    });
    const done = await readDvm(clusters.source, NODE_ADMIN_NAMESPACE, name);
    expect(done.status.phase).toBe("Completed");
    expect(done.status.conditions?.find((c) => c.type === "Succeeded")?.status).toBe("True");
    expect(done.status.quiescedApplications).toEqual([
      { kind: "Deployment", namespace, name: "api", replicas: 2 },
      { kind: "StatefulSet", namespace, name: "web", replicas: 1 },
      { kind: "CronJob", namespace, name: "backup", suspend: false },
    ]);
    expect(seenAtFinalSync).toEqual(["app pods not finished: none"]);
    // On success the source stays quiesced.
    expect((await apps.readNamespacedDeployment({ namespace, name: "api" })).spec?.replicas).toBe(0);
    expect((await apps.readNamespacedStatefulSet({ namespace, name: "web" })).spec?.replicas).toBe(0);
    expect((await clusters.source.makeApiClient(BatchV1Api).readNamespacedCronJob({ namespace, name: "backup" })).spec?.suspend).toBe(true);
    for (const claim of APP_CLAIMS)
      await expectSameCopy(clusters, nodes, { namespace, claim, sourceFolder: await volumeFolder(clusters.source, nodes.source, namespace, claim) }, 0);
    console.info(
      `[figures] quiesce on real pods: ${JSON.stringify(done.status.quiescedApplications)}; at the final sync: ${seenAtFinalSync.join("; ")} (${finishedAtFinalSync} finished pods still listed)`,
    );
  });
  it("with a crash right after the scale-down: the takeover keeps 2 and the StatefulSet's own, and a failure after it restores exactly those", async () => {
    const namespace = `quiesce-crash-${run}`;
    await startApps(namespace);
    const apps = clusters.source.makeApiClient(AppsV1Api);
    const name = `quiesce-crash-${run}`;
    const dvm = await createCutOver(name, namespace);
    const real = new DynamoPhaseLedger({ client: migrations.table.client, tableName: migrations.table.tableName });
    const runner = (options: { ledger?: PhaseLedger; leaseMs?: number; bodies?: Partial<Record<ExecutablePhaseName, PhaseBody>> }) =>
      new PhaseRunner({
        store: new KubeDvmStore(clusters.source),
        ledger: options.ledger ?? real,
        clusters: new SecretClusterResolver(clusters.source),
        bodies: { ...PHASE_BODIES, ...options.bodies },
        leaseMs: options.leaseMs ?? 120_000,
        policy: { ...DEFAULT_MIGRATION_POLICY, defaultTransferImage: nodes.transferImage },
      });
    // Up to the quiesce, as usual; then the process dies right after QuiesceApplications' body returned.
    const steady = runner({});
    for (let i = 0; i < 600; i++) {
      if ((await readDvm(clusters.source, NODE_ADMIN_NAMESPACE, name)).status.phase === "QuiesceApplications") break;
      await steady.run(requestFor(dvm));
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    const dying = new Proxy(real, {
      get(target, property) {
        if (property === "complete") return () => Promise.reject(new Error("injected: process killed after the scale-down"));
        const value = Reflect.get(target, property, target) as unknown;
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    const shortLeaseMs = 8_000;
    await expect(runner({ ledger: dying, leaseMs: shortLeaseMs }).run(requestFor(dvm))).rejects.toThrow(/process killed/);
    expect((await apps.readNamespacedDeployment({ namespace, name: "api" })).spec?.replicas).toBe(0);
    await new Promise((resolve) => setTimeout(resolve, shortLeaseMs + 1_000));

    // The takeover, then the final sync fails once it ran.
    const failingSync: PhaseBody = async (ctx) => {
      const outcome = await PHASE_BODIES.RunRsyncOperations(ctx);
      return outcome.kind === "advance" ? { kind: "fail", errors: ["injected: the final sync failed"] } : outcome;
    };
    await driveToCompletion(runner({ bodies: { RunRsyncOperations: failingSync } }), requestFor(dvm), { maxSteps: 3_000, maxDelayMs: 1_000 });
    const quiesce = (await real.history(dvm.metadata.uid)).find((e) => e.key.phase === "QuiesceApplications");
    expect(quiesce).toMatchObject({ state: "COMPLETED", attempts: 2, takeovers: 1 });
    const recorded = [
      { kind: "Deployment", namespace, name: "api", replicas: 2 },
      { kind: "StatefulSet", namespace, name: "web", replicas: 1 },
      { kind: "CronJob", namespace, name: "backup", suspend: false },
    ];
    expect(quiesce?.outcome?.statusUpdate?.quiescedApplications).toEqual(recorded);
    const done = await readDvm(clusters.source, NODE_ADMIN_NAMESPACE, name);
    expect(done.status.conditions?.find((c) => c.type === "Failed")?.status).toBe("True");
    expect(done.status.quiescedApplications).toEqual(recorded.map((a) => ({ ...a, restored: true })));
    expect((await apps.readNamespacedDeployment({ namespace, name: "api" })).spec?.replicas).toBe(2);
    expect((await apps.readNamespacedStatefulSet({ namespace, name: "web" })).spec?.replicas).toBe(1);
    expect((await clusters.source.makeApiClient(BatchV1Api).readNamespacedCronJob({ namespace, name: "backup" })).spec?.suspend).toBe(false);
    // The real controllers bring the pods back.
    await appPodsRunning(namespace, "the api and web pods Running again");
    console.info(
      `[figures] quiesce crash on real pods: QuiesceApplications attempts ${quiesce?.attempts}, takeovers ${quiesce?.takeovers}; restored ${JSON.stringify(recorded)}`,
    );
  });
});
