/**
 * Volumes bound to one node of a two-node source cluster (local-path, as kind ships it), on real pods:
 * an app Deployment pinned to source node 2 keeps writing to its ReadWriteOnce PVC while a Stage copies
 * it; the rsync client pod runs on node 2 (the app's node, read from both pods' spec.nodeName); then the
 * app is scaled to zero, a CutOver runs, and the destination's files equal the source's. The same for a
 * PVC whose PV is bound to node 2 and that no pod mounts. The destination's server pods are the first
 * consumers of their new PVCs: each PV lands on the node of the server pod that mounted it.
 */
import { mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { AppsV1Api, CoreV1Api, type V1Pod } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { volumeNode } from "../../infra/dev/local/nodes/volumes";
import type { DirectVolumeMigration } from "../../src/dvm/types";
import { testClusters } from "../support/clusters";
import { writeDataset } from "../support/dataset";
import { createDvm, readDvm } from "../support/migration";
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
const run = `t${Date.now().toString(36)}`;
const MiB = 1024 * 1024;
const ROLE = "dvm.migration.openshift.io/role";
const sourceNode2 = nodes.sourceNodes[1]?.nodeName ?? "";
const migrations = nodeMigrationsForFile(clusters, nodes, run, () => {
  if (!sourceNode2) throw new Error("the source cluster has fewer than two nodes");
});

/** Where each transfer pod ran, read while the migration runs (the pods are gone at its end). */
interface Placements {
  /** Client pod name -> its spec.nodeName, and the last waiting reason or event message seen. */
  clients: Map<string, { node?: string | undefined; waiting?: string | undefined }>;
  /** Server pod name -> its spec.nodeName, on the destination. */
  servers: Map<string, string | undefined>;
}

async function recordPlacements(namespace: string, into: Placements): Promise<void> {
  const clients = (await clusters.source.makeApiClient(CoreV1Api).listNamespacedPod({ namespace, labelSelector: `${ROLE}=rsync-client` })).items;
  for (const pod of clients) {
    const waiting = pod.status?.containerStatuses?.find((s) => s.state?.waiting)?.state?.waiting;
    const previous = into.clients.get(pod.metadata!.name!);
    into.clients.set(pod.metadata!.name!, { node: pod.spec?.nodeName, waiting: waiting ? `${waiting.reason}: ${waiting.message ?? ""}` : previous?.waiting });
  }
  const servers = (await clusters.destination.makeApiClient(CoreV1Api).listNamespacedPod({ namespace, labelSelector: `${ROLE}=rsync-server` })).items;
  for (const pod of servers) into.servers.set(pod.metadata!.name!, pod.spec?.nodeName);
}

async function migrate(name: string, namespace: string, claim: string, migrationType: "Stage" | "CutOver") {
  const placements: Placements = { clients: new Map(), servers: new Map() };
  const dvm = await createDvm(clusters.source, NODE_ADMIN_NAMESPACE, name, {
    ...migrations.toDestination,
    runAsRoot: true,
    migrationType,
    persistentVolumeClaims: [{ name: claim, namespace, targetStorageClass: nodes.storageClass, targetAccessModes: ["ReadWriteOnce"] }],
  });
  await migrations.drive(dvm, { each: () => recordPlacements(namespace, placements) });
  const done: DirectVolumeMigration = await readDvm(clusters.source, NODE_ADMIN_NAMESPACE, name);
  return { dvm: done, placements, clientNodes: [...new Set([...placements.clients.values()].map((c) => c.node))] };
}

/** The destination PVC's PV is on the node of a server pod that mounted it: bound by its first consumer. */
async function expectBoundWhereServed(namespace: string, claim: string, placements: Placements): Promise<string | undefined> {
  const core = clusters.destination.makeApiClient(CoreV1Api);
  const pvc = await core.readNamespacedPersistentVolumeClaim({ namespace, name: claim });
  const pv = await core.readPersistentVolume({ name: pvc.spec!.volumeName! });
  const node = volumeNode(pv);
  expect(node).toBeDefined();
  expect([...placements.servers.values()]).toContain(node);
  return node;
}

/** A Deployment pinned to `node` that appends to files in its PVC every 100 ms, and counts in live/counter. */
async function startWriter(namespace: string, claim: string, node: string): Promise<V1Pod> {
  const labels = { app: "writer" };
  await clusters.source.makeApiClient(AppsV1Api).createNamespacedDeployment({
    namespace,
    body: {
      metadata: { name: "writer" },
      spec: {
        replicas: 1,
        selector: { matchLabels: labels },
        template: appPodTemplate(
          nodes,
          "writer",
          node,
          'mkdir -p /data/live; i=0; while :; do i=$((i+1)); echo "$i" >> /data/live/f$((i % 20)); echo "$i" > /data/live/counter; sleep 0.1; done',
          [{ name: "data", persistentVolumeClaim: { claimName: claim } }],
        ),
      },
    },
  });
  const core = clusters.source.makeApiClient(CoreV1Api);
  return found(
    "the writer pod Running",
    async () => (await core.listNamespacedPod({ namespace, labelSelector: "app=writer" })).items.find((p) => p.status?.phase === "Running"),
    { timeoutMs: 120_000, intervalMs: 100, retryErrors: true },
  );
}

async function scaleToZero(namespace: string): Promise<void> {
  await clusters.source
    .makeApiClient(AppsV1Api)
    .patchNamespacedDeploymentScale({ namespace, name: "writer", body: [{ op: "replace", path: "/spec/replicas", value: 0 }] });
  const core = clusters.source.makeApiClient(CoreV1Api);
  await found("the writer pods gone", async () => (await core.listNamespacedPod({ namespace, labelSelector: "app=writer" })).items.length === 0, {
    timeoutMs: 120_000,
    intervalMs: 100,
    retryErrors: true,
  });
}

const counter = (folder: string) => Number(readFileSync(join(folder, "live", "counter"), "utf8").trim());

describe("volumes bound to source node 2", () => {
  it("an app on node 2 keeps writing during a Stage, the client pod runs on node 2, and after scale-to-zero a CutOver ends equal", async () => {
    const namespace = `inuse-${run}`;
    const claim = "app-data";
    await ensureNamespace(clusters.source, namespace);
    // No node named: the app's pod is the claim's first consumer, so local-path binds it on node 2.
    await clusters.source.makeApiClient(CoreV1Api).createNamespacedPersistentVolumeClaim({
      namespace,
      body: {
        metadata: { name: claim },
        spec: { accessModes: ["ReadWriteOnce"], storageClassName: nodes.storageClass, resources: { requests: { storage: "1Gi" } } },
      },
    });
    const app = await startWriter(namespace, claim, sourceNode2);
    expect(app.spec?.nodeName).toBe(sourceNode2);
    const folder = await volumeFolder(clusters.source, nodes.source, namespace, claim);
    mkdirSync(join(folder, "seed"));
    writeDataset(join(folder, "seed"), { bytes: 24 * MiB, files: 300, seed: 26 });
    await found("the app writing", async () => counter(folder) > 0, { timeoutMs: 30_000, intervalMs: 100, retryErrors: true });
    const before = counter(folder);

    const stage = await migrate(`inuse-stage-${run}`, namespace, claim, "Stage");
    expect(stage.dvm.status.phase).toBe("Completed");
    expect(stage.dvm.status.itinerary).toBe("VolumeMigration");
    expect(stage.clientNodes).toEqual([sourceNode2]);
    // The app ran all along, on node 2, and kept writing.
    const appNow = (await clusters.source.makeApiClient(CoreV1Api).readNamespacedPod({ namespace, name: app.metadata!.name! })).spec?.nodeName;
    expect(appNow).toBe(sourceNode2);
    expect(counter(folder)).toBeGreaterThan(before);
    const stageTarget = await expectBoundWhereServed(namespace, claim, stage.placements);

    await scaleToZero(namespace);
    const cutOver = await migrate(`inuse-cutover-${run}`, namespace, claim, "CutOver");
    expect(cutOver.dvm.status.phase).toBe("Completed");
    expect(cutOver.dvm.status.itinerary).toBe("VolumeMigration");
    await expectSameCopy(clusters, nodes, { namespace, claim, sourceFolder: folder }, 100);
    console.info(
      `[figures] in-use RWO volume: app pod on ${app.spec?.nodeName}; Stage client pods on ${stage.clientNodes.join(", ")} ` +
        `(app counter ${before} -> ${counter(folder)} during it); destination PV on ${stageTarget} (server pods on ${[...stage.placements.servers.values()].join(", ")}); ` +
        `CutOver client pods on ${cutOver.clientNodes.join(", ")}; waiting states seen: ${JSON.stringify([...stage.placements.clients.values()].map((c) => c.waiting).filter(Boolean))}`,
    );
  });

  it("a PVC whose PV is bound to node 2 and that no pod mounts: the client pod runs on node 2, Stage and CutOver end equal", async () => {
    const namespace = `idle-${run}`;
    const claim = "data";
    await ensureNamespace(clusters.source, namespace);
    await createBoundPvc(clusters.source, namespace, claim, { storageClass: nodes.storageClass, node: sourceNode2 });
    const folder = await volumeFolder(clusters.source, nodes.source, namespace, claim);
    const pv = await clusters.source.makeApiClient(CoreV1Api).readPersistentVolume({
      name: (await clusters.source.makeApiClient(CoreV1Api).readNamespacedPersistentVolumeClaim({ namespace, name: claim })).spec!.volumeName!,
    });
    expect(volumeNode(pv)).toBe(sourceNode2);
    writeDataset(folder, { bytes: 24 * MiB, files: 300, seed: 27 });

    const stage = await migrate(`idle-stage-${run}`, namespace, claim, "Stage");
    expect(stage.dvm.status.phase).toBe("Completed");
    expect(stage.clientNodes).toEqual([sourceNode2]);
    await expectBoundWhereServed(namespace, claim, stage.placements);
    const cutOver = await migrate(`idle-cutover-${run}`, namespace, claim, "CutOver");
    expect(cutOver.dvm.status.phase).toBe("Completed");
    expect(cutOver.clientNodes).toEqual([sourceNode2]);
    await expectSameCopy(clusters, nodes, { namespace, claim, sourceFolder: folder }, 100);
    console.info(
      `[figures] idle volume on ${volumeNode(pv)}: Stage and CutOver client pods on ${stage.clientNodes.join(", ")} / ${cutOver.clientNodes.join(", ")}`,
    );
  });
});
