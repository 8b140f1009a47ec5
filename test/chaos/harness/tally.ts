/**
 * What a run did, recorded where it happened: every entry into a real phase body (by the wrapper
 * around it, in this process or in a worker that reports over IPC before the body runs) and every
 * invocation's outcome and timing. Pure bookkeeping: usable in child processes too.
 */
import type { RunResult } from "../../../src/contracts/request";
import { isPhaseName, phaseSpec } from "../../../src/dvm/itinerary";
import { percentile } from "./random";

/** "crashed": killed right after returning (crash injection); "killed": the process died inside the body. */
export type BodyOutcome = "advance" | "wait" | "fail" | "threw" | "crashed" | "killed";

export interface BodyEntry {
  uid: string;
  phase: string;
  generation: number;
  attempt: number;
  enteredAt: number;
  exitedAt?: number;
  /** Absent while running, or when the process died inside the body. */
  outcome?: BodyOutcome;
  error?: string;
}

export interface InvocationRecord {
  uid: string;
  kind: RunResult["kind"] | "error";
  /** Wall time of the whole invocation. */
  durationMs: number;
  /** Time spent inside phase bodies during it. */
  bodyMs: number;
  statusConflicts: number;
  takeover: boolean;
  /** Delivered as a stale replay (old request, read one write behind). */
  stale: boolean;
}

export interface RepeatSummary {
  /** Phase bodies entered. */
  executions: number;
  /**
   * Executions of a non-waiting phase beyond the first that did its work: for each (uid, phase,
   * generation), the entries that returned an outcome (or were killed after returning it, or never
   * reported back) minus one. An entry that threw is a retry of failed work, not a repeat.
   */
  repeats: number;
  /** Entries of a waiting phase after one of its entries had already advanced (or concurrent with it). */
  waitRepeats: number;
  /** Pairs of executions of the same (uid, phase, generation) that overlapped in time. */
  overlaps: number;
  /** Entries that threw (transient errors): retried legitimately. */
  retries: number;
  /** Bodies killed right after returning (crash injection). */
  crashed: number;
  /** Bodies whose process died while they ran (function timeout). */
  killed: number;
  /** Repeats (waiting phases' included) by phase name. */
  byPhase: Record<string, number>;
  /** Time spent in the repeated executions' bodies (entry to exit), ms: what the repeats wasted. */
  wastedMs: number;
  details: string[];
}

export class Tally {
  readonly bodies: BodyEntry[] = [];
  readonly invocations: InvocationRecord[] = [];
  /** Worker processes killed because an invocation hit the function timeout, by DVM uid. */
  readonly timeouts: string[] = [];
  /** Worker processes killed between a ledger completion and the status write, by "uid/phase". */
  readonly statusCrashes: string[] = [];
  private readonly open = new Map<string, BodyEntry>();
  private nextKey = 0;

  enter(entry: Omit<BodyEntry, "exitedAt" | "outcome" | "error">, key = `b${this.nextKey++}`): string {
    const record: BodyEntry = { ...entry };
    this.bodies.push(record);
    this.open.set(key, record);
    return key;
  }

  exit(key: string, outcome: BodyOutcome, at = Date.now(), error?: string): void {
    const record = this.open.get(key);
    if (!record) return;
    record.exitedAt = at;
    record.outcome = outcome;
    if (error) record.error = error;
    this.open.delete(key);
  }

  /** A process died: its bodies still open (keys starting with `prefix`) ended with it. */
  killOpen(prefix: string, at = Date.now()): void {
    for (const key of [...this.open.keys()]) if (key.startsWith(prefix)) this.exit(key, "killed", at);
  }

  invocation(record: InvocationRecord): void {
    this.invocations.push(record);
  }

  forDvms(uids: ReadonlySet<string>): { bodies: BodyEntry[]; invocations: InvocationRecord[] } {
    return { bodies: this.bodies.filter((b) => uids.has(b.uid)), invocations: this.invocations.filter((i) => uids.has(i.uid)) };
  }
}

function waits(phase: string): boolean {
  return isPhaseName(phase) && phaseSpec(phase).waits;
}

export function summarizeRepeats(bodies: readonly BodyEntry[]): RepeatSummary {
  const groups = new Map<string, BodyEntry[]>();
  for (const body of bodies) {
    const key = `${body.uid}/${body.phase}/${body.generation}`;
    const group = groups.get(key) ?? [];
    group.push(body);
    groups.set(key, group);
  }
  const summary: RepeatSummary = {
    executions: bodies.length,
    repeats: 0,
    waitRepeats: 0,
    overlaps: 0,
    retries: 0,
    crashed: 0,
    killed: 0,
    byPhase: {},
    wastedMs: 0,
    details: [],
  };
  const spent = (b: BodyEntry) => (b.exitedAt !== undefined ? b.exitedAt - b.enteredAt : 0);
  for (const [key, group] of groups) {
    summary.retries += group.filter((b) => b.outcome === "threw").length;
    summary.crashed += group.filter((b) => b.outcome === "crashed").length;
    summary.killed += group.filter((b) => b.outcome === "killed").length;
    for (let i = 0; i < group.length; i++) {
      for (let j = i + 1; j < group.length; j++) {
        const [a, b] = [group[i]!, group[j]!];
        if (b.enteredAt < (a.exitedAt ?? Number.POSITIVE_INFINITY) && a.enteredAt < (b.exitedAt ?? Number.POSITIVE_INFINITY)) summary.overlaps++;
      }
    }
    const phase = group[0]!.phase;
    if (!waits(phase)) {
      const didWork = group.filter((b) => b.outcome !== "threw");
      if (didWork.length > 1) {
        summary.repeats += didWork.length - 1;
        summary.byPhase[phase] = (summary.byPhase[phase] ?? 0) + didWork.length - 1;
        // The first execution did the work; every later one was spent for nothing.
        summary.wastedMs += didWork
          .slice()
          .sort((x, y) => x.enteredAt - y.enteredAt)
          .slice(1)
          .reduce((sum, b) => sum + spent(b), 0);
        const outcomes = didWork.slice(0, 4).map((b) => `attempt ${b.attempt} ${b.outcome ?? "no report"}`);
        if (didWork.length > 4) outcomes.push("...");
        summary.details.push(`${key}: ${didWork.length} executions (${outcomes.join(", ")})`);
      }
    } else {
      const advanced = group.find((b) => b.outcome === "advance" || b.outcome === "fail");
      if (advanced) {
        const after = group.filter((b) => b !== advanced && b.outcome !== "threw" && b.enteredAt >= advanced.enteredAt);
        if (after.length > 0) {
          summary.waitRepeats += after.length;
          summary.byPhase[phase] = (summary.byPhase[phase] ?? 0) + after.length;
          summary.wastedMs += after.reduce((sum, b) => sum + spent(b), 0);
          summary.details.push(`${key}: polled ${after.length} more time(s) after it advanced`);
        }
      }
    }
  }
  return summary;
}

export interface Distribution {
  p50: number;
  p99: number;
  max: number;
  count: number;
}

export function distribution(values: readonly number[]): Distribution {
  return { p50: percentile(values, 0.5), p99: percentile(values, 0.99), max: values.length ? Math.max(...values) : 0, count: values.length };
}

/**
 * Transition overhead: for every invocation that moved a DVM to its next phase, its wall time minus the
 * time spent in the phase body. For our runner that is the fresh read, the ledger claim, the ledger
 * completion and the guarded status write (with re-reads after 409s); for the baseline, the cache read
 * and the guarded status write.
 */
export function transitionOverhead(invocations: readonly InvocationRecord[]): Distribution {
  return distribution(invocations.filter((i) => i.kind === "advanced").map((i) => Math.max(0, i.durationMs - i.bodyMs)));
}
