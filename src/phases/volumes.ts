/** The volumes a DVM moves, as (from, to) pairs in transfer direction. */
import { createHash } from "node:crypto";
import type { ItineraryName } from "../dvm/itinerary";
import { resolvedPvcs } from "../dvm/selection";
import type { DvmSpec, DvmStatus } from "../dvm/types";

export interface PvcName {
  namespace: string;
  name: string;
}

export interface VolumePair {
  /** Index in spec.persistentVolumeClaims (or in status.selectedPersistentVolumeClaims), so errors can name the field. */
  index: number;
  /** Selected by spec.persistentVolumeClaimSelector (its original "namespace/name"), not listed. */
  selected?: string;
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

/**
 * The spec field a problem of this volume is about: its entry in the list, or for a selected PVC the
 * selector's field (a selected PVC has no fields of its own; its name and namespace come from the
 * selector's match), with the PVC named.
 */
export function specField(pair: Pick<VolumePair, "index" | "selected">, field?: string): string {
  if (pair.selected === undefined) return `spec.persistentVolumeClaims[${pair.index}]${field ? `.${field}` : ""}`;
  const own = field !== undefined && field !== "name" && field !== "targetName" ? `.${field}` : "";
  return `spec.persistentVolumeClaimSelector${own} (selected ${pair.selected})`;
}

/**
 * The volumes as (from, to) pairs: the listed PVCs, or the selection recorded in the status (none
 * before the first phase made it; src/dvm/selection.ts).
 */
export function volumePairs(
  spec: Pick<DvmSpec, "persistentVolumeClaims" | "persistentVolumeClaimSelector">,
  status: Pick<DvmStatus, "selectedPersistentVolumeClaims">,
  itinerary: ItineraryName,
): VolumePair[] {
  const resolved = resolvedPvcs(spec, status);
  return resolved.pvcs.map((pvc, index) => {
    const original = { namespace: pvc.namespace, name: pvc.name };
    const target = { namespace: pvc.targetNamespace ?? pvc.namespace, name: pvc.targetName ?? pvc.name };
    const rollback = itinerary === "VolumeMigrationRollback";
    return {
      index,
      ...(resolved.source === "selector" ? { selected: `${original.namespace}/${original.name}` } : {}),
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
