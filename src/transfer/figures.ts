/**
 * What a volume's transfer amounts to, from rsync's own account (RsyncProgress): the live figures (bytes,
 * total, percent, rate, time left) while it runs, and at the end a verification report (what was sent,
 * skipped, vanished, failed, and with --checksum whether every file's content was verified).
 */

import { definedFields } from "../lib/definedFields";
import type { RsyncProgress } from "./progress";

export interface TransferFigures {
  /** While rsync runs, its progress count; at the end, the bytes it sent ("Total bytes sent"). */
  bytesTransferred?: number;
  /** The source's total file size: estimated from the percentage while running, rsync's statistics at the end. */
  totalBytes?: number;
  percent?: number;
  /** The current rate while running; the whole run's average at the end. */
  bytesPerSecond?: number;
  secondsLeft?: number;
  elapsedSeconds?: number;
}

export interface VerificationReport {
  /** Regular files sent (new or changed), and those already up to date at the destination. */
  filesTransferred: number;
  filesSkipped: number;
  /** Files gone from the source between rsync's file list and their transfer (a live volume). */
  filesVanished: number;
  /** Files rsync could not read or write. */
  filesFailed: number;
  filesDeleted: number;
  /** Bytes sent over the tunnel, and the size of the files they carried. */
  bytesTransferred: number;
  transferredFileSize: number;
  /** The source: every entry (files, directories, links) and the size of its files. */
  totalFiles: number;
  totalBytes: number;
  /** rsync compared every file's checksum (--checksum), not only size and time. */
  checksumVerified: boolean;
  /** Files whose content failed rsync's post-transfer checksum; with verification on, any fails the PVC. */
  checksumMismatches: number;
}

/** Only finite, non-negative numbers reach the status (the ledger refuses a status that does not parse). */
function sane(figures: Record<string, number | undefined>): TransferFigures {
  return Object.fromEntries(Object.entries(figures).filter(([, v]) => v !== undefined && Number.isFinite(v) && v >= 0)) as TransferFigures;
}
const whole = (n: number | undefined): number => (n !== undefined && Number.isFinite(n) && n >= 0 ? Math.round(n) : 0);

export function liveFigures(progress: RsyncProgress | undefined): TransferFigures {
  if (!progress) return {};
  if (progress.finished) return sane({ ...finalFigures(progress) });
  const { bytesTransferred: bytes, percent } = progress;
  const total = bytes !== undefined && percent !== undefined && percent > 0 ? Math.round((bytes * 100) / percent) : undefined;
  return sane({ bytesTransferred: bytes, totalBytes: total, percent, bytesPerSecond: progress.rateBytesPerSecond, secondsLeft: progress.secondsLeft });
}

function finalFigures(progress: RsyncProgress): TransferFigures {
  const sent = progress.bytesSent ?? progress.bytesTransferred;
  return definedFields({
    bytesTransferred: sent,
    totalBytes: progress.totalFileSize,
    percent: 100,
    bytesPerSecond: progress.averageBytesPerSecond,
    secondsLeft: 0,
    elapsedSeconds: progress.elapsedSeconds,
  });
}

/** The report of a transfer that ended; undefined when rsync's statistics are not in the log. */
export function verificationReport(progress: RsyncProgress | undefined, options: { checksum: boolean }): VerificationReport | undefined {
  if (!progress?.finished || progress.totalFiles === undefined) return undefined;
  const transferred = whole(progress.filesTransferred);
  return {
    filesTransferred: transferred,
    filesSkipped: Math.max(0, whole(progress.regularFiles ?? transferred) - transferred),
    filesVanished: whole(progress.vanishedFiles),
    filesFailed: whole(progress.fileErrors),
    filesDeleted: whole(progress.deletedFiles),
    bytesTransferred: whole(progress.bytesSent ?? progress.bytesTransferred),
    transferredFileSize: whole(progress.transferredFileSize),
    totalFiles: whole(progress.totalFiles),
    totalBytes: whole(progress.totalFileSize),
    checksumVerified: options.checksum,
    checksumMismatches: whole(progress.checksumMismatches),
  };
}

/**
 * All volumes together: bytes and totals add up, the percentage is of the summed totals, the rate is
 * the sum of the running transfers' rates, and the time left is the longest left. Totals and time left
 * are only given when every volume that is not done has a figure for them (a queued volume has none).
 */
export function totalFigures(volumes: readonly (TransferFigures & { done: boolean })[]): TransferFigures {
  const sum = (values: (number | undefined)[]) => values.reduce<number>((acc, v) => acc + (v ?? 0), 0);
  const open = volumes.filter((v) => !v.done);
  const bytes = sum(volumes.map((v) => v.bytesTransferred));
  const totalsKnown = volumes.every((v) => v.totalBytes !== undefined);
  const total = totalsKnown ? sum(volumes.map((v) => v.totalBytes)) : undefined;
  // Percent from each volume's own figure weighted by its total: an incremental pass sends far fewer
  // bytes than the total and is still at 100%.
  const percent =
    total !== undefined && total > 0
      ? Math.min(100, (sum(volumes.map((v) => ((v.done ? 100 : (v.percent ?? 0)) * (v.totalBytes ?? 0)) / 100)) * 100) / total)
      : open.length === 0 && volumes.length > 0
        ? 100
        : undefined;
  const timesKnown = open.every((v) => v.secondsLeft !== undefined);
  return definedFields({
    bytesTransferred: bytes,
    totalBytes: total,
    percent: percent === undefined ? undefined : Math.round(percent * 10) / 10,
    bytesPerSecond: sum(open.map((v) => v.bytesPerSecond)),
    secondsLeft: timesKnown ? Math.max(0, ...open.map((v) => v.secondsLeft ?? 0)) : undefined,
  });
}
