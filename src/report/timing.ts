/**
 * The phase timing report of one DVM, computed from its ledger history alone: one row per phase in the
 * order of the itinerary table, the time each took and its share of the total, and the executions that
 * were repeated and what they cost. Pure: the CLI reads the ledger and prints the result.
 */
import { ITINERARIES, type ItineraryName, PHASES, type PhaseName, phaseSpec, stepOf } from "../dvm/itinerary";
import type { LedgerEntry, LedgerState } from "../ledger/types";
import { definedFields } from "../lib/definedFields";
import { entryEnd, executionsOf, type PhaseExecution } from "./executions";

export interface TimingRow {
  phase: PhaseName;
  generation: number;
  /** The itinerary the step number belongs to (the failure itinerary for its own phases). */
  itinerary: ItineraryName | undefined;
  step: number | undefined;
  totalSteps: number | undefined;
  description: string;
  /** false: a phase of the itinerary with no ledger entry (not reached, or the migration failed earlier). */
  ran: boolean;
  state?: LedgerState;
  startedAt?: number;
  finishedAt?: number;
  elapsedSeconds?: number;
  /** Share of the sum of all rows' elapsed time, rounded to 0.1 so that the rows add up to exactly 100. */
  percent?: number;
  attempts: number;
  takeovers: number;
  waits: number;
  failures: number;
  repeatedExecutions: number;
  /** Time spent in repeated executions that have a record; see PhaseExecution. */
  repeatedSeconds: number;
  outcome?: "advanced" | "failed";
  /** Bytes the phase moved (rsync's own count, summed over the PVCs its recorded status names). */
  bytesTransferred?: number;
  lastError?: string;
  flags: string[];
  executions: PhaseExecution[];
}

export interface TimingReport {
  uid: string | undefined;
  itinerary: ItineraryName;
  rows: TimingRow[];
  /** Sum of the rows' elapsed time: the base of the percentages. */
  totalSeconds: number;
  /** First claim to last finish (or now): includes the time between phases. */
  wallSeconds: number;
  startedAt?: number;
  finishedAt?: number;
  executions: number;
  repeated: { count: number; seconds: number; unplaced: number };
  /** Still running: some entry has no completion yet. */
  running: boolean;
  /** Bytes moved by all phases (rows' bytesTransferred). */
  bytesTransferred: number;
}

/** The bytes of the PVCs a completed phase recorded (RunRsyncOperations' rsyncOperations). */
function bytesOf(entry: LedgerEntry): number | undefined {
  const operations = entry.outcome?.statusUpdate?.rsyncOperations;
  if (!operations?.some((o) => o.bytesTransferred !== undefined)) return undefined;
  return operations.reduce((sum, o) => sum + (o.bytesTransferred ?? 0), 0);
}

export interface TimingReportInput {
  entries: readonly LedgerEntry[];
  /** The DVM's main itinerary (VolumeMigration or VolumeMigrationRollback); guessed from the entries when absent. */
  itinerary?: ItineraryName;
  now: number;
}

const FAILURE_ITINERARY: ItineraryName = "VolumeMigrationFailed";

/**
 * Only a forward migration creates destination objects; otherwise the entries cannot tell the two apart.
 * @internal exported for its tests
 */
export function guessItinerary(entries: readonly LedgerEntry[]): ItineraryName {
  const forwardOnly = ITINERARIES.VolumeMigration.filter((p) => !(ITINERARIES.VolumeMigrationRollback as readonly string[]).includes(p));
  const rollbackOnly = entries.length > 0 && !entries.some((e) => (forwardOnly as readonly string[]).includes(e.key.phase));
  const transferred = entries.some((e) => e.key.phase === "CreateRsyncEndpoint");
  return rollbackOnly && transferred ? "VolumeMigrationRollback" : "VolumeMigration";
}

/**
 * Rounds shares to tenths so they add up to exactly 100.0 (largest remainder).
 * @internal exported for its tests
 */
export function roundShares(values: readonly number[]): number[] {
  const total = values.reduce((a, b) => a + b, 0);
  if (!(total > 0)) return values.map(() => 0);
  const tenths = values.map((v) => (v / total) * 1000);
  const floors = tenths.map(Math.floor);
  let missing = 1000 - floors.reduce((a, b) => a + b, 0);
  const byRemainder = tenths.map((t, i) => ({ i, r: t - Math.floor(t) })).sort((a, b) => b.r - a.r || a.i - b.i);
  for (const { i } of byRemainder) {
    if (missing <= 0) break;
    floors[i]! += 1;
    missing -= 1;
  }
  return floors.map((f) => f / 10);
}

function flagsOf(row: Omit<TimingRow, "flags">): string[] {
  const flags: string[] = [];
  if (!row.ran) return ["not run"];
  if (row.repeatedExecutions > 0) flags.push(`repeated x${row.repeatedExecutions}`);
  if (row.takeovers > 0) flags.push(`takeover x${row.takeovers}`);
  if (row.failures > 0) flags.push(`retried x${row.failures}`);
  if (row.outcome === "failed") flags.push("failed");
  if (row.state && row.state !== "COMPLETED") flags.push(row.state === "RUNNING" ? "running" : row.state.toLowerCase());
  return flags;
}

function place(phase: PhaseName, main: ItineraryName): { itinerary: ItineraryName | undefined; step: number | undefined; total: number | undefined } {
  for (const itinerary of [main, FAILURE_ITINERARY]) {
    const at = stepOf(itinerary, phase);
    if (at) return { itinerary, step: at.step, total: at.total };
  }
  return { itinerary: undefined, step: undefined, total: undefined };
}

function rowOf(phase: PhaseName, generation: number, main: ItineraryName, entry: LedgerEntry | undefined, now: number): Omit<TimingRow, "percent" | "flags"> {
  const { itinerary, step, total } = place(phase, main);
  const base = {
    phase,
    generation,
    itinerary,
    step,
    totalSteps: total,
    description: PHASES[phase].description,
    attempts: entry?.attempts ?? 0,
    takeovers: entry?.takeovers ?? 0,
    waits: entry?.waits ?? 0,
    failures: entry?.failures ?? 0,
  };
  if (!entry) return { ...base, ran: false, repeatedExecutions: 0, repeatedSeconds: 0, executions: [] };
  const end = entryEnd(entry, now);
  const { executions, repeated } = executionsOf(entry, PHASES[phase].waits, now);
  return {
    ...base,
    ran: true,
    state: entry.state,
    startedAt: entry.startedAt,
    ...definedFields({ finishedAt: entry.finishedAt }),
    elapsedSeconds: entry.state === "COMPLETED" && entry.elapsedSeconds !== undefined ? entry.elapsedSeconds : (end - entry.startedAt) / 1000,
    repeatedExecutions: repeated,
    repeatedSeconds: executions.filter((e) => e.repeated).reduce((sum, e) => sum + e.seconds, 0),
    ...definedFields({ outcome: entry.outcome?.result, bytesTransferred: bytesOf(entry), lastError: entry.lastError }),
    executions,
  };
}

/**
 * Rows follow the itinerary table: the main itinerary's phases, then the failure itinerary's if any of
 * them ran, generation by generation. Phases of the latest generation that have no entry are listed as
 * "not run"; an entry of a phase outside both itineraries comes last.
 */
export function buildTimingReport(input: TimingReportInput): TimingReport {
  const { entries, now } = input;
  const main = input.itinerary && input.itinerary !== FAILURE_ITINERARY ? input.itinerary : guessItinerary(entries);
  const generations = [...new Set(entries.map((e) => e.key.generation))].sort((a, b) => a - b);
  const latest = generations[generations.length - 1];
  const executable = (itinerary: ItineraryName) => (ITINERARIES[itinerary] as readonly PhaseName[]).filter((p) => !phaseSpec(p).terminal);
  const rows: Omit<TimingRow, "percent" | "flags">[] = [];
  const used = new Set<LedgerEntry>();
  for (const generation of generations) {
    const ofGeneration = entries.filter((e) => e.key.generation === generation);
    const entryFor = (phase: PhaseName) => ofGeneration.find((e) => e.key.phase === phase);
    const failureRan = executable(FAILURE_ITINERARY).some((p) => entryFor(p));
    const order = [...executable(main), ...(failureRan ? executable(FAILURE_ITINERARY) : [])];
    for (const phase of order) {
      const entry = entryFor(phase);
      if (!entry && generation !== latest) continue;
      if (entry) used.add(entry);
      rows.push(rowOf(phase, generation, main, entry, now));
    }
  }
  for (const entry of entries) if (!used.has(entry)) rows.push(rowOf(entry.key.phase, entry.key.generation, main, entry, now));

  const shares = roundShares(rows.map((r) => r.elapsedSeconds ?? 0));
  const totalSeconds = rows.reduce((sum, r) => sum + (r.elapsedSeconds ?? 0), 0);
  const finished: TimingRow[] = rows.map((row, i) => {
    const withPercent = row.ran && totalSeconds > 0 ? { ...row, percent: shares[i]! } : row;
    return { ...withPercent, flags: flagsOf(withPercent) };
  });
  const ran = entries.length > 0;
  const startedAt = ran ? Math.min(...entries.map((e) => e.startedAt)) : undefined;
  const finishedAt = ran ? Math.max(...entries.map((e) => entryEnd(e, now))) : undefined;
  const executions = finished.flatMap((r) => r.executions);
  return {
    uid: entries[0]?.key.uid,
    itinerary: main,
    rows: finished,
    totalSeconds,
    wallSeconds: startedAt !== undefined && finishedAt !== undefined ? (finishedAt - startedAt) / 1000 : 0,
    ...definedFields({ startedAt, finishedAt }),
    executions: executions.length,
    repeated: {
      count: finished.reduce((sum, r) => sum + r.repeatedExecutions, 0),
      seconds: finished.reduce((sum, r) => sum + r.repeatedSeconds, 0),
      unplaced: finished.reduce((sum, r) => sum + (r.repeatedExecutions - r.executions.filter((e) => e.repeated).length), 0),
    },
    running: entries.some((e) => e.state !== "COMPLETED"),
    bytesTransferred: finished.reduce((sum, r) => sum + (r.bytesTransferred ?? 0), 0),
  };
}
