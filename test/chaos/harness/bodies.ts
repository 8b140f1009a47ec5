/**
 * The real phase bodies, wrapped so that every entry is reported before the body runs and every exit
 * after it returns. The report goes through `hooks` (a Tally in this process, IPC from a worker), so a
 * body killed midway still counts as entered. `crashAfter` decides whether the process dies right after
 * a body returned: its side effects are done, the ledger has not recorded the completion.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { performance } from "node:perf_hooks";
import { EXECUTABLE_PHASES, type ExecutablePhaseName, phaseSpec } from "../../../src/dvm/itinerary";
import type { DirectVolumeMigration } from "../../../src/dvm/types";
import { PHASE_BODIES } from "../../../src/phases";
import type { PhaseBody, PhaseContext, PhaseOutcome } from "../../../src/phases/types";
import type { BodyEntry, BodyOutcome, Tally } from "./tally";

export type Bodies = Record<ExecutablePhaseName, PhaseBody>;

export interface BodyHooks {
  enter(entry: Omit<BodyEntry, "exitedAt" | "outcome" | "error">): Promise<string> | string;
  exit(key: string, outcome: BodyOutcome, error?: string): Promise<void> | void;
  /** True: die now (after reporting "crashed"). */
  crashAfter?(ctx: PhaseContext, outcome: PhaseOutcome): boolean;
  /** How to die: SIGKILL in a worker; a thrown SimulatedCrash for the in-process baseline. */
  crash?(ctx: PhaseContext): Promise<never>;
  /** Runs inside the counted body, before the real one: a slow stretch (see slowBodyPlan). */
  stall?(ctx: PhaseContext): Promise<void>;
  /** An outcome to return instead of running the real body (an injected failure, see failurePlan). */
  inject?(ctx: PhaseContext): PhaseOutcome | undefined;
}

/** Per invocation: time spent in bodies, and a stale object to serve as the invocation's first read. */
export interface InvocationScope {
  bodyMs: number;
  staleDvm?: DirectVolumeMigration;
}

export const invocationScope = new AsyncLocalStorage<InvocationScope>();

/** The baseline's crash: the reconcile stops right after the body, before any status write. */
export class SimulatedCrash extends Error {
  override readonly name = "SimulatedCrash";
}

export function countedBodies(hooks: BodyHooks, real: Bodies = PHASE_BODIES): Bodies {
  const wrap =
    (phase: ExecutablePhaseName): PhaseBody =>
    async (ctx) => {
      const key = await hooks.enter({ uid: ctx.dvm.uid, phase, generation: ctx.dvm.generation, attempt: ctx.attempt, enteredAt: Date.now() });
      const started = performance.now();
      const scope = invocationScope.getStore();
      let outcome: PhaseOutcome;
      try {
        await hooks.stall?.(ctx);
        outcome = hooks.inject?.(ctx) ?? (await real[phase](ctx));
      } catch (error) {
        if (scope) scope.bodyMs += performance.now() - started;
        await hooks.exit(key, "threw", error instanceof Error ? error.message : String(error));
        throw error;
      }
      if (scope) scope.bodyMs += performance.now() - started;
      if (hooks.crashAfter?.(ctx, outcome) && hooks.crash) {
        await hooks.exit(key, "crashed");
        return hooks.crash(ctx);
      }
      await hooks.exit(key, outcome.kind);
      return outcome;
    };
  return Object.fromEntries(EXECUTABLE_PHASES.map((phase) => [phase, wrap(phase)])) as Bodies;
}

/**
 * Crash after these phases on their first `attempts` attempts (default 1): with 2 the takeover's body is
 * killed too, and the third attempt completes.
 */
export function crashPlan(phases: readonly ExecutablePhaseName[], attempts = 1): (ctx: PhaseContext, outcome: PhaseOutcome) => boolean {
  const wanted = new Set<string>(phases.filter((p) => !phaseSpec(p).waits));
  return (ctx, outcome) => wanted.has(ctx.phase) && ctx.attempt <= attempts && outcome.kind !== "wait";
}

/**
 * These phases fail for good instead of running (the final sync failing, say), so the failure itinerary
 * runs: cleanup, then the restore of what the CutOver quiesced.
 */
export function failurePlan(phases: readonly ExecutablePhaseName[]): (ctx: PhaseContext) => PhaseOutcome | undefined {
  const wanted = new Set<string>(phases);
  return (ctx) => (wanted.has(ctx.phase) ? { kind: "fail", category: "Critical", errors: [`${ctx.phase}: failure injected by the chaos harness`] } : undefined);
}

/** Non-waiting phases with side effects on both clusters: secrets (and PKI) on three, pods on one. */
export const CRASH_PHASES: readonly ExecutablePhaseName[] = ["CreateRsyncConfig", "CreateRsyncTransferPods"];

/**
 * Slow bodies (in process, where nothing but the runner bounds a body):
 *   - OVERRUN_PHASE, on its first attempt, stalls for three leases without renewing. The stall ends
 *     early only when the body's lease signal aborts (a well-behaved body passes the signal to its slow
 *     call), so without the runner's deadline it would outlive its lease and a second invocation would
 *     take the phase over while it still runs: an overlap.
 *   - HEARTBEAT_PHASE, on its first attempt, works for two leases and renews its lease every quarter of
 *     one (ctx.lease.renew()), so it completes on that attempt and nobody takes it over. In a host with
 *     a function timeout (the worker, like Lambda) it works at most `maxWorkMs`, or the host kills it.
 */
export const OVERRUN_PHASE: ExecutablePhaseName = "CreateStunnelConfig";
export const HEARTBEAT_PHASE: ExecutablePhaseName = "CreatePVProgressCRs";

export function slowBodyPlan(leaseMs: number, maxWorkMs = Number.POSITIVE_INFINITY): (ctx: PhaseContext) => Promise<void> {
  return async (ctx) => {
    if (ctx.attempt !== 1 || !ctx.lease) return;
    if (ctx.phase === OVERRUN_PHASE) {
      await abortableSleep(3 * leaseMs, ctx.lease.signal);
    } else if (ctx.phase === HEARTBEAT_PHASE) {
      for (let worked = 0; worked < Math.min(2 * leaseMs, maxWorkMs); worked += leaseMs / 4) {
        await abortableSleep(leaseMs / 4, ctx.lease.signal);
        await ctx.lease.renew();
      }
    }
  };
}

/** Sleeps `ms`, or rejects with the signal's reason as soon as it aborts. */
function abortableSleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

/** Hooks that record into a Tally of this process. */
export function tallyHooks(tally: Tally): BodyHooks {
  return {
    enter: (entry) => tally.enter(entry),
    exit: (key, outcome, error) => tally.exit(key, outcome, Date.now(), error),
  };
}
