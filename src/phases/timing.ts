import { CONDITION, type ConditionInput, findCondition } from "../dvm/conditions";
import type { DvmStatus } from "../dvm/types";
import type { Clock } from "../lib/clock";

/**
 * When the current phase started: the Running condition changes with every phase, so its transition
 * time marks the start (as upstream). Drives the "pending for more than N minutes" warnings.
 */
export function runningSince(status: DvmStatus, clock: Clock): number {
  const running = findCondition(status.conditions, CONDITION.Running);
  const at = running ? Date.parse(running.lastTransitionTime) : NaN;
  return Number.isFinite(at) ? at : clock.now();
}

/** A wait phase's default patience before it warns (upstream's 3 minutes for pods and endpoints). */
export const WARN_AFTER_MS = 3 * 60_000;

/**
 * The one "waiting too long" rule of the wait phases: the warning, as a Warn condition, once the current
 * phase has run for longer than `afterMs`; nothing before. Re-asserted on every poll, so it clears when
 * the phase moves on.
 */
export function warnWhenWaitingLong(
  ctx: { status: DvmStatus; clock: Clock },
  warning: Pick<ConditionInput, "type" | "reason" | "message">,
  afterMs = WARN_AFTER_MS,
): ConditionInput[] {
  return ctx.clock.now() - runningSince(ctx.status, ctx.clock) > afterMs ? [{ ...warning, status: "True", category: "Warn" }] : [];
}
