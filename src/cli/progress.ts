/**
 * The per-volume progress records (DirectVolumeMigrationProgress) as the watch shows them: which pod
 * and attempt, its state, percent and rate, as RunRsyncOperations writes them into the records' status.
 */
import type { KubeObject } from "../kube/objects";

export interface VolumeProgress {
  /** namespace/name of the PVC the data comes from. */
  pvc: string;
  record: string;
  pod?: string;
  attempt?: number;
  /** pending, running, succeeded, failed, unknown (RunRsyncOperations' words); "waiting" before any pod. */
  state: string;
  /** 0 to 100, when known. */
  percent?: number;
  rate?: string;
  bytesTransferred?: number;
  totalBytes?: number;
  bytesPerSecond?: number;
  secondsLeft?: number;
  message?: string;
}

interface ProgressObject extends KubeObject {
  spec?: { pvcName?: unknown; pvcNamespace?: unknown };
  status?: {
    podName?: unknown;
    attempt?: unknown;
    phase?: unknown;
    lastObservedProgressPercent?: unknown;
    lastObservedTransferRate?: unknown;
    bytesTransferred?: unknown;
    totalBytes?: unknown;
    bytesPerSecond?: unknown;
    secondsLeft?: unknown;
    logMessage?: unknown;
  };
}

const text = (value: unknown) => (typeof value === "string" && value !== "" ? value : undefined);

/** "42%" or "42.5%" → 42.5; anything else → undefined. */
export function parsePercent(value: unknown): number | undefined {
  const match = typeof value === "string" ? /^\s*(\d+(?:\.\d+)?)\s*%?\s*$/.exec(value) : undefined;
  if (!match) return typeof value === "number" && Number.isFinite(value) ? Math.min(100, Math.max(0, value)) : undefined;
  return Math.min(100, Number(match[1]));
}

export function volumeProgressOf(raw: KubeObject): VolumeProgress {
  const record = raw as ProgressObject;
  const status = record.status ?? {};
  const pvcName = text(record.spec?.pvcName) ?? record.metadata.name;
  const pvcNamespace = text(record.spec?.pvcNamespace) ?? record.metadata.namespace ?? "";
  const percent = parsePercent(status.lastObservedProgressPercent);
  const state = text(status.phase) ?? "waiting";
  const progress: VolumeProgress = { pvc: `${pvcNamespace}/${pvcName}`, record: record.metadata.name, state };
  const pod = text(status.podName);
  if (pod) progress.pod = pod;
  if (typeof status.attempt === "number") progress.attempt = status.attempt;
  // A succeeded transfer is complete even when the log gave no figure.
  const shownPercent = state === "succeeded" ? 100 : percent;
  if (shownPercent !== undefined) progress.percent = shownPercent;
  const rate = text(status.lastObservedTransferRate);
  if (rate) progress.rate = rate;
  const count = (value: unknown) => (typeof value === "number" && Number.isFinite(value) && value >= 0 ? value : undefined);
  const figures = {
    bytesTransferred: count(status.bytesTransferred),
    totalBytes: count(status.totalBytes),
    bytesPerSecond: count(status.bytesPerSecond),
    secondsLeft: count(status.secondsLeft),
  };
  for (const [key, value] of Object.entries(figures)) if (value !== undefined) progress[key as keyof typeof figures] = value;
  const message = text(status.logMessage);
  if (message) progress.message = message;
  return progress;
}

export function volumeProgressList(records: readonly KubeObject[]): VolumeProgress[] {
  return records.map(volumeProgressOf).sort((a, b) => a.pvc.localeCompare(b.pvc));
}
