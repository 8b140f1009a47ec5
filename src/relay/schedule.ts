/**
 * The relay's timing decisions, as pure functions of what it observed. Every delay comes from the
 * itinerary table (src/dvm/itinerary.ts) or from the function's own RunResult; none is invented here.
 */
import { isPhaseName, POLL_REQUEUE_MS, phaseSpec } from "../dvm/itinerary";
import type { RunResult } from "../runner/request";

/** The last forward of one DVM: what it was about and when it started. */
export interface LastForward {
  phase?: string;
  generation?: number;
  deleting?: boolean;
  at: number;
  /** Forwards in a row at this phase, generation and deletion state (1 for the first); absent means 1. */
  inARow?: number;
  /** No event forwards this key again before this (ms): the function's retryAfterMs after a failed attempt. */
  notBefore?: number;
}

/** The part of a DVM that says whether it moved on since the last forward. */
export interface ForwardKey {
  phase?: string;
  generation?: number;
  /** Being deleted: its cleanup runs whatever phase it was in, finished ones included. */
  deleting?: boolean;
}

/** Whether the relay forwards this DVM at all: a finished one only to clean up after its deletion. */
export function needsForwarding(dvm: ForwardKey): boolean {
  return dvm.deleting === true || !isTerminalPhase(dvm.phase);
}

/** A phase the itinerary ends with: nothing to forward, the relay forgets the DVM. */
export function isTerminalPhase(phase: string | undefined): boolean {
  return isPhaseName(phase) && phaseSpec(phase).terminal === true;
}

/**
 * How often one DVM may be forwarded while it stays in the same phase and generation: the phase's
 * requeue delay. A DVM without a phase is about to run Started; a phase the itinerary does not know is
 * the function's to judge, and is polled no faster than a wait phase.
 */
export function minForwardIntervalMs(phase: string | undefined): number {
  if (phase === undefined) return phaseSpec("Started").requeueMs;
  return isPhaseName(phase) ? phaseSpec(phase).requeueMs : POLL_REQUEUE_MS;
}

/** Whether a DVM is still where the last forward found it: same phase, generation and deletion state. */
export function sameForwardKey(current: ForwardKey, last: ForwardKey | undefined): boolean {
  return last !== undefined && last.phase === current.phase && last.generation === current.generation && Boolean(last.deleting) === Boolean(current.deleting);
}

/**
 * The spacing of forwards at one key: the phase's requeue delay, doubled for every forward in a row that
 * did not move the DVM, up to the poll delay of a waiting phase. A non-waiting phase (100 ms) whose body
 * runs long, or fails, is driven by its own pods' events: without this, every event would invoke the
 * function every 100 ms, and in the relay's default Event mode the function's "busy, retry after N ms"
 * is never seen.
 */
export function repeatIntervalMs(phase: string | undefined, inARow: number): number {
  const base = minForwardIntervalMs(phase);
  return Math.min(Math.max(base, POLL_REQUEUE_MS), base * 2 ** Math.min(Math.max(0, inARow - 1), 20));
}

/**
 * How long to hold a trigger (DVM event, owned pod event, resync) before forwarding.
 * A new phase or generation is progress (or a new spec) and goes at once. Anything else, typically a
 * status-only change that the function itself wrote while waiting, or an owned pod's heartbeat, waits
 * until the key's spacing (repeatIntervalMs) has passed since the last forward, and after a failed
 * attempt until the function's own retry delay. Keying on resourceVersion instead would let a function
 * that patches status on every "not yet" drive itself in a hot loop.
 */
export function forwardDelay(now: number, current: ForwardKey, last: LastForward | undefined): number {
  if (!last || !sameForwardKey(current, last)) return 0;
  const until = Math.max(last.at + repeatIntervalMs(current.phase, last.inARow ?? 1), last.notBefore ?? 0);
  return Math.max(0, until - now);
}

export type FollowUp =
  /** Forward again after `afterMs` unless an event makes it sooner. */
  | { kind: "requeue"; afterMs: number; why: string }
  /** The migration is over or the DVM is gone: drop everything about it. */
  | { kind: "forget"; why: string }
  /** Nothing scheduled: the next watch event (the phase change) or the periodic resync drives it. */
  | { kind: "none" };

/**
 * What to schedule after a forward. The function's RunResult is exact when the transport returns one;
 * a fire-and-forget transport returns nothing, and a waiting phase is then polled at its requeue delay.
 */
export function followUpAfter(result: RunResult | undefined, currentPhase: string | undefined): FollowUp {
  if (result) {
    switch (result.kind) {
      case "advanced":
      case "waiting":
      case "duplicate":
        return { kind: "requeue", afterMs: result.requeueAfterMs, why: `${result.kind} ${result.phase}` };
      case "busy":
      case "retry":
        return { kind: "requeue", afterMs: result.retryAfterMs, why: `${result.kind} ${result.phase}` };
      case "finished":
        return { kind: "forget", why: "finished" };
      case "gone":
        return { kind: "forget", why: "gone" };
      case "stopped":
        return { kind: "forget", why: "stopped" };
      default: {
        const unexpected: never = result;
        throw new Error(`unknown RunResult ${JSON.stringify(unexpected)}`);
      }
    }
  }
  if (isTerminalPhase(currentPhase)) return { kind: "forget", why: `phase ${currentPhase}` };
  if (isPhaseName(currentPhase) && phaseSpec(currentPhase).waits) {
    return { kind: "requeue", afterMs: phaseSpec(currentPhase).requeueMs, why: `poll ${currentPhase}` };
  }
  return { kind: "none" };
}

/** The phase an invocation's result said the DVM moved to, and the resourceVersion the relay had then. */
export interface ReportedPhase {
  phase: string;
  basedOn: string;
}

/**
 * The phase a request names (the runner's guess of which ledger entry to claim first; it decides from its
 * own read): the one the last result reported, until an event newer than that forward arrives, since the
 * watch event of the move may still be on its way; otherwise the phase last observed.
 */
export function requestPhase(observed: { phase?: string; resourceVersion: string }, reported: ReportedPhase | undefined): { phase?: string } {
  const phase = reported?.basedOn === observed.resourceVersion ? reported.phase : observed.phase;
  return phase !== undefined ? { phase } : {};
}
