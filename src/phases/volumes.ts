/** The volumes a DVM moves, as (from, to) pairs in transfer direction. */
import { createHash } from "node:crypto";
import type { ItineraryName } from "../dvm/itinerary";
import type { DvmSpec } from "../dvm/types";

export interface PvcName {
  namespace: string;
  name: string;
}

export interface VolumePair {
  /** Index in spec.persistentVolumeClaims, so errors can name the field. */
  index: number;
  /** Short stable id of the pair, used in object names and labels. */
  id: string;
  from: PvcName;
  to: PvcName;
  targetStorageClass: string;
  targetAccessModes: string[];
  targetVolumeMode?: "Filesystem" | "Block";
  /** The PVC's own `verify`; unset: spec.transfer.verify, else the operator's default (ctx.transfer.verify). */
  verify?: boolean;
}

export function shortHash(text: string, length = 10): string {
  return createHash("sha256").update(text).digest("hex").slice(0, length);
}

export function specField(pair: Pick<VolumePair, "index">, field?: string): string {
  return `spec.persistentVolumeClaims[${pair.index}]${field ? `.${field}` : ""}`;
}

export function volumePairs(spec: DvmSpec, itinerary: ItineraryName): VolumePair[] {
  return spec.persistentVolumeClaims.map((pvc, index) => {
    const original = { namespace: pvc.namespace, name: pvc.name };
    const target = { namespace: pvc.targetNamespace ?? pvc.namespace, name: pvc.targetName ?? pvc.name };
    const rollback = itinerary === "VolumeMigrationRollback";
    return {
      index,
      id: shortHash(`${original.namespace}/${original.name}`),
      from: rollback ? target : original,
      to: rollback ? original : target,
      targetStorageClass: pvc.targetStorageClass,
      targetAccessModes: pvc.targetAccessModes,
      ...(pvc.targetVolumeMode ? { targetVolumeMode: pvc.targetVolumeMode } : {}),
      ...(pvc.verify !== undefined ? { verify: pvc.verify } : {}),
    };
  });
}

export function uniqueNamespaces(names: readonly PvcName[]): string[] {
  return [...new Set(names.map((n) => n.namespace))].sort();
}

export const formatPvc = (pvc: PvcName): string => `${pvc.namespace}/${pvc.name}`;
