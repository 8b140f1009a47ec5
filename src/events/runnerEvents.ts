/**
 * Outgoing events wired to the phase runner, without changing it:
 *   - phaseEventsHook is the runner's onResult: when an invocation completed a phase it asks the
 *     publisher to read the DVM's ledger history (one Query per completed phase; the events need the
 *     ledger's timings) and queue phase.completed, plus migration.succeeded/failed after the last phase.
 *     It returns at once and never throws, so it can neither slow nor fail the phase.
 *   - withEventFlush wraps a runner so every invocation ends by flushing the publisher, bounded by a
 *     short deadline: a Lambda container is frozen as soon as the handler returns.
 */
import type { ReconcileRequest, RunResult, RunStats } from "../contracts/request";
import type { LedgerEntry } from "../ledger";
import { errorText } from "../lib/errorMessage";
import { type Logger, silentLogger } from "../lib/log";
import type { RunnerOptions, RunOptions } from "../runner/runner";
import { completionEvents, DEFAULT_EVENT_SOURCE, type DvmRef, eventsWanted } from "./outgoing";
import type { EventPublisher, FlushResult } from "./publisher";

export interface PhaseEventsOptions {
  publisher: Pick<EventPublisher, "publishLater">;
  /** The ledger's history of one DVM (PhaseLedger.history). */
  history: (uid: string) => Promise<LedgerEntry[]>;
  /** `source` of the events; default "dvm-serverless". */
  source?: string;
  log?: Logger;
}

export function phaseEventsHook(options: PhaseEventsOptions): NonNullable<RunnerOptions["onResult"]> {
  const log = options.log ?? silentLogger;
  const source = options.source ?? DEFAULT_EVENT_SOURCE;
  return (result, _stats, request) => {
    try {
      if (!eventsWanted(result)) return;
      const dvm: DvmRef = { namespace: request.namespace, name: request.name, uid: request.uid };
      const phase = result.phase;
      options.publisher.publishLater(async () => {
        const events = completionEvents(phase, dvm, await options.history(dvm.uid), source);
        if (events.length === 0) log.warn("no completed ledger entry for the phase; no event sent", { phase, uid: dvm.uid });
        return events;
      });
    } catch (error) {
      log.warn("could not queue the phase's events", { error: errorText(error) });
    }
  };
}

export interface RunnerLike {
  runWithStats(request: ReconcileRequest, options?: RunOptions): Promise<{ result: RunResult; stats: RunStats }>;
}

/** What functions/phase.ts needs of a runner. */
export interface FlushingRunner extends RunnerLike {
  run(request: ReconcileRequest): Promise<RunResult>;
}

export interface EventFlushOptions {
  publisher: Pick<EventPublisher, "flush">;
  /** How long an invocation waits for its events at most. */
  deadlineMs: number;
  /** After every flush (metrics). Must not throw; errors are swallowed anyway. */
  afterFlush?: (result: FlushResult) => void;
  log?: Logger;
}

export function withEventFlush(runner: RunnerLike, options: EventFlushOptions): FlushingRunner {
  const log = options.log ?? silentLogger;
  const flush = async () => {
    try {
      const result = await options.publisher.flush(options.deadlineMs);
      options.afterFlush?.(result);
    } catch (error) {
      log.warn("flushing events failed; the invocation goes on", { error: errorText(error) });
    }
  };
  const runWithStats = async (request: ReconcileRequest, runOptions?: RunOptions) => {
    try {
      return await runner.runWithStats(request, runOptions);
    } finally {
      await flush();
    }
  };
  return { runWithStats, run: async (request) => (await runWithStats(request)).result };
}
