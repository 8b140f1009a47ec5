/**
 * The relay's timing decisions, as pure functions of what it observed. Every delay comes from the
 * itinerary table (src/dvm/itinerary.ts) or from the function's own RunResult; none is invented here.
 */
import type { RunResult } from "../contracts/request";
import { FAST_REQUEUE_MS, isPhaseName, type PhaseName, POLL_REQUEUE_MS, phaseSpec } from "../dvm/itinerary";

/** The last forward of one DVM: what it was about and when it started. */
export interface LastForward {
  phase?: string;
  generation?: number;
  deleting?: boolean;
  at: number;
  /** Forwards in a row at this phase, generation and deletion state (1 for the first); absent means 1. */
  inARow?: number;
  /** Of those, the latest ones in a row that came before the poll spacing had passed (pod changes); absent means 0. */
  earlyInARow?: number;
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
 * requeue delay, `pollMs` for a wait phase. A DVM without a phase is about to run Started; a phase the
 * itinerary does not know is the function's to judge, and is polled no faster than a wait phase.
 */
export function minForwardIntervalMs(phase: string | undefined, pollMs: number = POLL_REQUEUE_MS): number {
  if (phase === undefined) return phaseSpec("Started").requeueMs;
  if (!isPhaseName(phase)) return pollMs;
  return isWaitPhase(phase) ? pollMs : phaseSpec(phase).requeueMs;
}

/** A phase that polls a condition (a pod Running, a pod finished, objects gone). */
export function isWaitPhase(phase: string | undefined): phase is PhaseName {
  return isPhaseName(phase) && phaseSpec(phase).waits;
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
export function repeatIntervalMs(phase: string | undefined, inARow: number, pollMs: number = POLL_REQUEUE_MS): number {
  const base = minForwardIntervalMs(phase, pollMs);
  return Math.min(Math.max(base, pollMs), base * 2 ** Math.min(Math.max(0, inARow - 1), 20));
}

/**
 * The spacing of forwards that a change of one of the migration's pods sets off while its DVM is in a
 * wait phase: the change is what the phase waits for (a server pod Running, a client pod finished, a pod
 * gone), written by a kubelet or the API server and never by the function's "not yet", so it goes after
 * the fast requeue delay, not the poll's. The queue coalesces a burst into one forward, and a change that
 * arrives while a forward is in flight is forwarded again once that forward ends (src/relay/queue.ts).
 * The spacing doubles for each forward in a row that came before the poll spacing had passed, so pods
 * that change without end (a tenant can label its own pods as a DVM's) forward it about once a second
 * (100, 200 ... 1,600 ms, then the poll), not every 100 ms.
 */
export const POD_CHANGE_SPACING_MS = FAST_REQUEUE_MS;

/** The spacing of the next pod-driven forward in a wait phase, after `earlyInARow` early ones. */
export function podChangeIntervalMs(earlyInARow: number, pollMs: number = POLL_REQUEUE_MS): number {
  return Math.min(pollMs, POD_CHANGE_SPACING_MS * 2 ** Math.min(Math.max(0, earlyInARow), 20));
}

/** The record of a forward that starts `now` at `key`, counting on from the previous one. */
export function recordForward(key: ForwardKey, previous: LastForward | undefined, now: number, pollMs: number = POLL_REQUEUE_MS): LastForward {
  if (!previous || !sameForwardKey(key, previous)) return { ...key, at: now, inARow: 1 };
  const early = now - previous.at < repeatIntervalMs(key.phase, previous.inARow ?? 1, pollMs);
  return { ...key, at: now, inARow: (previous.inARow ?? 1) + 1, ...(early ? { earlyInARow: (previous.earlyInARow ?? 0) + 1 } : {}) };
}

/** What set a trigger off, and the poll delay of wait phases. */
export interface TriggerContext {
  /** A change of a pod the migration owns (on any watched cluster). */
  podChange?: boolean;
  /** That change is a milestone (src/relay/podPhases.ts): it goes after POD_CHANGE_SPACING_MS, never doubled. */
  podMilestone?: boolean;
  /** The poll delay of a wait phase; default the itinerary's POLL_REQUEUE_MS. */
  pollMs?: number;
}

/**
 * How long to hold a trigger (DVM event, owned pod or progress record event, resync) before forwarding.
 * A new phase or generation is progress (or a new spec) and goes at once. So does, after
 * POD_CHANGE_SPACING_MS (doubling while early forwards follow each other, never for a pod milestone), a
 * pod change in a wait phase: it is what the wait waits for. Anything else,
 * typically a status-only change or a progress record that the function itself wrote while waiting,
 * waits until the key's spacing (repeatIntervalMs) has passed since the last forward. After a failed
 * attempt every trigger waits for the function's own retry delay. Keying on resourceVersion instead would
 * let a function that patches status on every "not yet" drive itself in a hot loop.
 */
export function forwardDelay(now: number, current: ForwardKey, last: LastForward | undefined, context: TriggerContext = {}): number {
  if (!last || !sameForwardKey(current, last)) return 0;
  const until = Math.max(last.at + spacingMs(current, last, context), last.notBefore ?? 0);
  return Math.max(0, until - now);
}

/** The spacing forwardDelay keeps after the last forward at the same key. */
function spacingMs(current: ForwardKey, last: LastForward, context: TriggerContext): number {
  if (!context.podChange || !isWaitPhase(current.phase)) return repeatIntervalMs(current.phase, last.inARow ?? 1, context.pollMs);
  return context.podMilestone ? POD_CHANGE_SPACING_MS : podChangeIntervalMs(last.earlyInARow ?? 0, context.pollMs);
}

export type FollowUp =
  /** Forward again after `afterMs` unless an event makes it sooner. */
  | { kind: "requeue"; afterMs: number; why: string }
  /** The migration is over or the DVM is gone: drop everything about it. */
  | { kind: "forget"; why: string }
  /** Nothing scheduled: the next watch event (the phase change) or the periodic resync drives it. */
  | { kind: "none" };

/**
 * After an early (pod-driven) forward in a wait phase that the relay cannot see the answer of (Event mode),
 * check again this much later: the forward may have met the previous invocation still holding the phase
 * ("busy", unseen), and no further event may come. 1 s, then 2 s, then the poll: a pod change costs at
 * most two extra invocations, and the wait ends within about a second of it, not on the poll.
 */
export const EVENT_MODE_RECHECK_MS = 1_000;

export function eventModeRecheckMs(earlyInARow: number, pollMs: number = POLL_REQUEUE_MS): number {
  return Math.min(pollMs, EVENT_MODE_RECHECK_MS * 2 ** Math.min(Math.max(0, earlyInARow - 1), 20));
}

/** What followUpAfter needs to know of the forward besides its result. */
export interface ForwardFacts {
  /** The poll delay of wait phases; default the itinerary's. */
  pollMs?: number;
  /** The forward's earlyInARow (recordForward): more than 0 when it came before the poll spacing. */
  earlyInARow?: number;
}

/**
 * What to schedule after a forward. The function's RunResult is exact when the transport returns one;
 * a fire-and-forget transport returns nothing, and a waiting phase is then polled at its requeue delay,
 * or rechecked sooner after an early forward (eventModeRecheckMs).
 */
export function followUpAfter(result: RunResult | undefined, currentPhase: string | undefined, facts: ForwardFacts = {}): FollowUp {
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
  if (isWaitPhase(currentPhase)) {
    const pollMs = facts.pollMs ?? phaseSpec(currentPhase).requeueMs;
    const early = facts.earlyInARow ?? 0;
    if (early > 0) return { kind: "requeue", afterMs: eventModeRecheckMs(early, pollMs), why: `recheck ${currentPhase} after a pod change` };
    return { kind: "requeue", afterMs: pollMs, why: `poll ${currentPhase}` };
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
