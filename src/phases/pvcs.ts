/**
 * CreateDestinationPVCs: each destination PVC from its source, with the target storage class, access modes
 * and volume mode. An existing PVC is left alone (create-or-adopt), as upstream.
 */
import { KINDS, type PvcObject, refOf } from "../kube/objects";
import { LABEL, PART_OF } from "./names";
import { advance, MigrationInputError, type PhaseBody } from "./types";
import { formatPvc, specField, type VolumePair } from "./volumes";

/** Upstream's sizing rule: the larger of the request and the bound capacity. */
export function requestedSize(source: PvcObject): string | undefined {
  const request = source.spec?.resources?.requests?.storage;
  const capacity = source.status?.capacity?.storage;
  if (!request || !capacity) return request ?? capacity;
  return quantityBytes(capacity) > quantityBytes(request) ? capacity : request;
}

const SUFFIX: Record<string, number> = { "": 1, k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50 };

export function quantityBytes(quantity: string): number {
  const match = /^([0-9.]+)([a-zA-Z]*)$/.exec(quantity.trim());
  const factor = match ? SUFFIX[match[2]!] : undefined;
  return match && factor !== undefined ? Number(match[1]) * factor : NaN;
}

export function destinationPvc(pair: VolumePair, source: PvcObject, dvmUid: string): PvcObject {
  const size = requestedSize(source);
  return {
    ...KINDS.PersistentVolumeClaim,
    metadata: {
      name: pair.to.name,
      namespace: pair.to.namespace,
      // Not the transfer label: cleanup must never select migrated data.
      labels: { ...(source.metadata.labels ?? {}), [LABEL.partOf]: PART_OF, [LABEL.dvmUid]: dvmUid },
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
  for (const pair of ctx.volumes) {
    const original = await source.get<PvcObject>(refOf("PersistentVolumeClaim", pair.from.namespace, pair.from.name));
    if (!original)
      throw new MigrationInputError([`${specField(pair, "name")}: PersistentVolumeClaim ${formatPvc(pair.from)} not found on the ${source.name} cluster`]);
    const { created } = await destination.ensure(destinationPvc(pair, original, ctx.dvm.uid));
    ctx.log.info(created ? "destination PVC created" : "destination PVC exists", { pvc: formatPvc(pair.to) });
  }
  return advance();
};
