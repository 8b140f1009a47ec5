/**
 * Pure status computations: what the DVM status becomes when a phase advances, fails or waits.
 * The runner writes the result with a resourceVersion guard; nothing here talks to a cluster.
 */
import { CONDITION, hasBlocker, keepDurable, removeCondition, setCondition } from "./conditions";
import { ITINERARIES, type ItineraryName, isItineraryName, isPhaseName, type PhaseName, phaseSpec, stepOf } from "./itinerary";
import { boundedErrors } from "./limits";
import type { Condition, ConditionCategory, DvmStatus } from "./types";

export interface Position {
  itinerary: ItineraryName;
  phase: PhaseName;
}

/** Where a DVM is, read from its status; a missing or unknown status starts at the first step. */
export function positionOf(status: DvmStatus, migrationType: string | undefined): Position {
  const itinerary: ItineraryName = isItineraryName(status.itinerary)
    ? status.itinerary
    : migrationType === "Rollback"
      ? "VolumeMigrationRollback"
      : "VolumeMigration";
  const steps: readonly PhaseName[] = ITINERARIES[itinerary];
  const phase = isPhaseName(status.phase) && steps.includes(status.phase) ? status.phase : steps[0]!;
  return { itinerary, phase };
}

export function stepLabel(position: Position): string {
  const step = stepOf(position.itinerary, position.phase);
  return step ? `${step.step}/${step.total}` : "";
}

/** Status once `position` is the current step: phase fields, Running/Ready/Succeeded conditions. */
export function enterPhase(status: DvmStatus, position: Position, generation: number, nowIso: string): DvmStatus {
  let conditions: Condition[] = keepDurable(status.conditions ?? []);
  const step = stepLabel(position);
  if (position.phase === "Completed") {
    conditions = removeCondition(conditions, CONDITION.Running);
    conditions = removeCondition(conditions, CONDITION.Ready);
    if (!conditions.some((c) => c.type === CONDITION.Failed)) {
      conditions = setCondition(
        conditions,
        { type: CONDITION.Succeeded, status: "True", category: "Advisory", reason: "Completed", message: "The migration has succeeded", durable: true },
        nowIso,
      );
    }
  } else {
    conditions = setCondition(
      conditions,
      { type: CONDITION.Running, status: "True", category: "Advisory", reason: position.phase, message: `Step: ${step}` },
      nowIso,
    );
    if (!hasBlocker(conditions)) {
      conditions = setCondition(conditions, { type: CONDITION.Ready, status: "True", category: "Required", message: "Direct migration is ready" }, nowIso);
    }
  }
  return {
    ...status,
    phase: position.phase,
    itinerary: position.itinerary,
    step,
    phaseDescription: phaseSpec(position.phase).description,
    observedGeneration: generation,
    startTimestamp: status.startTimestamp ?? nowIso,
    conditions,
  };
}

/** Status when the migration fails in `failedPhase`: errors recorded, Failed condition, failure itinerary. */
export function enterFailure(
  status: DvmStatus,
  failedPhase: PhaseName,
  errors: readonly string[],
  category: ConditionCategory,
  generation: number,
  nowIso: string,
): DvmStatus {
  const allErrors = boundedErrors([...new Set([...(status.errors ?? []), ...errors])]);
  const failed = setCondition(
    status.conditions ?? [],
    {
      type: CONDITION.Failed,
      status: "True",
      category,
      reason: failedPhase,
      message: `The migration failed in phase ${failedPhase}: ${errors.join("; ")}`,
      durable: true,
    },
    nowIso,
  );
  return enterPhase({ ...status, errors: allErrors, conditions: failed }, { itinerary: "VolumeMigrationFailed", phase: "MigrationFailed" }, generation, nowIso);
}

/** The position that follows a completed phase, from the ledger's recorded outcome. */
export function positionAfter(current: Position, result: "advanced" | "failed", nextPhase: PhaseName): Position {
  if (result === "failed") return { itinerary: "VolumeMigrationFailed", phase: nextPhase };
  return { itinerary: current.itinerary, phase: nextPhase };
}
