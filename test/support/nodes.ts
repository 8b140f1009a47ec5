/**
 * Helpers for tests on node-mode clusters (test/setup/nodes.ts): the nodes a cluster runs on, where a
 * volume's files really are, and PVCs bound to the clusters' local-path storage.
 */

import { readFileSync } from "node:fs";
import { CoreV1Api, type KubeConfig, type V1PodSpec, type V1PodTemplateSpec, type V1Volume } from "@kubernetes/client-node";
import { afterAll, beforeAll, expect, inject } from "vitest";
import { provisionedOn } from "../../infra/dev/local/nodes/localPath";
import { volumeFolder as volumeFolderOf } from "../../infra/dev/local/nodes/volumes";
import { createPhaseRunner } from "../../src/aws/phaseRunner";
import type { RunResult } from "../../src/contracts/request";
import { DEFAULT_MIGRATION_POLICY } from "../../src/dvm/policy";
import type { DirectVolumeMigration } from "../../src/dvm/types";
import type { PhaseRunner } from "../../src/runner/runner";
import type { ProvidedNode, ProvidedNodes } from "../setup/nodes";
import type { TestClusters } from "./clusters";
import { manifest, manifestDiff } from "./dataset";
import { type FreshTable, freshLedgerTable } from "./dynamo";
import { createDvm, driveToCompletion, readDvm, requestFor } from "./migration";

export function testNodes(): ProvidedNodes {
  return inject("nodes");
}

/** The nodes of the cluster `kc` is for, node 1 first. */
export function clusterNodes(kc: KubeConfig): ProvidedNode[] {
  const nodes = testNodes();
  const server = kc.getCurrentCluster()?.server;
  if (server === nodes.servers.source) return nodes.sourceNodes;
  if (server === nodes.servers.destination) return nodes.destinationNodes;
  throw new Error(`no node cluster at ${server}`);
}

/**
 * The folder (as this process sees it) that holds the files of a bound PVC: on the node of `kc`'s cluster
 * that its PV is bound to (`_node` names the cluster for the reader; the PV says which of its nodes).
 */
export function volumeFolder(kc: KubeConfig, _node: ProvidedNode, namespace: string, name: string): Promise<string> {
  return volumeFolderOf(kc, clusterNodes(kc), namespace, name);
}

/**
 * A PVC provisioned at once on `node` (default: node 1 of `kc`'s cluster), as if its first pod had been
 * scheduled there: the storage waits for a first consumer, and tests write the files before any pod.
 */
export async function createBoundPvc(
  kc: KubeConfig,
  namespace: string,
  name: string,
  options: { storageClass: string; size?: string; node?: string },
): Promise<void> {
  const node = options.node ?? clusterNodes(kc)[0]!.nodeName;
  await kc.makeApiClient(CoreV1Api).createNamespacedPersistentVolumeClaim({
    namespace,
    body: {
      metadata: { name, labels: { app: name }, annotations: provisionedOn(node) },
      spec: { accessModes: ["ReadWriteOnce"], storageClassName: options.storageClass, resources: { requests: { storage: options.size ?? "1Gi" } } },
    },
  });
}

export async function ensureNamespace(kc: KubeConfig, name: string): Promise<void> {
  await kc
    .makeApiClient(CoreV1Api)
    .createNamespace({ body: { metadata: { name } } })
    .catch((error: { code?: number }) => {
      if (error.code !== 409) throw error;
    });
}

/** What a test may add to a drive: calls of its own around every step. */
interface DriveExtras {
  each?: (step: number) => Promise<unknown>;
}

export interface NodeMigrations {
  runner: PhaseRunner;
  table: FreshTable;
  /** The spec fields that send a DVM to the destination cluster over a NodePort, as root. */
  toDestination: { destinationCluster: { kubeconfigSecretRef: { name: string } }; endpointType: "NodePort" };
  /**
   * Creates the DVM in the admin namespace and drives it to its end, as the relay would, while `during`
   * runs beside it; returns the DVM then.
   */
  migrate(name: string, spec: Record<string, unknown>, during?: () => Promise<void>): Promise<DirectVolumeMigration>;
  /** Drives an existing DVM to its end with the node tests' step bounds. */
  drive(dvm: DirectVolumeMigration, options?: DriveExtras): Promise<RunResult[]>;
  stop(): Promise<void>;
}

export const NODE_ADMIN_NAMESPACE = "dvm-system";

/**
 * The admin namespace and the destination's kubeconfig in a Secret there; returns the spec fields that
 * send a DVM to the destination cluster over a NodePort.
 */
export async function prepareDestination(clusters: TestClusters, run: string): Promise<NodeMigrations["toDestination"]> {
  await ensureNamespace(clusters.source, NODE_ADMIN_NAMESPACE);
  const secret = `destination-${run}`;
  await clusters.source.makeApiClient(CoreV1Api).createNamespacedSecret({
    namespace: NODE_ADMIN_NAMESPACE,
    body: { metadata: { name: secret }, stringData: { kubeconfig: readFileSync(clusters.info.destination.kubeconfigPath, "utf8") } },
  });
  return { destinationCluster: { kubeconfigSecretRef: { name: secret } }, endpointType: "NodePort" };
}

/**
 * What every migration test on the node clusters starts from: a fresh ledger table, the real runner with
 * the operator's default policy (the transfer image built here as the default), the admin namespace and
 * the destination's kubeconfig in a Secret there.
 */
export async function startNodeMigrations(clusters: TestClusters, nodes: ProvidedNodes, run: string): Promise<NodeMigrations> {
  const table = await freshLedgerTable();
  const runner = createPhaseRunner({
    hostKubeConfig: clusters.source,
    ledgerTableName: table.tableName,
    dynamo: table.client,
    leaseMs: 120_000,
    policy: { ...DEFAULT_MIGRATION_POLICY, defaultTransferImage: nodes.transferImage },
  });
  const toDestination = await prepareDestination(clusters, run);
  const drive = (dvm: DirectVolumeMigration, options: DriveExtras = {}) =>
    driveToCompletion(runner, requestFor(dvm), { maxSteps: 3_000, maxDelayMs: 1_000, ...options });
  return {
    runner,
    table,
    toDestination,
    drive,
    async migrate(name, spec, during) {
      const dvm = await createDvm(clusters.source, NODE_ADMIN_NAMESPACE, name, spec);
      await Promise.all([drive(dvm), during?.()]);
      return readDvm(clusters.source, NODE_ADMIN_NAMESPACE, name);
    },
    stop: () => table.drop(),
  };
}

/**
 * A test file's node migrations: started before its tests (after `precondition`, which throws when the
 * clusters cannot run them) and stopped after them. Read them inside the tests: they exist from beforeAll.
 */
export function nodeMigrationsForFile(clusters: TestClusters, nodes: ProvidedNodes, run: string, precondition?: () => void): NodeMigrations {
  let started: NodeMigrations | undefined;
  beforeAll(async () => {
    precondition?.();
    started = await startNodeMigrations(clusters, nodes, run);
  });
  afterAll(async () => {
    await started?.stop();
  });
  const current = (): NodeMigrations => {
    if (!started) throw new Error("the node migrations start in beforeAll: use them inside a test");
    return started;
  };
  return {
    get runner() {
      return current().runner;
    },
    get table() {
      return current().table;
    },
    get toDestination() {
      return current().toDestination;
    },
    migrate: (name, spec, during) => current().migrate(name, spec, during),
    drive: (dvm, options) => current().drive(dvm, options),
    stop: () => current().stop(),
  };
}

/**
 * The pod template of a test app on `node`: one container of the transfer image (it has a shell) that
 * runs `script` with the pod's volume "data" at /data, and stops at once.
 */
export function appPodTemplate(nodes: ProvidedNodes, app: string, node: string, script: string, volumes: V1Volume[]): V1PodTemplateSpec & { spec: V1PodSpec } {
  return {
    metadata: { labels: { app } },
    spec: {
      nodeSelector: { "kubernetes.io/hostname": node },
      terminationGracePeriodSeconds: 1,
      automountServiceAccountToken: false,
      containers: [
        {
          name: app,
          image: nodes.transferImage,
          imagePullPolicy: "Never",
          command: ["sh", "-c", script],
          volumeMounts: [{ name: "data", mountPath: "/data" }],
        },
      ],
      volumes,
    },
  };
}

/**
 * The claim's copy on the destination (same namespace and name, lost+found aside) holds what
 * `sourceFolder` holds, owners included, and that is more than `moreFilesThan` files.
 */
export async function expectSameCopy(
  clusters: TestClusters,
  nodes: ProvidedNodes,
  copyOf: { namespace: string; claim: string; sourceFolder: string },
  moreFilesThan: number,
): Promise<void> {
  const source = await manifest(copyOf.sourceFolder, { owners: true });
  const copy = await manifest(await volumeFolder(clusters.destination, nodes.destination, copyOf.namespace, copyOf.claim), {
    owners: true,
    exclude: (p) => p === "lost+found",
  });
  expect(Object.keys(source).length).toBeGreaterThan(moreFilesThan);
  expect(manifestDiff(source, copy), copyOf.claim).toEqual([]);
}
