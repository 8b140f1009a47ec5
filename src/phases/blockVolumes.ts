/**
 * Which volumes are Block volumes: a source PVC with volumeMode Block. Started refuses a change of
 * volume mode, so its destination is Block too, and both sides move the device's content.
 */
import { type PvcObject, refOf } from "../kube/objects";
import type { ServedPvc } from "../transfer";
import type { PhaseContext } from "./types";
import type { VolumePair } from "./volumes";

export async function isBlockVolume(ctx: PhaseContext, pair: VolumePair): Promise<boolean> {
  const source = await ctx.clusters.source.get<PvcObject>(refOf("PersistentVolumeClaim", pair.from.namespace, pair.from.name));
  return source?.spec?.volumeMode === "Block";
}

/** The destination PVCs in `namespace`, as its rsync server serves them: each with its Block flag. */
export async function servedPvcs(ctx: PhaseContext, namespace: string): Promise<ServedPvc[]> {
  const served: ServedPvc[] = [];
  for (const pair of ctx.volumes.filter((v) => v.to.namespace === namespace))
    served.push({ ...pair.to, ...((await isBlockVolume(ctx, pair)) ? { block: true } : {}) });
  return served;
}
