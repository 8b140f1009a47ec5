/**
 * A schedule's runs (scheduled stages, src/events/schedule.ts) as `dvm schedule` shows them: one Stage
 * DVM per scheduled time, and what each moved, from rsync's statistics in its status (each PVC's
 * verification report): the delta is the size of the files rsync sent, not of the volume.
 */
import type { DirectVolumeMigration } from "../dvm/types";
import { SCHEDULE_LABEL } from "../events/schedule";
import { definedFields } from "../lib/definedFields";

export interface ScheduleRun {
  name: string;
  /** From the name's `-yyyymmdd-hhmmss` (UTC), which the trigger derived from the scheduled time. */
  scheduledTime?: string;
  phase: string;
  /** "Total transferred file size" of every PVC, summed: what changed since the previous run. */
  deltaBytes?: number;
  /** "Total bytes sent", summed: what went over the tunnel (data, checksums, file lists). */
  sentBytes?: number;
  filesTransferred?: number;
}

function timeOfName(name: string): string | undefined {
  const match = /-(\d{4})(\d{2})(\d{2})-(\d{2})(\d{2})(\d{2})$/.exec(name);
  return match ? `${match[1]}-${match[2]}-${match[3]}T${match[4]}:${match[5]}:${match[6]}Z` : undefined;
}

const sum = (values: (number | undefined)[]): number | undefined =>
  values.some((v) => v !== undefined) ? values.reduce<number>((total, v) => total + (v ?? 0), 0) : undefined;

/** The runs of `schedule` among `dvms`, oldest first. */
export function scheduleRuns(dvms: readonly DirectVolumeMigration[], schedule: string): ScheduleRun[] {
  return dvms
    .filter((dvm) => dvm.metadata.labels?.[SCHEDULE_LABEL] === schedule)
    .map((dvm) => {
      const reports = (dvm.status.rsyncOperations ?? []).map((op) => op.verification);
      const scheduledTime = timeOfName(dvm.metadata.name);
      const deltaBytes = sum(reports.map((r) => r?.transferredFileSize));
      const sentBytes = sum(reports.map((r) => r?.bytesTransferred));
      const filesTransferred = sum(reports.map((r) => r?.filesTransferred));
      return definedFields({
        name: dvm.metadata.name,
        scheduledTime: scheduledTime || undefined,
        phase: dvm.status.phase ?? "Pending",
        deltaBytes,
        sentBytes,
        filesTransferred,
      });
    })
    .sort((a, b) => (a.scheduledTime ?? a.name).localeCompare(b.scheduledTime ?? b.name));
}
