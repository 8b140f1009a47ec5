/**
 * A DVM at a glance: where it is in its itinerary (step numbers from the itinerary table), how it is
 * doing, and what became of each volume. Pure: computed from the object the API server returned.
 */
import type { PvcRef } from "../contracts/pvcRef";
import { findCondition } from "../dvm/conditions";
import { type ItineraryName, isItineraryName, isPhaseName, PHASES, type PhaseName, stepOf } from "../dvm/itinerary";
import type { Condition, DirectVolumeMigration, DvmStatus, PodProgress } from "../dvm/types";
import { definedFields } from "../lib/definedFields";

export type MigrationResult = "Pending" | "Running" | "Failing" | "Succeeded" | "Failed";

export interface VolumeSummary {
  /** namespace/name of the source PVC, as in the spec. */
  pvc: string;
  target: string;
  attempt?: number;
  /** succeeded, failed, running, pending, unknown; "waiting" before the transfer starts. */
  state: string;
  progress?: string;
  rate?: string;
  pod?: string;
}

export interface DvmSummary {
  name: string;
  namespace: string;
  uid: string;
  generation: number;
  createdAt?: string;
  startedAt?: string;
  age: string;
  itinerary?: ItineraryName;
  phase?: PhaseName;
  step?: number;
  totalSteps?: number;
  /** "Step n/total" or "" before the first status write. */
  stepLabel: string;
  description?: string;
  result: MigrationResult;
  /** Conditions that hold (status True), worst first. */
  conditions: Condition[];
  conditionsSummary: string;
  volumes: VolumeSummary[];
  errors: string[];
}

/** kubectl's style: 45s, 12m, 3h4m, 5d. */
export function formatAge(fromIso: string | undefined, now: number): string {
  if (!fromIso) return "";
  const ms = now - Date.parse(fromIso);
  if (!Number.isFinite(ms)) return "";
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 120) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m`;
  const h = Math.floor(m / 60);
  if (h < 24) return m % 60 ? `${h}h${m % 60}m` : `${h}h`;
  const d = Math.floor(h / 24);
  return h % 24 && d < 7 ? `${d}d${h % 24}h` : `${d}d`;
}

const SEVERITY: Record<string, number> = { Critical: 0, Error: 1, Warn: 2, Required: 3, Advisory: 4 };

export function resultOf(dvm: Pick<DirectVolumeMigration, "status">): MigrationResult {
  const { status } = dvm;
  const failed = findCondition(status.conditions, "Failed")?.status === "True";
  if (status.phase === "Completed") return failed ? "Failed" : "Succeeded";
  if (!status.phase) return "Pending";
  return failed || status.itinerary === "VolumeMigrationFailed" ? "Failing" : "Running";
}

export function summarizeConditions(conditions: readonly Condition[]): string {
  return conditions.map((c) => (c.category === "Critical" || c.category === "Error" || c.category === "Warn" ? `${c.type}(${c.category})` : c.type)).join(",");
}

const refKey = (ref: PvcRef) => `${ref.namespace}/${ref.name}`;

interface SpecPvc {
  name?: unknown;
  namespace?: unknown;
  targetName?: unknown;
  targetNamespace?: unknown;
}

/** The listed PVCs, or those a selector selected (as the first phase recorded them; none before). */
function specPvcs(spec: unknown, status: DvmStatus): { source: PvcRef; target: PvcRef }[] {
  const selector = (spec as { persistentVolumeClaimSelector?: { targetNamespace?: unknown } } | undefined)?.persistentVolumeClaimSelector;
  const list = selector
    ? (status.selectedPersistentVolumeClaims ?? []).map((ref) => ({ ...ref, targetNamespace: selector.targetNamespace }))
    : (spec as { persistentVolumeClaims?: unknown } | undefined)?.persistentVolumeClaims;
  if (!Array.isArray(list)) return [];
  return list.flatMap((raw: SpecPvc) => {
    if (typeof raw?.name !== "string" || typeof raw.namespace !== "string") return [];
    const target = {
      namespace: typeof raw.targetNamespace === "string" && raw.targetNamespace ? raw.targetNamespace : raw.namespace,
      name: typeof raw.targetName === "string" && raw.targetName ? raw.targetName : raw.name,
    };
    return [{ source: { namespace: raw.namespace, name: raw.name }, target }];
  });
}

function volumesOf(dvm: DirectVolumeMigration): VolumeSummary[] {
  const { status } = dvm;
  const pods: [string, PodProgress[] | undefined][] = [
    ["succeeded", status.successfulPods],
    ["failed", status.failedPods],
    ["running", status.runningPods],
    ["pending", status.pendingPods],
    ["unknown", status.unknownPods],
  ];
  const podFor = (ref: PvcRef) => {
    for (const [state, list] of pods) {
      const pod = list?.find((p) => refKey(p.pvcRef) === refKey(ref));
      if (pod) return { state, pod };
    }
    return undefined;
  };
  return specPvcs(dvm.spec, status).map(({ source, target }) => {
    // A rollback transfers from the spec's target back to its source: its records name the target.
    const operation = status.rsyncOperations?.find((op) => [refKey(source), refKey(target)].includes(refKey(op.pvcReference)));
    const found = podFor(source) ?? podFor(target);
    const state = operation?.succeeded ? "succeeded" : operation?.failed ? "failed" : (found?.state ?? (operation ? "pending" : "waiting"));
    return definedFields({
      pvc: refKey(source),
      target: refKey(target),
      attempt: operation?.currentAttempt,
      state,
      // An empty text is as good as none.
      progress: found?.pod.lastObservedProgressPercent || undefined,
      rate: found?.pod.lastObservedTransferRate || undefined,
      pod: found && `${found.pod.namespace}/${found.pod.name}`,
    });
  });
}

export function summarizeDvm(dvm: DirectVolumeMigration, now: number): DvmSummary {
  const { status, metadata } = dvm;
  const itinerary = isItineraryName(status.itinerary) ? status.itinerary : undefined;
  const phase = isPhaseName(status.phase) ? status.phase : undefined;
  const position = itinerary && phase ? stepOf(itinerary, phase) : undefined;
  const conditions = (status.conditions ?? []).filter((c) => c.status === "True").sort((a, b) => (SEVERITY[a.category] ?? 9) - (SEVERITY[b.category] ?? 9));
  return {
    name: metadata.name,
    namespace: metadata.namespace,
    uid: metadata.uid,
    generation: metadata.generation,
    ...definedFields({ createdAt: metadata.creationTimestamp || undefined, startedAt: status.startTimestamp || undefined }),
    age: formatAge(metadata.creationTimestamp, now),
    ...definedFields({ itinerary, phase, step: position?.step, totalSteps: position?.total }),
    stepLabel: position ? `Step ${position.step}/${position.total}` : status.step ? `Step ${status.step}` : "",
    ...(phase ? { description: status.phaseDescription ?? PHASES[phase].description } : {}),
    result: resultOf(dvm),
    conditions,
    conditionsSummary: summarizeConditions(conditions),
    volumes: volumesOf(dvm),
    errors: status.errors ?? [],
  };
}

/** "3/3 succeeded", "1/3 succeeded, 1 failed". */
export function volumesSummary(volumes: readonly VolumeSummary[]): string {
  if (volumes.length === 0) return "";
  const count = (state: string) => volumes.filter((v) => v.state === state).length;
  const parts = [`${count("succeeded")}/${volumes.length} succeeded`];
  for (const state of ["failed", "running", "pending"]) if (count(state) > 0) parts.push(`${count(state)} ${state}`);
  return parts.join(", ");
}
