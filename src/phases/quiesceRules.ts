/**
 * What spec.quiesce scales down, what it records, and what a restore writes: pure decisions on objects
 * as read, so a repeated body decides the same thing (src/phases/quiesce.ts does the reads and writes).
 *
 * The record lives ON THE OBJECT, as MTC keeps it (migration.openshift.io/preQuiesceReplicas): the
 * write that scales a workload to 0 also writes the annotation with the count it had, in one write
 * guarded by the resourceVersion it was read at. The rules that make it exactly once:
 *   - record once: an object that already carries the annotation keeps it; a body that runs again after
 *     the scale-down (a crash, a duplicate delivery) reads replicas 0 and must never record that 0. A
 *     stale read (replicas 2, no annotation, an old resourceVersion) is refused by the guard and re-read;
 *   - restore once: the write that sets the count back removes the annotation, guarded the same way, so
 *     a second restore finds nothing to restore.
 */
import type { DvmSpec, QuiescedApplication } from "../dvm/types";
import type { KubeObject } from "../kube/objects";

/** The count a Deployment, StatefulSet or ReplicaSet had before the first scale-down (MTC's name). */
export const PRE_QUIESCE_REPLICAS = "migration.openshift.io/preQuiesceReplicas";
/** A CronJob's spec.suspend before the first suspension ("true" or "false"). */
export const PRE_QUIESCE_SUSPEND = "migration.openshift.io/preQuiesceSuspend";
/** Which DVM quiesced the object: "namespace/name/uid" (a failure or cancel restores only its own). */
export const QUIESCED_BY = "dvm.migration.openshift.io/quiesced-by";

export type WorkloadKind = QuiescedApplication["kind"];
export const WORKLOAD_KINDS: readonly WorkloadKind[] = ["Deployment", "StatefulSet", "ReplicaSet", "CronJob"];

interface PodTemplate {
  spec?: { volumes?: { persistentVolumeClaim?: { claimName?: string } }[] };
}

export interface Workload extends KubeObject {
  spec?: {
    replicas?: number;
    suspend?: boolean;
    template?: PodTemplate;
    volumeClaimTemplates?: { metadata?: { name?: string } }[];
    jobTemplate?: { spec?: { template?: PodTemplate } };
  };
}

/** spec.quiesce as it applies: a CutOver quiesces and a Rollback restores unless it is false. */
export function quiesceEnabled(spec: Pick<DvmSpec, "quiesce" | "migrationType">): boolean {
  return (spec.migrationType === "CutOver" || spec.migrationType === "Rollback") && spec.quiesce !== false;
}

function templateOf(kind: WorkloadKind, workload: Workload): PodTemplate | undefined {
  return kind === "CronJob" ? workload.spec?.jobTemplate?.spec?.template : workload.spec?.template;
}

/**
 * Whether the workload's pods mount one of `claims` (PVC names in its namespace): a volume of its pod
 * template, or for a StatefulSet a claim of its volumeClaimTemplates ("<template>-<set>-<ordinal>").
 */
export function mountsAnyClaim(kind: WorkloadKind, workload: Workload, claims: ReadonlySet<string>): boolean {
  const volumes = templateOf(kind, workload)?.spec?.volumes ?? [];
  if (volumes.some((v) => claims.has(v.persistentVolumeClaim?.claimName ?? ""))) return true;
  if (kind !== "StatefulSet") return false;
  const set = workload.metadata.name;
  const prefixes = (workload.spec?.volumeClaimTemplates ?? []).map((t) => `${t.metadata?.name ?? ""}-${set}-`);
  return [...claims].some((claim) => prefixes.some((prefix) => claim.startsWith(prefix) && /^\d+$/.test(claim.slice(prefix.length))));
}

/** A ReplicaSet its Deployment controls is scaled through the Deployment, never on its own. */
export function controlledByDeployment(workload: Workload): boolean {
  return (workload.metadata.ownerReferences ?? []).some((o) => o.controller === true && o.kind === "Deployment");
}

export interface Found {
  kind: WorkloadKind;
  object: Workload;
}

/** The workloads to quiesce among those listed, in a stable order (kind, namespace, name). */
export function workloadsToQuiesce(found: readonly Found[], claimsByNamespace: ReadonlyMap<string, ReadonlySet<string>>): Found[] {
  return found
    .filter(({ kind, object }) => !(kind === "ReplicaSet" && controlledByDeployment(object)))
    .filter(({ kind, object }) => mountsAnyClaim(kind, object, claimsByNamespace.get(object.metadata.namespace ?? "") ?? new Set()))
    .sort((a, b) => WORKLOAD_KINDS.indexOf(a.kind) - WORKLOAD_KINDS.indexOf(b.kind) || keyOf(a).localeCompare(keyOf(b)));
}

export const keyOf = ({ kind, object }: Found): string => `${kind} ${object.metadata.namespace}/${object.metadata.name}`;

const recordKey = (kind: WorkloadKind) => (kind === "CronJob" ? PRE_QUIESCE_SUSPEND : PRE_QUIESCE_REPLICAS);

/**
 * The merge patch that quiesces the workload as read, or undefined when it is quiesced already. The
 * annotation is written only when absent (record once); present, only the count (or suspend) is set
 * again, e.g. after someone scaled it back up.
 */
export function quiescePatch(kind: WorkloadKind, workload: Workload, holder: string): Record<string, unknown> | undefined {
  const recorded = workload.metadata.annotations?.[recordKey(kind)];
  if (kind === "CronJob") {
    if (workload.spec?.suspend === true && recorded !== undefined) return undefined;
    const annotations = recorded === undefined ? { [PRE_QUIESCE_SUSPEND]: String(workload.spec?.suspend === true), [QUIESCED_BY]: holder } : undefined;
    return { ...(annotations ? { metadata: { annotations } } : {}), spec: { suspend: true } };
  }
  if (workload.spec?.replicas === 0 && recorded !== undefined) return undefined;
  // The API server defaults spec.replicas to 1: absent on a read means 1.
  const annotations = recorded === undefined ? { [PRE_QUIESCE_REPLICAS]: String(workload.spec?.replicas ?? 1), [QUIESCED_BY]: holder } : undefined;
  return { ...(annotations ? { metadata: { annotations } } : {}), spec: { replicas: 0 } };
}

/** What the object's annotation recorded, for the status and the ledger; undefined without one. */
export function recordedState(kind: WorkloadKind, workload: Workload): QuiescedApplication | undefined {
  const recorded = workload.metadata.annotations?.[recordKey(kind)];
  if (recorded === undefined) return undefined;
  const base = { kind, namespace: workload.metadata.namespace ?? "", name: workload.metadata.name };
  if (kind === "CronJob") return { ...base, suspend: recorded === "true" };
  const replicas = parseRecordedReplicas(recorded);
  return replicas === undefined ? base : { ...base, replicas };
}

function parseRecordedReplicas(recorded: string): number | undefined {
  return /^\d{1,9}$/.test(recorded) ? Number(recorded) : undefined;
}

export type RestoreDecision =
  /** Nothing to restore: no record, or another DVM's. */
  | { kind: "none" }
  | { kind: "patch"; patch: Record<string, unknown> }
  /** A record that does not parse: left as it is, named in a warning. */
  | { kind: "unreadable"; problem: string };

/**
 * The merge patch that restores the workload as read: back to its recorded count (or suspend) with the
 * record removed in the same write, so the restore happens once. `onlyHolder`: restore only a record
 * this DVM wrote (failure and cancel); a Rollback restores whichever CutOver's record is there.
 */
export function restorePatch(kind: WorkloadKind, workload: Workload, onlyHolder?: string): RestoreDecision {
  const annotations = workload.metadata.annotations ?? {};
  const recorded = annotations[recordKey(kind)];
  if (recorded === undefined) return { kind: "none" };
  if (onlyHolder !== undefined && annotations[QUIESCED_BY] !== onlyHolder) return { kind: "none" };
  const cleared = { metadata: { annotations: { [recordKey(kind)]: null, [QUIESCED_BY]: null } } };
  if (kind === "CronJob") {
    if (recorded !== "true" && recorded !== "false") return { kind: "unreadable", problem: `${PRE_QUIESCE_SUSPEND} is "${recorded}", not true or false` };
    return { kind: "patch", patch: { ...cleared, spec: { suspend: recorded === "true" } } };
  }
  const replicas = parseRecordedReplicas(recorded);
  if (replicas === undefined) return { kind: "unreadable", problem: `${PRE_QUIESCE_REPLICAS} is "${recorded}", not a count` };
  return { kind: "patch", patch: { ...cleared, spec: { replicas } } };
}
