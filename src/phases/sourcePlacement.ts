/**
 * Where a pod that mounts a source PVC (the rsync client, the usage pod) may run. A volume in use by a
 * running pod can only be mounted on that pod's node when it attaches to one node at a time (ReadWriteOnce
 * block storage: elsewhere the attach-detach controller reports a Multi-Attach error and the pod never
 * starts), so the pod is pinned there, as upstream mig-controller does (mig-controller #834) and VolSync's
 * Direct mode. A volume that is not in use needs nothing: for a bound PVC the scheduler's VolumeBinding
 * filter already admits only the nodes its PV's spec.nodeAffinity allows (node-local storage such as
 * local-path), so copying that affinity would only need a cluster-wide read of PersistentVolumes.
 */
import type { V1Affinity } from "@kubernetes/client-node";
import { KINDS, type PodObject, type PvcObject, refOf } from "../kube/objects";
import type { PhaseContext } from "./types";
import type { PvcName } from "./volumes";

/** Access modes that let pods on several nodes mount the volume at once: no pinning needed. */
const MULTI_NODE_ACCESS_MODES = new Set(["ReadWriteMany", "ReadOnlyMany"]);

interface PodVolume {
  persistentVolumeClaim?: { claimName?: string };
}

/**
 * The node of a pod that holds `claim` mounted now: scheduled (spec.nodeName), not finished. Pending pods
 * with a node count too (the kubelet is mounting the volume there). Ties go to the first name in sort
 * order, so two polls decide the same node.
 */
export function nodeHoldingClaim(pods: readonly PodObject[], claim: string): string | undefined {
  const holders = pods
    .filter((pod) => pod.spec?.nodeName && !podFinished(pod))
    .filter((pod) => podMountsClaim(pod, claim))
    .sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
  return holders[0]?.spec?.nodeName;
}

/** The pod's spec lists `claim` among its volumes. */
export function podMountsClaim(pod: PodObject, claim: string): boolean {
  return ((pod.spec?.volumes as PodVolume[] | undefined) ?? []).some((v) => v.persistentVolumeClaim?.claimName === claim);
}

/** Succeeded or Failed: its containers are gone, and with them its mounts. */
export function podFinished(pod: PodObject): boolean {
  return pod.status?.phase === "Succeeded" || pod.status?.phase === "Failed";
}

/**
 * Required node affinity on exactly `nodeName` (matchFields on metadata.name, as DaemonSets do): unlike
 * spec.nodeName it still goes through the scheduler, so the node's free resources and taints are checked
 * and a pod that does not fit waits Pending instead of failing at the kubelet.
 */
export function pinnedToNode(nodeName: string): V1Affinity {
  return {
    nodeAffinity: {
      requiredDuringSchedulingIgnoredDuringExecution: {
        nodeSelectorTerms: [{ matchFields: [{ key: "metadata.name", operator: "In", values: [nodeName] }] }],
      },
    },
  };
}

/**
 * The affinity of a pod that mounts the source PVC `pvc`: pinned to the node of a pod that mounts it now,
 * unless the volume may be mounted on several nodes; otherwise none (the scheduler follows the PV).
 * Reads the PVC and lists the pods of its namespace (the transfer role's `list pods`).
 */
export async function sourcePodAffinity(ctx: Pick<PhaseContext, "clusters">, pvc: PvcName): Promise<V1Affinity | undefined> {
  const { source } = ctx.clusters;
  const claim = await source.get<PvcObject>(refOf("PersistentVolumeClaim", pvc.namespace, pvc.name));
  const modes = claim?.status?.accessModes ?? claim?.spec?.accessModes ?? [];
  if (modes.some((mode) => MULTI_NODE_ACCESS_MODES.has(mode))) return undefined;
  const node = nodeHoldingClaim(await source.list<PodObject>(KINDS.Pod, pvc.namespace, {}), pvc.name);
  return node ? pinnedToNode(node) : undefined;
}
