/**
 * The phase runner: one invocation executes at most one phase of one DVM.
 *   1. read the DVM fresh (the request's copy is never trusted);
 *   2. claim (uid, phase, generation) in the ledger: already completed means do not run the body again,
 *      only repair a lagging status; held by a live lease means stop;
 *   3. run the phase body;
 *   4. record the outcome in the ledger, conditioned on still holding the claim;
 *   5. write the status guarded by the resourceVersion read in step 1; a conflict means re-read, never overwrite.
 */
import { systemClock, type Clock } from "../clock";
import { CONDITION, setCondition } from "../dvm/conditions";
import { nextPhase, phaseSpec, type ExecutablePhaseName, type PhaseName } from "../dvm/itinerary";
import { enterFailure, enterPhase, positionAfter, positionOf, type Position } from "../dvm/status";
import { parseDvmSpec, type Condition, type DirectVolumeMigration, type DvmSpec, type DvmStatus, type SpecParseResult } from "../dvm/types";
import { formatIssue } from "../issues";
import type { DvmStore } from "../kube/dvmStore";
import { KubeApiError } from "../kube/errors";
import { unreachableCluster, type ClusterResolver } from "../kube/resolver";
import { LostClaimError, type Claim, type PhaseLedger, type PhaseOutcome as RecordedOutcome } from "../ledger";
import { silentLogger, type Logger } from "../log";
import { PHASE_BODIES } from "../phases";
import { MigrationInputError, type MigrationClusters, type PhaseBody, type PhaseContext, type PhaseOutcome, type StatusUpdate } from "../phases/types";
import { volumePairs } from "../phases/volumes";
import type { ReconcileRequest, RunResult, RunStats } from "./request";

export interface RunnerOptions {
  store: DvmStore;
  ledger: PhaseLedger;
  clusters: ClusterResolver;
  /** Phase bodies; the default is the real ones. Tests may wrap them to count executions. */
  bodies?: Record<ExecutablePhaseName, PhaseBody>;
  clock?: Clock;
  log?: Logger;
  /** How long a claim is exclusive. Longer than the function timeout, so a live holder is never overtaken. */
  leaseMs?: number;
  /** Cap of the exponential backoff after transient errors. */
  maxRetryDelayMs?: number;
  /** Called after every invocation, for metrics and outgoing events. */
  onResult?: (result: RunResult, stats: RunStats, dvm: { namespace: string; name: string; uid: string }) => void;
}

export const DEFAULT_LEASE_MS = 120_000;
const STATUS_WRITE_ATTEMPTS = 5;

interface Transition {
  result: "advanced" | "failed";
  nextPhase: PhaseName;
  errors?: string[];
}

export class PhaseRunner {
  private readonly bodies: Record<ExecutablePhaseName, PhaseBody>;
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly leaseMs: number;
  private readonly maxRetryDelayMs: number;

  constructor(private readonly options: RunnerOptions) {
    this.bodies = options.bodies ?? PHASE_BODIES;
    this.clock = options.clock ?? systemClock;
    this.log = options.log ?? silentLogger;
    this.leaseMs = options.leaseMs ?? DEFAULT_LEASE_MS;
    this.maxRetryDelayMs = options.maxRetryDelayMs ?? 30_000;
  }

  async run(request: ReconcileRequest): Promise<RunResult> {
    return (await this.runWithStats(request)).result;
  }

  /** Like run(), also returning what the invocation did (for the function handler's metrics). */
  async runWithStats(request: ReconcileRequest): Promise<{ result: RunResult; stats: RunStats }> {
    const startedAt = this.clock.now();
    const stats: RunStats = { durationMs: 0, statusConflicts: 0 };
    const result = await this.runOnce(request, stats);
    stats.durationMs = this.clock.now() - startedAt;
    this.options.onResult?.(result, stats, request);
    return { result, stats };
  }

  private async runOnce(request: ReconcileRequest, stats: RunStats): Promise<RunResult> {
    const { store, ledger } = this.options;
    const fresh = await store.get(request.namespace, request.name);
    if (!fresh || fresh.metadata.uid !== request.uid) return { kind: "gone" };

    const parsed = parseDvmSpec(fresh.spec);
    const position = positionOf(fresh.status, migrationTypeOf(fresh));
    if (position.phase === "Completed") return { kind: "finished", phase: "Completed" };

    const { uid, generation, namespace, name } = fresh.metadata;
    let log = this.log.child({ dvm: `${namespace}/${name}`, uid, phase: position.phase, generation });
    const claimed = await ledger.claim({ uid, phase: position.phase, generation }, { leaseMs: this.leaseMs, dvm: { namespace, name } });

    if (claimed.kind === "held") {
      log.info("phase held by another invocation", { holderAttempt: claimed.attempt });
      return { kind: "busy", phase: position.phase, retryAfterMs: Math.max(0, Math.min(claimed.leaseExpiresAt - this.clock.now(), this.leaseMs)) };
    }
    if (claimed.kind === "completed") {
      // Recorded as done: the body must not run again. The status may lag (a crash between the ledger
      // write and the status write, or a stale request): bring it up to the recorded outcome.
      const repaired = await this.writeTransition(fresh, position, claimed.outcome, undefined, stats);
      log.info("duplicate suppressed", { next: claimed.outcome.nextPhase, statusRepaired: repaired });
      return { kind: "duplicate", phase: position.phase, next: claimed.outcome.nextPhase, statusRepaired: repaired, requeueAfterMs: phaseSpec(claimed.outcome.nextPhase).requeueMs };
    }

    const claim = claimed.claim;
    stats.attempt = claim.attempt;
    stats.takeover = claim.takeover;
    log = log.child({ attempt: claim.attempt });
    if (claim.takeover) log.warn("lease takeover: the previous holder's lease expired before it finished");

    let outcome: PhaseOutcome;
    try {
      const context = await this.context(fresh, parsed, position, claim, log);
      log.info("phase started");
      outcome = await this.bodies[position.phase](context);
    } catch (error) {
      if (error instanceof MigrationInputError) {
        outcome = { kind: "fail", errors: error.errors, category: "Critical" };
      } else {
        return this.retryLater(fresh, position, claim, error, log, stats);
      }
    }

    try {
      return await this.finish(fresh, position, claim, outcome, log, stats);
    } catch (error) {
      if (error instanceof LostClaimError) {
        log.warn("claim lost before completion: another invocation took over", { holderAttempt: error.current?.attempt });
        return { kind: "busy", phase: position.phase, retryAfterMs: 0 };
      }
      throw error;
    }
  }

  private async finish(fresh: DirectVolumeMigration, position: Position, claim: Claim, outcome: PhaseOutcome, log: Logger, stats: RunStats): Promise<RunResult> {
    const { ledger } = this.options;
    switch (outcome.kind) {
      case "advance": {
        const next = nextPhase(position.itinerary, position.phase);
        await ledger.complete(claim, { result: "advanced", nextPhase: next });
        await this.writeTransition(fresh, position, { result: "advanced", nextPhase: next }, outcome.status, stats);
        log.info("phase completed", { next });
        return { kind: "advanced", phase: position.phase, next, requeueAfterMs: phaseSpec(next).requeueMs };
      }
      case "fail": {
        // Cleanup after a failure is best effort: a failing cleanup step records its errors and moves on.
        const inFailure = position.itinerary === "VolumeMigrationFailed";
        const transition: Transition = inFailure
          ? { result: "advanced", nextPhase: nextPhase(position.itinerary, position.phase), errors: outcome.errors }
          : { result: "failed", nextPhase: "MigrationFailed", errors: outcome.errors };
        await ledger.complete(claim, transition);
        await this.writeTransition(fresh, position, transition, outcome.status, stats, outcome.category);
        log.warn("phase failed the migration", { errors: outcome.errors, next: transition.nextPhase });
        return { kind: "advanced", phase: position.phase, next: transition.nextPhase, requeueAfterMs: phaseSpec(transition.nextPhase).requeueMs };
      }
      case "wait": {
        await ledger.release(claim);
        await this.writeProgress(fresh, outcome.status, outcome.warnings ?? [], stats);
        const requeueAfterMs = outcome.afterMs ?? phaseSpec(position.phase).requeueMs;
        log.debug("phase waiting", { reason: outcome.reason, requeueAfterMs });
        return { kind: "waiting", phase: position.phase, reason: outcome.reason, requeueAfterMs };
      }
    }
  }

  private context(fresh: DirectVolumeMigration, parsed: SpecParseResult, position: Position, claim: Claim, log: Logger): Promise<PhaseContext> {
    return buildPhaseContext({ dvm: fresh, parsed, position, clusters: this.options.clusters, attempt: claim.attempt, clock: this.clock, log });
  }


  /**
   * Moves the status from `from` to the position the ledger recorded. Guarded by resourceVersion: on a
   * conflict it re-reads, and stops if someone else already moved the DVM past `from`.
   * Returns whether it wrote.
   */
  private async writeTransition(
    fresh: DirectVolumeMigration,
    from: Position,
    transition: Transition | RecordedOutcome,
    update: StatusUpdate | undefined,
    stats: RunStats,
    category: "Critical" | "Warn" = "Critical",
  ): Promise<boolean> {
    return this.guardedWrite(fresh, stats, (current) => {
      const position = positionOf(current.status, migrationTypeOf(current));
      if (position.phase !== from.phase || position.itinerary !== from.itinerary) return undefined;
      const base: DvmStatus = { ...current.status, ...update };
      const nowIso = new Date(this.clock.now()).toISOString();
      const generation = current.metadata.generation;
      if (transition.result === "failed") return enterFailure(base, from.phase, transition.errors ?? [], category, generation, nowIso);
      const withErrors = transition.errors?.length ? { ...base, errors: [...new Set([...(base.errors ?? []), ...transition.errors])] } : base;
      return enterPhase(withErrors, positionAfter(from, transition.result, transition.nextPhase), generation, nowIso);
    });
  }

  /** Progress and warnings of a waiting phase; written only when they changed, so polling makes no events. */
  private async writeProgress(fresh: DirectVolumeMigration, update: StatusUpdate | undefined, warnings: Omit<Condition, "lastTransitionTime">[], stats: RunStats): Promise<void> {
    const phase = fresh.status.phase;
    try {
      await this.guardedWrite(fresh, stats, (current) => {
        if (current.status.phase !== phase) return undefined;
        const nowIso = new Date(this.clock.now()).toISOString();
        const asserted = new Set(warnings.map((w) => w.type));
        // Warnings hold only while re-asserted (upstream's staging); other conditions are kept.
        let conditions = (current.status.conditions ?? []).filter((c) => c.durable || c.category !== "Warn" || asserted.has(c.type));
        for (const warning of warnings) conditions = setCondition(conditions, warning, nowIso);
        return { ...current.status, ...update, conditions };
      });
    } catch (error) {
      // Progress is re-collected on the next poll; losing one write loses nothing.
      if (!(error instanceof KubeApiError && error.isTransient)) throw error;
    }
  }

  private async guardedWrite(fresh: DirectVolumeMigration, stats: RunStats, compute: (current: DirectVolumeMigration) => DvmStatus | undefined): Promise<boolean> {
    const { store } = this.options;
    let current: DirectVolumeMigration | undefined = fresh;
    for (let attempt = 0; attempt < STATUS_WRITE_ATTEMPTS && current; attempt++) {
      const next = compute(current);
      if (!next || JSON.stringify(next) === JSON.stringify(current.status)) return false;
      try {
        await store.writeStatus(current, next);
        return true;
      } catch (error) {
        if (!(error instanceof KubeApiError && error.isConflict)) throw error;
        stats.statusConflicts++;
        const reread: DirectVolumeMigration | undefined = await store.get(current.metadata.namespace, current.metadata.name);
        current = reread && reread.metadata.uid === fresh.metadata.uid ? reread : undefined;
      }
    }
    if (!current) return false;
    throw new KubeApiError(`status of ${fresh.metadata.namespace}/${fresh.metadata.name} kept changing under ${STATUS_WRITE_ATTEMPTS} writes`, 409, "Conflict");
  }

  private async retryLater(fresh: DirectVolumeMigration, position: Position, claim: Claim, error: unknown, log: Logger, stats: RunStats): Promise<RunResult> {
    const message = error instanceof Error ? error.message : String(error);
    log.warn("phase attempt failed; will retry", { error: message });
    await this.options.ledger.fail(claim, message);
    const retryAfterMs = Math.min(this.maxRetryDelayMs, 500 * 2 ** Math.min(claim.attempt - 1, 10));
    try {
      await this.guardedWrite(fresh, stats, (current) => {
        if (current.status.phase !== fresh.status.phase) return undefined;
        const conditions = setCondition(
          current.status.conditions ?? [],
          { type: CONDITION.PhaseRetrying, status: "True", category: "Warn", reason: position.phase, message },
          new Date(this.clock.now()).toISOString(),
        );
        return { ...current.status, conditions };
      });
    } catch (writeError) {
      log.warn("could not record the retry in the status", { error: writeError instanceof Error ? writeError.message : String(writeError) });
    }
    return { kind: "retry", phase: position.phase, error: message, retryAfterMs };
  }
}

export interface PhaseContextInput {
  /** The DVM as read fresh. */
  dvm: DirectVolumeMigration;
  parsed: SpecParseResult;
  position: Position;
  clusters: ClusterResolver;
  /** The ledger attempt that holds the phase. */
  attempt: number;
  clock: Clock;
  log: Logger;
}

/**
 * What a phase body gets: the spec, the clusters it moves data between (swapped on Rollback) and the
 * volume pairs. An invalid spec fails the migration (MigrationInputError), except on the failure
 * itinerary, whose cleanup runs with no volumes and unreachable clusters instead. Exported for anything
 * else that runs phase bodies (the chaos baseline), so both build the same context.
 */
export async function buildPhaseContext(input: PhaseContextInput): Promise<PhaseContext> {
  const { dvm, parsed, position } = input;
  const inFailure = position.itinerary === "VolumeMigrationFailed";
  if (!parsed.ok && !inFailure) throw new MigrationInputError(parsed.issues.map(formatIssue));
  // An invalid spec on the failure itinerary: nothing was created from it, so there is nothing to clean.
  const spec: DvmSpec = parsed.ok ? parsed.spec : { persistentVolumeClaims: [] };
  let clusters: MigrationClusters;
  try {
    clusters = await input.clusters.resolve(dvm.metadata.namespace, spec);
  } catch (error) {
    if (!(inFailure && error instanceof MigrationInputError)) throw error;
    const host = (await input.clusters.resolve(dvm.metadata.namespace, {})).host;
    clusters = { host, source: unreachableCluster("source"), destination: unreachableCluster("destination"), sameCluster: false };
  }
  if (position.itinerary === "VolumeMigrationRollback") {
    // Data flows back: the original destination is read from and the original source written to.
    clusters = { ...clusters, source: clusters.destination, destination: clusters.source };
  }
  const { name, namespace, uid, generation } = dvm.metadata;
  return {
    dvm: { name, namespace, uid, generation },
    spec,
    status: dvm.status,
    itinerary: position.itinerary,
    phase: position.phase,
    clusters,
    volumes: volumePairs(spec, inFailure ? "VolumeMigration" : position.itinerary),
    attempt: input.attempt,
    clock: input.clock,
    log: input.log,
  };
}

export function migrationTypeOf(dvm: DirectVolumeMigration): string | undefined {
  const spec = dvm.spec as { migrationType?: unknown } | undefined;
  return typeof spec?.migrationType === "string" ? spec.migrationType : undefined;
}
