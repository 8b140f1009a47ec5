/**
 * Faults of a real cluster mid-transfer, on the two-node clusters (issue 26, item 4): the kubelet of the
 * source node that runs the rsync client pod is stopped for at least 60 s (long enough for the node
 * lifecycle controller, at kube-controller-manager's default --node-monitor-grace-period of 50 s, to mark
 * the node's Ready condition Unknown) and started again; the containerd of the destination node that
 * runs the rsync server pod is stopped and started again. A bandwidth limit keeps each transfer running
 * well past the fault. Each test asserts what happens to the migration, compares the destination's files
 * with the source's, and checks that no transfer pod, Secret, Service or ConfigMap of the DVM is left on
 * either cluster.
 */
import { CoreV1Api, type KubeConfig, type V1Pod } from "@kubernetes/client-node";
import { afterAll, describe, expect, it } from "vitest";
import { type NodeComponent, nodeComponentRunning, startNodeComponent, stopNodeComponent } from "../../infra/dev/local/nodes/components";
import type { DirectVolumeMigration } from "../../src/dvm/types";
import type { ProvidedNode } from "../setup/nodes";
import { testClusters } from "../support/clusters";
import { writeDataset } from "../support/dataset";
import { createDvm, readDvm, transferLeftovers } from "../support/migration";
import { createBoundPvc, ensureNamespace, expectSameCopy, NODE_ADMIN_NAMESPACE, nodeMigrationsForFile, testNodes, volumeFolder } from "../support/nodes";
import { found } from "../support/poll";

const clusters = testClusters();
const nodes = testNodes();
const run = `f${Date.now().toString(36)}`;
const MiB = 1024 * 1024;
const ROLE = "dvm.migration.openshift.io/role";
/** What the node lifecycle controller needs to see a silent kubelet: the brief's 60 s. */
const KUBELET_DOWN_MS = 60_000;
const migrations = nodeMigrationsForFile(clusters, nodes, run);
/** Components this file stopped and has not started again: started in afterAll whatever happened. */
const stopped: { node: ProvidedNode; component: NodeComponent }[] = [];

afterAll(() => {
  for (const { node, component } of stopped.splice(0)) if (!nodeComponentRunning(node.dir, component)) startNodeComponent(node.dir, component);
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function readyCondition(kc: KubeConfig, nodeName: string) {
  const node = await kc.makeApiClient(CoreV1Api).readNode({ name: nodeName });
  return node.status?.conditions?.find((c) => c.type === "Ready");
}

async function waitNodeReady(kc: KubeConfig, nodeName: string): Promise<void> {
  await found(`node ${nodeName} Ready again`, async () => (await readyCondition(kc, nodeName))?.status === "True", {
    timeoutMs: 180_000,
    intervalMs: 1_000,
    retryErrors: true,
  });
}

/** The first pod of `role` in `namespace` that is Running, waited for. */
async function runningPod(kc: KubeConfig, namespace: string, role: string): Promise<V1Pod> {
  return found(
    `a Running ${role} pod in ${namespace}`,
    async () => {
      const pods = (await kc.makeApiClient(CoreV1Api).listNamespacedPod({ namespace, labelSelector: `${ROLE}=${role}` })).items;
      return pods.find((p) => p.status?.phase === "Running");
    },
    { timeoutMs: 300_000, intervalMs: 500, retryErrors: true },
  );
}

async function stopComponent(node: ProvidedNode, component: NodeComponent): Promise<void> {
  stopped.push({ node, component });
  await stopNodeComponent(node.dir, component);
}

function startComponent(node: ProvidedNode, component: NodeComponent): void {
  startNodeComponent(node.dir, component);
  stopped.splice(
    stopped.findIndex((s) => s.node === node && s.component === component),
    1,
  );
}

/** One seeded source volume on `node` (local-path) and the DVM spec that copies it, held to `kib` KiB/s. */
async function seededVolume(prefix: string, node: string, bytes: number, kib: number) {
  const namespace = `${prefix}-${run}`;
  const claim = "data";
  await ensureNamespace(clusters.source, namespace);
  await createBoundPvc(clusters.source, namespace, claim, { storageClass: nodes.storageClass, node });
  const folder = await volumeFolder(clusters.source, nodes.source, namespace, claim);
  writeDataset(folder, { bytes, files: 200, seed: 46 });
  const spec = {
    ...migrations.toDestination,
    runAsRoot: true,
    migrationType: "CutOver",
    transfer: { bandwidthLimitKiBPerSecond: kib },
    persistentVolumeClaims: [{ name: claim, namespace, targetStorageClass: nodes.storageClass, targetAccessModes: ["ReadWriteOnce"] }],
  };
  return { namespace, claim, folder, spec };
}

async function expectNothingLeft(dvm: DirectVolumeMigration, namespace: string): Promise<void> {
  // Pods the cleanup deleted may still be terminating on a node that just came back: give them their end.
  await found("no transfer objects left", async () => (await transferLeftovers(clusters, dvm.metadata.uid, [namespace, NODE_ADMIN_NAMESPACE])).length === 0, {
    timeoutMs: 60_000,
    intervalMs: 1_000,
    retryErrors: true,
  }).catch(() => undefined);
  expect(await transferLeftovers(clusters, dvm.metadata.uid, [namespace, NODE_ADMIN_NAMESPACE])).toEqual([]);
}

const conditionsOf = (dvm: DirectVolumeMigration) => (dvm.status.conditions ?? []).map((c) => `${c.type}/${c.reason}: ${c.message}`);

describe("faults of a real cluster mid-transfer", () => {
  it("the client pod's kubelet stopped for 60 s: the node goes NotReady (Ready Unknown), comes back, and the migration completes equal", async () => {
    const clientNode = nodes.sourceNodes[1]!;
    const volume = await seededVolume("kubelet", clientNode.nodeName, 96 * MiB, 1024);
    const dvm = await createDvm(clusters.source, NODE_ADMIN_NAMESPACE, `kubelet-${run}`, volume.spec);
    const seen: { ready: string[]; clientPhases: string[]; clientNode?: string | undefined; downMs?: number } = { ready: [], clientPhases: [] };
    const fault = (async () => {
      const client = await runningPod(clusters.source, volume.namespace, "rsync-client");
      seen.clientNode = client.spec?.nodeName;
      const node = nodes.sourceNodes.find((n) => n.nodeName === client.spec?.nodeName)!;
      const since = Date.now();
      await stopComponent(node, "kubelet");
      // At least 60 s, and until the control plane has seen it (bounded: the grace period is 50 s).
      while (Date.now() - since < KUBELET_DOWN_MS || (!seen.ready.includes("Unknown") && Date.now() - since < 3 * KUBELET_DOWN_MS)) {
        const ready = await readyCondition(clusters.source, node.nodeName);
        const line = `${ready?.status}`;
        if (seen.ready.at(-1) !== line) seen.ready.push(line);
        const phase =
          (await clusters.source.makeApiClient(CoreV1Api).readNamespacedPod({ namespace: volume.namespace, name: client.metadata!.name! })).status?.phase ?? "";
        if (seen.clientPhases.at(-1) !== phase) seen.clientPhases.push(phase);
        await sleep(2_000);
      }
      seen.downMs = Date.now() - since;
      startComponent(node, "kubelet");
      await waitNodeReady(clusters.source, node.nodeName);
    })();
    const driven = migrations.drive(dvm);
    await Promise.all([fault, driven]);
    const done = await readDvm(clusters.source, NODE_ADMIN_NAMESPACE, dvm.metadata.name);
    console.info(
      `[figures] kubelet of ${seen.clientNode} down ${((seen.downMs ?? 0) / 1000).toFixed(0)} s: node Ready ${seen.ready.join(" -> ")}; ` +
        `client pod phase ${seen.clientPhases.join(" -> ")}; DVM ${done.status.phase}; rsync attempts ${done.status.rsyncOperations?.map((o) => o.currentAttempt).join(", ")}; conditions ${JSON.stringify(conditionsOf(done))}`,
    );
    expect(seen.clientNode).toBe(clientNode.nodeName);
    expect(seen.ready[0]).toBe("True");
    expect(seen.ready).toContain("Unknown");
    // Mid-transfer: the client ran all through the stop, and its first attempt carried the copy to the end.
    expect(seen.clientPhases).toEqual(["Running"]);
    expect(done.status.rsyncOperations?.map((o) => o.currentAttempt)).toEqual([1]);
    expect(done.status.phase, JSON.stringify(conditionsOf(done))).toBe("Completed");
    await expectSameCopy(clusters, nodes, { namespace: volume.namespace, claim: volume.claim, sourceFolder: volume.folder }, 100);
    await expectNothingLeft(done, volume.namespace);
  });

  it("the server pod's containerd restarted: the migration completes equal", async () => {
    const volume = await seededVolume("containerd", nodes.sourceNodes[0]!.nodeName, 64 * MiB, 2048);
    const dvm = await createDvm(clusters.source, NODE_ADMIN_NAMESPACE, `containerd-${run}`, volume.spec);
    const seen: { serverNode?: string | undefined; ready: string[]; clientAfter?: string | undefined } = { ready: [] };
    const fault = (async () => {
      const client = await runningPod(clusters.source, volume.namespace, "rsync-client");
      const server = await runningPod(clusters.destination, volume.namespace, "rsync-server");
      seen.serverNode = server.spec?.nodeName;
      const node = nodes.destinationNodes.find((n) => n.nodeName === server.spec?.nodeName)!;
      await stopComponent(node, "containerd");
      await sleep(5_000);
      seen.ready.push(`${(await readyCondition(clusters.destination, node.nodeName))?.status}`);
      startComponent(node, "containerd");
      seen.clientAfter = (
        await clusters.source.makeApiClient(CoreV1Api).readNamespacedPod({ namespace: volume.namespace, name: client.metadata!.name! })
      ).status?.phase;
      await waitNodeReady(clusters.destination, node.nodeName);
    })();
    const driven = migrations.drive(dvm);
    await Promise.all([fault, driven]);
    const done = await readDvm(clusters.source, NODE_ADMIN_NAMESPACE, dvm.metadata.name);
    console.info(
      `[figures] containerd of ${seen.serverNode} restarted: node Ready while down ${seen.ready.join(", ")}; client pod ${seen.clientAfter} after the restart; DVM ${done.status.phase}; ` +
        `rsync attempts ${done.status.rsyncOperations?.map((o) => o.currentAttempt).join(", ")}; conditions ${JSON.stringify(conditionsOf(done))}`,
    );
    expect(seen.serverNode).toBeDefined();
    // Mid-transfer: the client still ran once containerd was back, and its first attempt finished the copy.
    expect(seen.clientAfter).toBe("Running");
    expect(done.status.rsyncOperations?.map((o) => o.currentAttempt)).toEqual([1]);
    expect(done.status.phase, JSON.stringify(conditionsOf(done))).toBe("Completed");
    await expectSameCopy(clusters, nodes, { namespace: volume.namespace, claim: volume.claim, sourceFolder: volume.folder }, 100);
    await expectNothingLeft(done, volume.namespace);
  });
});
