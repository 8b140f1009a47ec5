/**
 * Right-sized destination PVCs (spec.rightSizeTargets): each destination PVC requests what its source
 * really holds plus a headroom, instead of the source's capacity. The usage is measured by a short pod on
 * the source that mounts the PVC read-only and sums the apparent size of its files (`du --apparent-size`:
 * rsync without --sparse writes holes out in full), reporting the figure as its termination message.
 * The decision (used bytes, headroom, the size requested) is recorded in status.targetSizes.
 */
import { LABEL } from "../contracts/labels";
import type { TargetSize } from "../dvm/types";
import { KINDS, type PodObject, refOf } from "../kube/objects";
import { usagePod } from "../transfer";
import { dvmShortId, transferLabels } from "./names";
import { transferPodSettings } from "./podSettings";
import { sourcePodAffinity } from "./sourcePlacement";
import type { PhaseContext } from "./types";
import type { VolumePair } from "./volumes";

export const USAGE_ROLE = "usage";
const MiB = 2 ** 20;

export function usagePodName(ctx: Pick<PhaseContext, "dvm">, pair: Pick<VolumePair, "id">): string {
  return `dvm-${dvmShortId(ctx.dvm)}-usage-${pair.id}`;
}

export async function usagePodFor(ctx: PhaseContext, pair: VolumePair) {
  const affinity = await sourcePodAffinity(ctx, pair.from);
  return usagePod({
    name: usagePodName(ctx, pair),
    namespace: pair.from.namespace,
    labels: { ...transferLabels(ctx.dvm, USAGE_ROLE), [LABEL.volume]: pair.id },
    ...transferPodSettings(ctx),
    sourcePvc: pair.from,
    ...(affinity ? { affinity } : {}),
  });
}

/** Used bytes plus the headroom, rounded up to whole MiB (at least 1 MiB). */
export function rightSizedRequest(usedBytes: number, headroomPercent: number): string {
  return `${Math.max(1, Math.ceil((usedBytes * (1 + headroomPercent / 100)) / MiB))}Mi`;
}

export type Usage = { usedBytes: number } | { pending: string } | { failed: string };

/** The source PVC's usage: from its finished measuring pod, after creating that pod if need be. */
export async function measureUsage(ctx: PhaseContext, pair: VolumePair): Promise<Usage> {
  const { source } = ctx.clusters;
  const pod = await source.get<PodObject>(refOf("Pod", pair.from.namespace, usagePodName(ctx, pair)));
  if (!pod) {
    await source.ensure(await usagePodFor(ctx, pair));
    return { pending: "measuring pod created" };
  }
  const terminated = pod.status?.containerStatuses?.find((c) => c.name === "usage")?.state?.terminated;
  if (pod.status?.phase === "Succeeded") {
    const used = Number((terminated?.message ?? "").trim());
    return Number.isInteger(used) && used >= 0
      ? { usedBytes: used }
      : { failed: `the measuring pod reported "${terminated?.message ?? ""}", not a byte count` };
  }
  if (pod.status?.phase === "Failed") return { failed: `the measuring pod failed (exit code ${terminated?.exitCode ?? "unknown"})` };
  return { pending: `measuring pod ${pod.status?.phase ?? "Pending"}` };
}

export function targetSizeRecord(pair: VolumePair, usedBytes: number, headroomPercent: number, sourceSize: string | undefined): TargetSize {
  return {
    pvcReference: pair.to,
    usedBytes,
    headroomPercent,
    requested: rightSizedRequest(usedBytes, headroomPercent),
    ...(sourceSize ? { sourceSize } : {}),
  };
}

export async function deleteUsagePod(ctx: PhaseContext, pair: VolumePair): Promise<void> {
  await ctx.clusters.source.delete({ ...KINDS.Pod, namespace: pair.from.namespace, name: usagePodName(ctx, pair) });
}
