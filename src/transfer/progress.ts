/**
 * Reads rsync's own account of a transfer from the client container's log: the whole-transfer
 * progress line (--info=PROGRESS2, updated in place with carriage returns) and the final statistics
 * (--info=STATS2). Works on a log tail as well as on the whole log; whatever is absent stays undefined.
 *
 * A progress2 update looks like
 *   `     15.49M  99%  446.58MB/s    0:00:00 (xfr#4, to-chk=0/12)`
 * and the statistics end with
 *   `sent 15.49M bytes  received 141 bytes  30.98M bytes/sec` / `total size is 15.49M  speedup is 1.00`.
 */

export interface RsyncProgress {
  /** Whole-transfer percentage, 0-100. 100 once the final summary is printed (see `finished`). */
  percent?: number;
  /** The latest progress2 rate as rsync prints it, e.g. "446.58MB/s" (upstream's status field). */
  rate?: string;
  /** That rate in bytes per second (rsync's progress rate units are powers of 1024). */
  rateBytesPerSecond?: number;
  /** Bytes sent: "Total bytes sent" once finished, the progress2 byte count before. */
  bytesTransferred?: number;
  /** Regular files transferred: from the statistics, or the progress2 `xfr#` counter before. */
  filesTransferred?: number;
  /** "Number of files" (all types) in the source. */
  totalFiles?: number;
  /** Its regular files ("reg: N"): with filesTransferred, how many were already up to date (skipped). */
  regularFiles?: number;
  createdFiles?: number;
  deletedFiles?: number;
  /** "Total file size" of the source. */
  totalFileSize?: number;
  /** "Total transferred file size": the size of the files that were sent (in part or whole). */
  transferredFileSize?: number;
  /** "Total bytes sent": what went over the tunnel, rsync's own count (file data, checksums, file list). */
  bytesSent?: number;
  /** Bytes sent as new data, and bytes the receiver already had (a resumed partial file shows here). */
  literalBytes?: number;
  matchedBytes?: number;
  /** Average rate of the whole run from the closing "sent ... bytes/sec" line. */
  averageBytesPerSecond?: number;
  /** The progress2 time column once finished (rsync then prints elapsed time instead of an estimate). */
  elapsedSeconds?: number;
  /** The progress2 time column before the end: rsync's estimate of the time left. */
  secondsLeft?: number;
  /** Files rsync could not read or write ("rsync: [sender] ... (13)" lines; exit code 23). */
  fileErrors?: number;
  /** Files whose content failed rsync's whole-file checksum after the transfer ("ERROR: ... failed verification"). */
  checksumMismatches?: number;
  /** The closing "total size is ... speedup is ..." line was seen: rsync went through the whole list. */
  finished: boolean;
  /** The last "rsync error: ..." line, if any (e.g. "auth failed ..." or "some files ... (code 23)"). */
  error?: string;
  /** The exit code rsync states in that line. */
  errorCode?: number;
  /** The daemon's refusal ("@ERROR: auth failed on module ..."), if any. */
  daemonError?: string;
  /** Source files that disappeared while rsync ran ("file has vanished: ..." lines; exit code 24). */
  vanishedFiles?: number;
  /** The last "rsync warning: ..." line, if any (e.g. "some files vanished before they could be transferred"). */
  warning?: string;
}

export interface ParseRsyncProgressOptions {
  /**
   * Unit of the K/M/G suffixes in byte counts: 1000 with a single --human-readable (the default
   * client arguments), 1024 with -hhh. Plain and comma-grouped numbers are read either way.
   */
  unitBase?: 1000 | 1024;
}

const PROGRESS2 = /^\s*([\d.,]+[KMGTPEZY]?)\s+(\d{1,3})%\s+([\d.,]+[kMGTP]?B\/s)\s+(\d+):(\d{2}):(\d{2})(?:\s+\(xfr#(\d+),\s*(?:ir|to)-chk=(\d+)\/(\d+)\))?/;
const SUFFIXES = "KMGTPEZY";

export function parseRsyncProgress(text: string, options: ParseRsyncProgressOptions = {}): RsyncProgress {
  const base = options.unitBase ?? 1000;
  const result: RsyncProgress = { finished: false };
  // Each \r starts a new in-place update; every segment is a candidate, the last match wins.
  const segments = text.split(/\r\n|\r|\n/);
  let clockSeconds: number | undefined;
  for (const segment of segments) {
    const line = segment.trimEnd();
    if (line.trim() === "") continue;
    const progress = PROGRESS2.exec(line);
    if (progress) {
      // Groups that are not optional in PROGRESS2 always match; the defaults only satisfy the type.
      const [, bytes = "", percent, rate = "", h, m, s, xfr] = progress;
      result.percent = Number(percent);
      result.rate = rate;
      result.rateBytesPerSecond = parseRate(rate);
      result.bytesTransferred = parseSize(bytes, base);
      if (xfr !== undefined) result.filesTransferred = Number(xfr);
      clockSeconds = Number(h) * 3600 + Number(m) * 60 + Number(s);
      continue;
    }
    const stat = /^([A-Z][A-Za-z ]+):\s+([\d.,]+[KMGTPEZY]?)(?:\s|$)/.exec(line);
    if (stat) {
      const [, label, value] = stat;
      const n = parseSize(value ?? "", base);
      switch (label) {
        case "Number of files": {
          result.totalFiles = n;
          const regular = /\breg: ([\d.,]*\d[KMGTPEZY]?)/.exec(line);
          if (regular) result.regularFiles = parseSize(regular[1] ?? "", base);
          break;
        }
        case "Number of created files":
          result.createdFiles = n;
          break;
        case "Number of deleted files":
          result.deletedFiles = n;
          break;
        case "Number of regular files transferred":
          result.filesTransferred = n;
          break;
        case "Total file size":
          result.totalFileSize = n;
          break;
        case "Total transferred file size":
          result.transferredFileSize = n;
          break;
        case "Literal data":
          result.literalBytes = n;
          break;
        case "Matched data":
          result.matchedBytes = n;
          break;
        case "Total bytes sent":
          result.bytesTransferred = n;
          result.bytesSent = n;
          break;
      }
      continue;
    }
    const summary = /^sent ([\d.,]+[KMGTPEZY]?) bytes\s+received ([\d.,]+[KMGTPEZY]?) bytes\s+([\d.,]+[KMGTPEZY]?) bytes\/sec/.exec(line);
    if (summary) {
      result.averageBytesPerSecond = parseSize(summary[3] ?? "", base);
      continue;
    }
    if (/^total size is \S+\s+speedup is/.test(line)) {
      result.finished = true;
      continue;
    }
    // rsync names each file that disappeared between the file list and its transfer (a live volume).
    if (/^file has vanished: /.test(line.trim())) {
      result.vanishedFiles = (result.vanishedFiles ?? 0) + 1;
      continue;
    }
    if (/^rsync: \[[a-z]+\] .*\(\d+\)$/.test(line.trim())) {
      result.fileErrors = (result.fileErrors ?? 0) + 1;
      continue;
    }
    if (/^ERROR: .* failed verification -- update discarded/.test(line.trim())) {
      result.checksumMismatches = (result.checksumMismatches ?? 0) + 1;
      continue;
    }
    const warning = /^rsync warning: (.*?)(?: \(code (\d+)\))?(?: at \S+)?(?: \[[^\]]*\])?$/.exec(line);
    if (warning) {
      result.warning = warning[1] ?? "";
      if (warning[2] !== undefined) result.errorCode = Number(warning[2]);
      continue;
    }
    const refused = /^@ERROR: (.*)$/.exec(line);
    if (refused) {
      result.daemonError = refused[1] ?? "";
      continue;
    }
    const error = /^rsync error: (.*?)(?: \(code (\d+)\))?(?: at \S+)?(?: \[[^\]]*\])?$/.exec(line);
    if (error) {
      result.error = error[1] ?? "";
      if (error[2] !== undefined) result.errorCode = Number(error[2]);
    }
  }
  // progress2 often stops at 99% (rounding, and totals that include links and directories); the
  // closing summary is printed only after the whole file list was processed.
  if (result.finished) {
    result.percent = 100;
    // Before the end the time column is an estimate of the time left, not elapsed time.
    if (clockSeconds !== undefined) result.elapsedSeconds = clockSeconds;
  } else if (clockSeconds !== undefined) result.secondsLeft = clockSeconds;
  return result;
}

/**
 * Progress across reads and attempts: the highest percentage wins, as upstream, so a retry that
 * starts again at 0% does not move the reported figure back; every other field comes from the later
 * reading when it has it.
 * @internal exported for its tests
 */
export function mergeRsyncProgress(earlier: RsyncProgress | undefined, later: RsyncProgress): RsyncProgress {
  if (!earlier) return later;
  const merged: RsyncProgress = { ...earlier };
  for (const [key, value] of Object.entries(later) as [keyof RsyncProgress, unknown][]) {
    if (value !== undefined) (merged as unknown as Record<string, unknown>)[key] = value;
  }
  const percents = [earlier.percent, later.percent].filter((p): p is number => p !== undefined);
  if (percents.length > 0) merged.percent = Math.max(...percents);
  merged.finished = earlier.finished || later.finished;
  if (merged.finished) delete merged.secondsLeft;
  return merged;
}

/** "15.49M" (units of `base`), "15,490,064", "15490064" or "1.5" → bytes. */
export function parseSize(text: string, base: 1000 | 1024 = 1000): number {
  const match = /^([\d.,]+)([KMGTPEZY]?)$/.exec(text.trim());
  if (!match) return Number.NaN;
  const [, digits = "", suffix = ""] = match;
  // A suffix means a decimal number ("15.49M"); without one, commas and dots group thousands.
  const value = suffix ? Number(digits.replace(/,/g, "")) : Number(digits.replace(/[.,](?=\d{3}(\D|$))/g, ""));
  return Math.round(value * (suffix ? base ** (SUFFIXES.indexOf(suffix) + 1) : 1));
}

/** "446.58MB/s" → bytes per second. rsync's progress rate is computed in KiB, so its units are 1024-based. */
export function parseRate(text: string): number {
  const match = /^([\d.,]+)([kMGTP]?)B\/s$/.exec(text.trim());
  if (!match) return Number.NaN;
  const [, digits = "", unit = ""] = match;
  const power = unit === "" ? 0 : "kMGTP".indexOf(unit) + 1;
  return Math.round(Number(digits.replace(/,/g, "")) * 1024 ** power);
}
