import type { Clock } from "../clock";
import { CONDITION, findCondition } from "../dvm/conditions";
import type { DvmStatus } from "../dvm/types";

/**
 * When the current phase started: the Running condition changes with every phase, so its transition
 * time marks the start (as upstream). Drives the "pending for more than N minutes" warnings.
 */
export function runningSince(status: DvmStatus, clock: Clock): number {
  const running = findCondition(status.conditions, CONDITION.Running);
  const at = running ? Date.parse(running.lastTransitionTime) : NaN;
  return Number.isFinite(at) ? at : clock.now();
}
