/**
 * Helpers for tests on node-mode clusters (test/setup/nodes.ts): the node a cluster runs on, where a
 * volume's files really are, and PVCs bound to the clusters' host-path storage.
 */
import { CoreV1Api, type KubeConfig } from "@kubernetes/client-node";
import { inject } from "vitest";
import { volumeFolder as volumeFolderOf } from "../../src/local/nodes/volumes";
import type { ProvidedNode, ProvidedNodes } from "../setup/nodes";

export function testNodes(): ProvidedNodes {
  return inject("nodes");
}

/** The folder (as this process sees it) that holds the files of a bound PVC on a node. */
export function volumeFolder(kc: KubeConfig, node: ProvidedNode, namespace: string, name: string): Promise<string> {
  return volumeFolderOf(kc, node.holderPid, namespace, name);
}

export async function createBoundPvc(kc: KubeConfig, namespace: string, name: string, options: { storageClass: string; size?: string }): Promise<void> {
  await kc.makeApiClient(CoreV1Api).createNamespacedPersistentVolumeClaim({
    namespace,
    body: {
      metadata: { name, labels: { app: name } },
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
