/**
 * What `dvm watch` shows. A snapshot is one fresh reading of the DVM and its progress records; a view
 * turns a sequence of snapshots into output: timestamped lines, only for what changed (pipes, logs), or
 * live progress bars (a terminal).
 */
import { MultiBar, Presets, type SingleBar } from "cli-progress";
import { type ItineraryName, type PhaseName, stepOf } from "../dvm/itinerary";
import type { DirectVolumeMigration, DvmStatus } from "../dvm/types";
import { definedFields } from "../lib/definedFields";
import { formatBytes, formatRate, formatTimeLeft } from "../report";
import type { CliOutput } from "./io";
import type { VolumeProgress } from "./progress";
import { type MigrationResult, summarizeDvm } from "./summary";

export interface WatchSnapshot {
  at: number;
  itinerary?: ItineraryName;
  phase?: PhaseName;
  /** "Step n/total" from the itinerary table, "" before the controller wrote a status. */
  step: string;
  description?: string;
  result: MigrationResult;
  volumes: VolumeProgress[];
  /** All volumes together (status.progress). */
  total?: NonNullable<DvmStatus["progress"]>;
  errors: string[];
}

export function snapshotOf(dvm: DirectVolumeMigration, volumes: VolumeProgress[], at: number): WatchSnapshot {
  const summary = summarizeDvm(dvm, at);
  const position = summary.itinerary && summary.phase ? stepOf(summary.itinerary, summary.phase) : undefined;
  return definedFields({
    at,
    itinerary: summary.itinerary,
    phase: summary.phase,
    step: position ? `Step ${position.step}/${position.total}` : summary.stepLabel,
    description: summary.description || undefined,
    result: summary.result,
    volumes,
    total: dvm.status.progress,
    errors: summary.errors,
  });
}

export function isFinished(snapshot: WatchSnapshot): boolean {
  return snapshot.result === "Succeeded" || snapshot.result === "Failed";
}

export interface WatchView {
  show(snapshot: WatchSnapshot): void;
  /** A note that is not part of the DVM (a read that failed and will be retried). */
  note(text: string, at: number): void;
  /** The last snapshot (finished or not); leaves the terminal clean. */
  close(last: WatchSnapshot | undefined): void;
}

const timestamp = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");

export function phaseLine(s: WatchSnapshot): string {
  if (!s.phase) return "Waiting for the controller to start the migration";
  const itinerary = s.itinerary === "VolumeMigrationFailed" ? "  [failure itinerary]" : "";
  return `${s.step}  ${s.phase}: ${s.description ?? ""}${itinerary}`;
}

/** "12.0 MiB of 100.0 MiB", "10.0 MiB/s", "0:09 left", each only when known. */
export function byteFigures(
  f: { bytesTransferred?: number | undefined; totalBytes?: number | undefined; bytesPerSecond?: number | undefined; secondsLeft?: number | undefined },
  state?: string,
): string[] {
  const open = state === undefined || state === "running";
  return [
    f.bytesTransferred !== undefined ? `${formatBytes(f.bytesTransferred)}${f.totalBytes !== undefined ? ` of ${formatBytes(f.totalBytes)}` : ""}` : undefined,
    f.bytesPerSecond !== undefined && f.bytesPerSecond > 0 ? formatRate(f.bytesPerSecond) : undefined,
    open && f.secondsLeft !== undefined ? `${formatTimeLeft(f.secondsLeft)} left` : undefined,
  ].filter((part): part is string => part !== undefined);
}

export function volumeLine(v: VolumeProgress): string {
  const figures = byteFigures(v, v.state);
  return [
    v.pvc,
    v.state,
    v.attempt !== undefined ? `attempt ${v.attempt}` : undefined,
    v.percent !== undefined ? `${Math.round(v.percent)}%` : undefined,
    ...(figures.length > 0 ? figures : [v.rate]),
    v.message,
  ]
    .filter(Boolean)
    .join("  ");
}

/** The line for all volumes together, when the status has one. */
export function totalLine(s: WatchSnapshot): string | undefined {
  if (!s.total || s.volumes.length < 2) return undefined;
  const percent = s.total.percent !== undefined ? `${Math.round(s.total.percent)}%` : undefined;
  return ["all volumes", percent, ...byteFigures(s.total)].filter(Boolean).join("  ");
}

export function finalLines(s: WatchSnapshot): string[] {
  if (s.result === "Succeeded") return ["Completed: the migration succeeded"];
  return [`Completed: the migration FAILED${s.errors.length > 0 ? ":" : ""}`, ...s.errors.map((e) => `  ${e}`)];
}

/** Timestamped lines, each printed only when it differs from what was printed before. */
export class PlainWatchView implements WatchView {
  private lastPhase?: string;
  private lastTotal: string | undefined;
  private readonly lastVolume = new Map<string, string>();

  constructor(private readonly out: CliOutput) {}

  private line(at: number, text: string): void {
    this.out.write(`${timestamp(at)}  ${text}\n`);
  }

  show(s: WatchSnapshot): void {
    const phase = phaseLine(s);
    if (phase !== this.lastPhase) this.line(s.at, phase);
    this.lastPhase = phase;
    for (const volume of s.volumes) {
      const text = volumeLine(volume);
      if (this.lastVolume.get(volume.pvc) !== text) this.line(s.at, text);
      this.lastVolume.set(volume.pvc, text);
    }
    const total = totalLine(s);
    if (total !== undefined && total !== this.lastTotal) this.line(s.at, total);
    this.lastTotal = total;
  }

  note(text: string, at: number): void {
    this.line(at, text);
  }

  close(last: WatchSnapshot | undefined): void {
    if (last && isFinished(last)) for (const text of finalLines(last)) this.line(last.at, text);
  }
}

const PVC_WIDTH = 32;

/**
 * One line for the current step and one progress bar per volume, redrawn in place (cli-progress
 * MultiBar); each step the migration enters is also logged above the bars, so the history stays.
 */
export class BarWatchView implements WatchView {
  private readonly bars: MultiBar;
  private readonly header: SingleBar;
  private readonly volumes = new Map<string, SingleBar>();
  private lastPhase?: string;

  constructor(private readonly out: CliOutput & NodeJS.WritableStream) {
    this.bars = new MultiBar(
      {
        stream: out,
        clearOnComplete: false,
        hideCursor: true,
        gracefulExit: false,
        autopadding: true,
        format: " {pvc} {bar} {percentage}% | {state}{rate}",
      },
      Presets.shades_classic,
    );
    this.header = this.bars.create(1, 0, { text: "Waiting for the first reading" }, { format: "{text}" });
  }

  show(s: WatchSnapshot): void {
    const phase = phaseLine(s);
    if (phase !== this.lastPhase) this.bars.log(`${timestamp(s.at)}  ${phase}\n`);
    this.lastPhase = phase;
    this.header.update(0, { text: phase });
    for (const volume of s.volumes) {
      const payload = {
        pvc: volume.pvc.length > PVC_WIDTH ? `…${volume.pvc.slice(-(PVC_WIDTH - 1))}` : volume.pvc.padEnd(PVC_WIDTH),
        state: volume.attempt !== undefined && volume.attempt > 1 ? `${volume.state} (attempt ${volume.attempt})` : volume.state,
        rate: byteFigures(volume, volume.state).length > 0 ? ` | ${byteFigures(volume, volume.state).join(" | ")}` : volume.rate ? ` | ${volume.rate}` : "",
      };
      const value = volume.percent ?? 0;
      const bar = this.volumes.get(volume.pvc);
      if (bar) bar.update(value, payload);
      else this.volumes.set(volume.pvc, this.bars.create(100, value, payload));
    }
  }

  note(text: string, at: number): void {
    this.bars.log(`${timestamp(at)}  ${text}\n`);
  }

  close(last: WatchSnapshot | undefined): void {
    // Flush what was logged, draw the bars one last time, then give the terminal back.
    this.bars.update();
    this.bars.stop();
    if (last && isFinished(last)) for (const text of finalLines(last)) this.out.write(`${timestamp(last.at)}  ${text}\n`);
  }
}
