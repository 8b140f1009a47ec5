/**
 * Which volumes are Block volumes: a source PVC with volumeMode Block. Started refuses a change of
 * volume mode, so its destination is Block too, and both sides move the device's content.
 */
import { type PvcObject, refOf } from "../kube/objects";
import type { ServedPvc } from "../transfer";
import type { ServerGroup } from "./serverGroups";
import type { PhaseContext } from "./types";
import type { VolumePair } from "./volumes";

export async function isBlockVolume(ctx: PhaseContext, pair: VolumePair): Promise<boolean> {
  const source = await ctx.clusters.source.get<PvcObject>(refOf("PersistentVolumeClaim", pair.from.namespace, pair.from.name));
  return source?.spec?.volumeMode === "Block";
}

/** The destination PVCs of one rsync server pod, as it serves them: each with its Block flag. */
export async function servedPvcs(ctx: PhaseContext, group: ServerGroup): Promise<ServedPvc[]> {
  const served: ServedPvc[] = [];
  for (const pair of group.pairs) served.push({ ...pair.to, ...((await isBlockVolume(ctx, pair)) ? { block: true } : {}) });
  return served;
}
