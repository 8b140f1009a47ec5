/**
 * CreateDestinationPVCs: each destination PVC from its source, with the target storage class, access modes
 * and volume mode. An existing PVC is left alone (create-or-adopt), as upstream.
 */
import { MigrationInputError } from "../contracts/inputError";
import { LABEL, PART_OF } from "../contracts/labels";
import { quantityValue } from "../dvm/quantity";
import type { TargetSize } from "../dvm/types";
import { KINDS, type PvcObject, refOf } from "../kube/objects";
import { IN_USE_BY, inUseValue, markPvcsInUse } from "./pvcUse";
import { deleteUsagePod, measureUsage, targetSizeRecord } from "./targetSizing";
import { advance, type DvmIdentity, type PhaseBody, type PhaseContext, type PhaseOutcome, wait } from "./types";
import { formatPvc, specField, type VolumePair } from "./volumes";

/** Upstream's sizing rule: the larger of the request and the bound capacity. */
export function requestedSize(source: PvcObject): string | undefined {
  const request = source.spec?.resources?.requests?.storage;
  const capacity = source.status?.capacity?.storage;
  if (!request || !capacity) return request ?? capacity;
  return (quantityValue(capacity) ?? Number.NaN) > (quantityValue(request) ?? Number.NaN) ? capacity : request;
}

export function destinationPvc(pair: VolumePair, source: PvcObject, dvm: DvmIdentity, rightSized?: string): PvcObject {
  const size = rightSized ?? requestedSize(source);
  return {
    ...KINDS.PersistentVolumeClaim,
    metadata: {
      name: pair.to.name,
      namespace: pair.to.namespace,
      // Not the transfer label: cleanup must never select migrated data.
      labels: { ...(source.metadata.labels ?? {}), [LABEL.partOf]: PART_OF, [LABEL.dvmUid]: dvm.uid },
      // Created in use by this DVM: no other can write into it until this one gives it back (pvcUse.ts).
      annotations: { [IN_USE_BY]: inUseValue(dvm) },
    },
    spec: {
      storageClassName: pair.targetStorageClass,
      accessModes: pair.targetAccessModes,
      volumeMode: pair.targetVolumeMode ?? source.spec?.volumeMode ?? "Filesystem",
      ...(size ? { resources: { requests: { storage: size } } } : {}),
    },
  };
}

export const createDestinationPVCs: PhaseBody = async (ctx) => {
  const { source, destination } = ctx.clusters;
  const originals = new Map<VolumePair, PvcObject>();
  for (const pair of ctx.volumes) {
    const original = await source.get<PvcObject>(refOf("PersistentVolumeClaim", pair.from.namespace, pair.from.name));
    if (!original)
      throw new MigrationInputError([`${specField(pair, "name")}: PersistentVolumeClaim ${formatPvc(pair.from)} not found on the ${source.name} cluster`]);
    originals.set(pair, original);
  }
  // One migration at a time per volume: the sources and the destinations that exist, before any is touched.
  const inUse = await markPvcsInUse(ctx, ["source", "destination"]);
  if (inUse.length > 0) return { kind: "fail", category: "Critical", errors: inUse };
  const sized = ctx.spec.rightSizeTargets ? await rightSized(ctx, originals) : { sizes: [] };
  if ("outcome" in sized) return sized.outcome;
  for (const pair of ctx.volumes) {
    const size = sized.sizes.find((s) => s.pvcReference.namespace === pair.to.namespace && s.pvcReference.name === pair.to.name)?.requested;
    const wanted = destinationPvc(pair, originals.get(pair)!, ctx.dvm, size);
    const { created, object } = await destination.ensure(wanted);
    ctx.log.info(created ? "destination PVC created" : "destination PVC exists", { pvc: formatPvc(pair.to), ...(size ? { size } : {}) });
    if (!created) {
      const mismatch = volumeModeMismatch(pair, wanted, object);
      if (mismatch) return { kind: "fail", category: "Critical", errors: [mismatch] };
    }
    if (ctx.spec.rightSizeTargets) await deleteUsagePod(ctx, pair);
  }
  // A destination another DVM created in the meantime was adopted: its mark decides.
  const raced = await markPvcsInUse(ctx, ["destination"]);
  if (raced.length > 0) return { kind: "fail", category: "Critical", errors: raced };
  return sized.sizes.length > 0 ? advance({ targetSizes: sized.sizes }) : advance();
};

/**
 * An existing destination PVC (an earlier Stage's, or one made by hand) is adopted only with the volume mode
 * this migration writes: rsync into a Filesystem volume from a device, or a device copy into a mounted
 * file system, would fail late or write the wrong thing.
 */
export function volumeModeMismatch(pair: VolumePair, wanted: PvcObject, existing: PvcObject): string | undefined {
  const want = wanted.spec?.volumeMode ?? "Filesystem";
  const has = existing.spec?.volumeMode ?? "Filesystem";
  if (want === has) return undefined;
  const field = pair.targetVolumeMode ? specField(pair, "targetVolumeMode") : specField(pair);
  return `${field}: the destination PersistentVolumeClaim ${formatPvc(pair.to)} already exists with volumeMode ${has}, but this migration writes ${want}; delete it or set a targetName for a new one`;
}

/**
 * The sizes of the destination PVCs that do not exist yet, from their sources' measured usage; or the
 * outcome to return while a measurement runs (wait) or after one failed (fail). An existing destination
 * PVC is adopted as it is, without measuring; a Block volume keeps the source's size.
 */
async function rightSized(ctx: PhaseContext, originals: Map<VolumePair, PvcObject>): Promise<{ sizes: TargetSize[] } | { outcome: PhaseOutcome }> {
  const headroom = ctx.spec.rightSizeTargets!.headroomPercent;
  const sizes: TargetSize[] = [];
  const pending: string[] = [];
  const failed: string[] = [];
  for (const [pair, original] of originals) {
    if (await ctx.clusters.destination.get(refOf("PersistentVolumeClaim", pair.to.namespace, pair.to.name))) continue;
    // A device is copied whole: its destination needs the source's full size, whatever is in use.
    if (original.spec?.volumeMode === "Block") continue;
    const usage = await measureUsage(ctx, pair);
    if ("usedBytes" in usage) sizes.push(targetSizeRecord(pair, usage.usedBytes, headroom, requestedSize(original)));
    else if ("pending" in usage) pending.push(`${formatPvc(pair.from)}: ${usage.pending}`);
    else failed.push(`${specField(pair)}: cannot measure the usage of ${formatPvc(pair.from)} for spec.rightSizeTargets: ${usage.failed}`);
  }
  if (failed.length > 0) return { outcome: { kind: "fail", category: "Critical", errors: failed } };
  if (pending.length > 0) return { outcome: wait(`measuring source usage: ${pending.join(", ")}`, { afterMs: 1_000 }) };
  return { sizes };
}
