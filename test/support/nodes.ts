/**
 * Helpers for tests on node-mode clusters (test/setup/nodes.ts): the nodes a cluster runs on, where a
 * volume's files really are, and PVCs bound to the clusters' local-path storage.
 */
import { readFileSync } from "node:fs";
import { CoreV1Api, type KubeConfig } from "@kubernetes/client-node";
import { inject } from "vitest";
import { provisionedOn } from "../../infra/dev/local/nodes/localPath";
import { volumeFolder as volumeFolderOf } from "../../infra/dev/local/nodes/volumes";
import { createPhaseRunner } from "../../src/aws/phaseRunner";
import { DEFAULT_MIGRATION_POLICY } from "../../src/dvm/policy";
import type { DirectVolumeMigration } from "../../src/dvm/types";
import type { PhaseRunner } from "../../src/runner/runner";
import type { ProvidedNode, ProvidedNodes } from "../setup/nodes";
import type { TestClusters } from "./clusters";
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

export interface NodeMigrations {
  runner: PhaseRunner;
  table: FreshTable;
  /** The spec fields that send a DVM to the destination cluster over a NodePort, as root. */
  toDestination: { destinationCluster: { kubeconfigSecretRef: { name: string } }; endpointType: "NodePort" };
  /** Creates the DVM in the admin namespace and drives it to its end, as the relay would; returns it then. */
  migrate(name: string, spec: Record<string, unknown>): Promise<DirectVolumeMigration>;
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
  return {
    runner,
    table,
    toDestination,
    async migrate(name, spec) {
      const dvm = await createDvm(clusters.source, NODE_ADMIN_NAMESPACE, name, spec);
      await driveToCompletion(runner, requestFor(dvm), { maxSteps: 3_000, maxDelayMs: 1_000 });
      return readDvm(clusters.source, NODE_ADMIN_NAMESPACE, name);
    },
    stop: () => table.drop(),
  };
}
