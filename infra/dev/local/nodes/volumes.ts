/** Where a bound PVC's files are on a node-mode cluster, seen from this machine. */
import { CoreV1Api, type KubeConfig, type V1PersistentVolume, type V1PersistentVolumeClaim } from "@kubernetes/client-node";
import { waitFor } from "../wait";

/** A node as this module needs it: its name and the pid holding its mount namespace. */
export interface NodeMountNamespace {
  nodeName: string;
  holderPid: number;
}

/**
 * The folder holding the files of PVC `namespace/name` once it is bound: the volume's path inside the
 * private mount namespace of the node its PV is bound to (the PV's node affinity on
 * kubernetes.io/hostname, as local-path and the loop-device PVs set it), reached through
 * /proc/<holderPid>/root.
 */
export async function volumeFolder(kc: KubeConfig, nodes: readonly NodeMountNamespace[], namespace: string, name: string, timeoutMs = 60_000): Promise<string> {
  const core = kc.makeApiClient(CoreV1Api);
  let claim: V1PersistentVolumeClaim | undefined;
  await waitFor(
    `PVC ${namespace}/${name} Bound`,
    async () => {
      claim = await core.readNamespacedPersistentVolumeClaim({ namespace, name });
      return claim.status?.phase === "Bound";
    },
    timeoutMs,
  );
  const volume: V1PersistentVolume = await core.readPersistentVolume({ name: claim!.spec!.volumeName! });
  const path = volume.spec?.hostPath?.path ?? volume.spec?.local?.path;
  if (!path) throw new Error(`PV ${volume.metadata?.name} of ${namespace}/${name} is not a host-path or local volume`);
  const bound = volumeNode(volume);
  const node = bound ? nodes.find((n) => n.nodeName === bound) : nodes.length === 1 ? nodes[0] : undefined;
  if (!node)
    throw new Error(
      `PV ${volume.metadata?.name} of ${namespace}/${name} is on node "${bound ?? "(no node affinity)"}", not one of ${nodes.map((n) => n.nodeName).join(", ")}`,
    );
  return `/proc/${node.holderPid}/root${path}`;
}

/** The one node a PV's required node affinity names on kubernetes.io/hostname, if it names one. */
export function volumeNode(volume: V1PersistentVolume): string | undefined {
  for (const term of volume.spec?.nodeAffinity?.required?.nodeSelectorTerms ?? []) {
    const hostname = term.matchExpressions?.find((e) => e.key === "kubernetes.io/hostname" && e.operator === "In" && e.values?.length === 1);
    if (hostname) return hostname.values![0];
  }
  return undefined;
}
