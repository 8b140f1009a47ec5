/**
 * The executions of one ledger entry: the spans during which a phase body ran (or, for a wait phase,
 * during which it was being polled), read from the entry's claim records. A repeated execution is a body
 * entered again for the same (uid, phase, generation): a takeover after a crashed attempt, or, for a phase
 * that does not wait, a re-run after a failed attempt. A wait phase's polls are one execution, and so
 * are the polls of a phase that waits only sometimes (CreateDestinationPVCs while it measures the source,
 * CreateStunnelConfig while the endpoint has no address) and a claim given back unrun (a wrong guess of
 * the phase, runner.ts): an attempt that follows one that ended "waited" continues its execution.
 */
import type { PhaseName } from "../dvm/itinerary";
import type { ClaimRecord, LedgerEntry } from "../ledger/types";

/** How an execution ended. "crashed": no ending write, another attempt took over. */
export type ExecutionEnd = "completed" | "failed" | "waited" | "crashed" | "running";

export interface PhaseExecution {
  phase: PhaseName;
  generation: number;
  /** The attempt that started it, when recorded. */
  attempt?: number;
  /** ms since the epoch. */
  start: number;
  end: number;
  seconds: number;
  repeated: boolean;
  takeover: boolean;
  ended: ExecutionEnd;
}

export interface EntryExecutions {
  executions: PhaseExecution[];
  /** Repeated executions, from the entry's counters (the records may hold fewer, see MAX_CLAIM_RECORDS). */
  repeated: number;
  /** Repeated executions the counters know of that have no record, hence no bar and no time. */
  unplaced: number;
}

/**
 * Counted from the entry's counters alone: what the ledger knows even without claim records. A phase that
 * does not wait enters its body once per attempt, so every attempt after the first is a repeat (a
 * takeover or a re-run after a failure) unless it followed a wait; a wait phase's attempts are polls,
 * and only takeovers repeat.
 */
export function repeatedByCounters(entry: Pick<LedgerEntry, "attempts" | "takeovers" | "waits" | "state">, waits: boolean): number {
  if (waits) return entry.takeovers;
  // Every wait but a last one not yet followed by another attempt was followed by a poll.
  const polls = Math.max(0, entry.waits - (entry.state === "WAITING" ? 1 : 0));
  return Math.max(0, entry.attempts - 1 - polls);
}

/** When the entry stopped taking time: its finish, or `now` while it is still going. */
export function entryEnd(entry: Pick<LedgerEntry, "state" | "startedAt" | "finishedAt">, now: number): number {
  if (entry.finishedAt !== undefined) return entry.finishedAt;
  return entry.state === "COMPLETED" ? entry.startedAt : Math.max(now, entry.startedAt);
}

interface Span {
  start: number;
  end: number;
  attempt?: number;
  takeover: boolean;
  ended: ExecutionEnd;
}

function spansOf(entry: LedgerEntry, records: readonly ClaimRecord[], end: number): Span[] {
  // Claims made before the ledger kept records (an entry older than this code) show as one earlier span.
  const all: ClaimRecord[] = records[0] && records[0].at > entry.startedAt ? [{ at: entry.startedAt }, ...records] : [...records];
  const spans: Span[] = [];
  all.forEach((record, i) => {
    const next = all[i + 1];
    const ended: ExecutionEnd = record.end ?? (next ? "crashed" : entry.state === "COMPLETED" ? "completed" : "running");
    const previous = spans[i - 1];
    spans.push({
      start: record.at,
      end: Math.max(record.at, record.endedAt ?? next?.at ?? end),
      ...(record.attempt !== undefined ? { attempt: record.attempt } : {}),
      takeover: record.takeover ?? previous?.ended === "crashed",
      ended,
    });
  });
  return spans;
}

export function executionsOf(entry: LedgerEntry, waits: boolean, now: number): EntryExecutions {
  const { phase, generation } = entry.key;
  const end = entryEnd(entry, now);
  const counted = repeatedByCounters(entry, waits);
  const records = entry.claims ?? [];
  const make = (span: Span, repeated: boolean): PhaseExecution => ({
    phase,
    generation,
    ...(span.attempt !== undefined ? { attempt: span.attempt } : {}),
    start: span.start,
    end: span.end,
    seconds: (span.end - span.start) / 1000,
    repeated,
    takeover: span.takeover,
    ended: span.ended,
  });

  if (records.length === 0) {
    const ended: ExecutionEnd = entry.state === "COMPLETED" ? "completed" : entry.state === "RUNNING" ? "running" : "waited";
    return { executions: [make({ start: entry.startedAt, end, takeover: false, ended }, false)], repeated: counted, unplaced: counted };
  }

  const spans = spansOf(entry, records, end);
  // Polls belong to one execution. In a wait phase only a takeover starts a new one; in any other
  // phase every attempt does, unless it follows one that waited.
  const groups: Span[][] = [];
  for (const span of spans) {
    const group = groups[groups.length - 1];
    const previous = group?.[group.length - 1];
    if (!group || span.takeover || (!waits && previous?.ended !== "waited")) groups.push([span]);
    else group.push(span);
  }
  const executions: PhaseExecution[] = groups.map((group, i) => {
    const first = group[0]!;
    const last = group[group.length - 1]!;
    return make({ ...first, end: last.end, ended: last.ended }, i > 0);
  });
  const placed = executions.filter((e) => e.repeated).length;
  const repeated = Math.max(counted, placed);
  return { executions, repeated, unplaced: repeated - placed };
}
