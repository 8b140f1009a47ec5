/**
 * Which rsync server pod serves which destination PVC. One pod per destination namespace mounted every
 * PVC of it, and a node attaches only so many volumes (25 to 39 on common block storage): a large DVM's
 * server pod stayed Pending for good. So a namespace's PVCs are split, in spec order, into groups of at
 * most the operator's DVM_TRANSFER_MAX_VOLUMES_PER_SERVER_POD, each with its own server pod, Service (or
 * Route) and server Secret. The spec cannot change, so a pair's group never does.
 */
import { serverGroupNames } from "./names";
import type { PhaseContext } from "./types";
import { uniqueNamespaces, type VolumePair } from "./volumes";

export interface ServerGroup {
  /** The destination namespace. */
  namespace: string;
  /** 0, 1, ... within the namespace. */
  index: number;
  /** The volume pairs this group's server pod mounts, in spec order. */
  pairs: VolumePair[];
  names: ReturnType<typeof serverGroupNames>;
}

export function serverGroups(ctx: Pick<PhaseContext, "dvm" | "volumes" | "transfer">): ServerGroup[] {
  const size = Math.max(1, ctx.transfer.maxVolumesPerServerPod);
  return uniqueNamespaces(ctx.volumes.map((v) => v.to)).flatMap((namespace) => {
    const pairs = ctx.volumes.filter((v) => v.to.namespace === namespace);
    return Array.from({ length: Math.ceil(pairs.length / size) }, (_, index) => ({
      namespace,
      index,
      pairs: pairs.slice(index * size, (index + 1) * size),
      names: serverGroupNames(ctx.dvm, index),
    }));
  });
}

/** The group whose server pod mounts `pair`'s destination PVC. */
export function serverGroupOf(ctx: Pick<PhaseContext, "dvm" | "volumes" | "transfer">, pair: Pick<VolumePair, "index">): ServerGroup {
  const group = serverGroups(ctx).find((g) => g.pairs.some((p) => p.index === pair.index));
  if (!group) throw new Error(`spec.persistentVolumeClaims[${pair.index}] has no rsync server pod`);
  return group;
}

/** "namespace/pod" of a group's server pod, for messages. */
export const describeGroup = (group: ServerGroup): string => `${group.namespace}/${group.names.serverPod}`;
