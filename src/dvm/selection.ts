/**
 * The PVCs a DVM moves: the listed ones (spec.persistentVolumeClaims), or those a selector
 * (spec.persistentVolumeClaimSelector) selected. A selector is expanded once, by the first phase, and the
 * result recorded in status.selectedPersistentVolumeClaims (and in the ledger's completion of that
 * phase); every later phase reads the recorded set, never the cluster, so a PVC created or relabelled
 * afterwards never joins or leaves a running migration.
 */
import type { PvcRef } from "../contracts/pvcRef";
import { definedFields } from "../lib/definedFields";
import { MAX_PVCS_PER_DVM } from "./limits";
import type { DvmSpec, DvmStatus, LabelSelector, PvcSelector, PvcToMigrate } from "./types";

/** Whether `labels` match `selector`, with metav1.LabelSelector's meaning (every requirement holds). */
export function matchesLabelSelector(labels: Readonly<Record<string, string>>, selector: LabelSelector | undefined): boolean {
  for (const [key, value] of Object.entries(selector?.matchLabels ?? {})) if (labels[key] !== value) return false;
  for (const { key, operator, values = [] } of selector?.matchExpressions ?? []) {
    const has = Object.hasOwn(labels, key);
    const holds =
      operator === "Exists"
        ? has
        : operator === "DoesNotExist"
          ? !has
          : operator === "In"
            ? has && values.includes(labels[key]!)
            : !has || !values.includes(labels[key]!);
    if (!holds) return false;
  }
  return true;
}

/** A PVC as a selector sees it: its name and labels. */
export interface LabelledPvc {
  name: string;
  labels?: Record<string, string>;
}

export type Selection = { ok: true; selected: PvcRef[] } | { ok: false; error: string };

/**
 * The PVCs of the selector's namespace that match, sorted by name (a stable order: the status and the
 * ledger record the same list whatever order the API server returned). None, or more than a DVM may
 * move, is an error naming the field.
 */
export function selectPvcs(selector: PvcSelector, pvcs: readonly LabelledPvc[]): Selection {
  const names = pvcs
    .filter((pvc) => matchesLabelSelector(pvc.labels ?? {}, selector.labelSelector))
    .map((pvc) => pvc.name)
    .sort();
  if (names.length === 0)
    return { ok: false, error: `spec.persistentVolumeClaimSelector: no PersistentVolumeClaim in namespace "${selector.namespace}" matches the selector` };
  if (names.length > MAX_PVCS_PER_DVM)
    return {
      ok: false,
      error: `spec.persistentVolumeClaimSelector: matches ${names.length} PersistentVolumeClaims in namespace "${selector.namespace}", more than the ${MAX_PVCS_PER_DVM} one DVM may move; narrow the selector or split the migration`,
    };
  return { ok: true, selected: names.map((name) => ({ namespace: selector.namespace, name })) };
}

/** A selected PVC as a listed one: the selector's target fields, the source's name kept. */
function asListed(selector: PvcSelector, ref: PvcRef): PvcToMigrate {
  return definedFields({
    name: ref.name,
    namespace: ref.namespace,
    targetNamespace: selector.targetNamespace,
    targetStorageClass: selector.targetStorageClass,
    targetAccessModes: selector.targetAccessModes,
    targetVolumeMode: selector.targetVolumeMode,
    verify: selector.verify,
  });
}

/** The volumes of a DVM and where they came from, so that errors name the right field. */
export interface ResolvedPvcs {
  source: "list" | "selector";
  pvcs: PvcToMigrate[];
}

/**
 * The PVCs this DVM moves: the list, or the recorded selection (empty before the first phase recorded
 * one). The status's selection is read, not the cluster: see the module comment.
 */
export function resolvedPvcs(
  spec: Pick<DvmSpec, "persistentVolumeClaims" | "persistentVolumeClaimSelector">,
  status: Pick<DvmStatus, "selectedPersistentVolumeClaims">,
): ResolvedPvcs {
  const selector = spec.persistentVolumeClaimSelector;
  if (!selector) return { source: "list", pvcs: spec.persistentVolumeClaims ?? [] };
  return { source: "selector", pvcs: (status.selectedPersistentVolumeClaims ?? []).map((ref) => asListed(selector, ref)) };
}
