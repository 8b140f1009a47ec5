/**
 * The phase runner: one invocation executes at most one phase of one DVM.
 *   1. read the DVM fresh (the request's copy is never trusted);
 *   2. claim (uid, phase, generation) in the ledger: already completed means do not run the body again,
 *      only repair a lagging status; held by a live lease means stop. A request that names the phase
 *      (the relay's view) has it claimed before the read: one read then serves as the fresh read and as
 *      the deletion fence, and a read that disagrees gives the claim back unrun and goes on as above;
 *   3. run the phase body;
 *   4. record the outcome in the ledger, conditioned on still holding the claim;
 *   5. write the status guarded by the resourceVersion read in step 1; a conflict means re-read, never overwrite.
 */

import { dispositionOf } from "../contracts/controllerError";
import { MigrationInputError } from "../contracts/inputError";
import type { ReconcileRequest, RunResult, RunStats } from "../contracts/request";
import { CONDITION, type ConditionInput, findCondition, setCondition } from "../dvm/conditions";
import { EXECUTABLE_PHASES, type ExecutablePhaseName, nextPhase, POLL_REQUEUE_MS, phaseSpec } from "../dvm/itinerary";
import { boundedErrors, MAX_ERROR_TEXT_BYTES } from "../dvm/limits";
import { DEFAULT_MIGRATION_POLICY, formatViolation, isAdminNamespace, type MigrationPolicy, policyViolations, transferImageFor } from "../dvm/policy";
import { enterFailure, enterPhase, type Position, positionAfter, positionOf } from "../dvm/status";
import { transferSettingsFor } from "../dvm/transferPolicy";
import { type Condition, type DirectVolumeMigration, DVM_FINALIZER, type DvmSpec, type DvmStatus, parseDvmSpec, type SpecParseResult } from "../dvm/types";
import type { MigrationClusters } from "../kube/cluster";
import { retryOnConflict } from "../kube/conflictRetry";
import type { DvmStore } from "../kube/dvmStore";
import { KubeApiError } from "../kube/errors";
import { ClusterCredentialsUnavailableError, type ClusterResolver, unreachableCluster } from "../kube/resolver";
import { type Claim, type ClaimResult, LostClaimError, OutcomeTooLargeError, type PhaseLedger, type RecordedOutcome } from "../ledger";
import { retryUntil } from "../ledger/retry";
import { backoffDelay } from "../lib/backoff";
import { type Clock, systemClock } from "../lib/clock";
import { errorText } from "../lib/errorMessage";
import { formatIssue } from "../lib/issues";
import { type Logger, silentLogger } from "../lib/log";
import { settle, unwrap } from "../lib/settle";
import { truncateUtf8 } from "../lib/textBounds";
import { PHASE_BODIES } from "../phases";
import type { PhaseBody, PhaseContext, PhaseOutcome, StatusUpdate } from "../phases/types";
import { volumePairs } from "../phases/volumes";
import { ClusterPrefetch } from "./clusterPrefetch";
import {
  CleanupGaveUpError,
  cleanupLeftCondition,
  clearCredentialFailure,
  credentialFailureSince,
  credentialGraceExpired,
  credentialProblem,
  DEFAULT_CREDENTIAL_GRACE_MS,
  gaveUpMessage,
  noteCredentialFailure,
} from "./credentialGrace";
import { continueDeletion } from "./deletion";
import { BodyLease, DEFAULT_LEASE_MARGIN_MS, LeaseDeadlineError, leaseWithin, ledgerWriteDeadline } from "./lease";

export interface RunnerOptions {
  store: DvmStore;
  ledger: PhaseLedger;
  clusters: ClusterResolver;
  /** Phase bodies; the default is the real ones. Tests may wrap them to count executions. */
  bodies?: Record<ExecutablePhaseName, PhaseBody>;
  clock?: Clock;
  log?: Logger;
  /** How long a claim is exclusive unless renewed. The body is stopped `leaseMarginMs` before it ends. */
  leaseMs?: number;
  /** Between a body's deadline and its lease's end: covers clock skew between hosts (see lease.ts). */
  leaseMarginMs?: number;
  /** Cap of the exponential backoff after transient errors. */
  maxRetryDelayMs?: number;
  /**
   * How long a missing kubeconfig Secret or a refused credential (401) is retried before the migration
   * fails, from the first failure (src/runner/credentialGrace.ts). Default 5 minutes.
   */
  credentialGraceMs?: number;
  /** What a DVM may reference (src/dvm/policy.ts); default DEFAULT_MIGRATION_POLICY. */
  policy?: MigrationPolicy;
  /** Waits between rounds of a ledger write retried until the lease's end (default: a timer); tests move their clock. */
  sleep?: (ms: number) => Promise<void>;
  /** Called after every invocation, for metrics and outgoing events. */
  onResult?: (result: RunResult, stats: RunStats, dvm: { namespace: string; name: string; uid: string }) => void;
}

export const DEFAULT_LEASE_MS = 120_000;

/** What the host adds to one invocation. */
export interface RunOptions {
  /**
   * When the host stops this invocation (ms since the epoch), e.g. Lambda's timeout: bodies end before,
   * and the claim's lease ends there too, so an invocation killed by its host holds the phase no longer.
   */
  hostDeadlineAt?: number;
}

/** What the runner keeps free before a host deadline: the ledger write and the status write after the body. */
export const HOST_DEADLINE_RESERVE_MS = 5_000;

export class PhaseRunner {
  private readonly bodies: Record<ExecutablePhaseName, PhaseBody>;
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly leaseMs: number;
  private readonly leaseMarginMs: number;
  private readonly maxRetryDelayMs: number;
  private readonly credentialGraceMs: number;
  private readonly policy: MigrationPolicy;
  private readonly prefetch: ClusterPrefetch;
  private readonly sleep: (ms: number) => Promise<void>;

  constructor(private readonly options: RunnerOptions) {
    this.bodies = options.bodies ?? PHASE_BODIES;
    this.clock = options.clock ?? systemClock;
    this.log = options.log ?? silentLogger;
    this.leaseMs = options.leaseMs ?? DEFAULT_LEASE_MS;
    this.leaseMarginMs = options.leaseMarginMs ?? Math.min(DEFAULT_LEASE_MARGIN_MS, this.leaseMs / 4);
    if (!(this.leaseMarginMs >= 0 && this.leaseMarginMs < this.leaseMs)) {
      throw new Error(`leaseMarginMs must be at least 0 and below leaseMs (got ${this.leaseMarginMs} of ${this.leaseMs})`);
    }
    this.maxRetryDelayMs = options.maxRetryDelayMs ?? 30_000;
    this.credentialGraceMs = options.credentialGraceMs ?? DEFAULT_CREDENTIAL_GRACE_MS;
    this.policy = options.policy ?? DEFAULT_MIGRATION_POLICY;
    this.prefetch = new ClusterPrefetch(options.clusters);
    this.sleep = options.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
  }

  async run(request: ReconcileRequest, options: RunOptions = {}): Promise<RunResult> {
    return (await this.runWithStats(request, options)).result;
  }

  /** Like run(), also returning what the invocation did (for the function handler's metrics). */
  async runWithStats(request: ReconcileRequest, options: RunOptions = {}): Promise<{ result: RunResult; stats: RunStats }> {
    const startedAt = this.clock.now();
    const stats: RunStats = { durationMs: 0, statusConflicts: 0 };
    const result = await this.runOnce(request, stats, options);
    stats.durationMs = this.clock.now() - startedAt;
    this.options.onResult?.(result, stats, request);
    return { result, stats };
  }

  /**
   * One invocation in four steps, each returning the run's result or the next step's input: acquire
   * (the guessed claim and the fresh read), gate (what stops before any body: deletion, an unreadable
   * status, a finished or held phase, a duplicate), execute (the body under its lease, after the deletion
   * fence) and commit (the ledger, then the status).
   */
  private async runOnce(request: ReconcileRequest, stats: RunStats, options: RunOptions): Promise<RunResult> {
    const hostEndAt = options.hostDeadlineAt;
    // Under a host that kills the invocation at a deadline (Lambda's timeout), the lease ends there too.
    const leaseMs = () => leaseWithin(this.leaseMs, this.clock.now(), hostEndAt, this.leaseMarginMs + 1);
    const acquired = await this.acquire(request, leaseMs, hostEndAt);
    if ("done" in acquired) return acquired.done;
    const gated = await this.gate(acquired.next, stats, leaseMs);
    if ("done" in gated) return gated.done;
    const executed = await this.execute(gated.next, stats, hostEndAt);
    if ("done" in executed) return executed.done;
    return this.commit(executed.next, stats);
  }

  /**
   * The request's phase is a guess (the relay's last view): the phase is claimed on it before the read,
   * and the read that follows decides. The claim stands only if that read, made after it, agrees.
   */
  private async acquire(request: ReconcileRequest, leaseMs: () => number, hostEndAt: number | undefined): Promise<Step<Acquired>> {
    const { store, ledger } = this.options;
    const guess = guessedKey(request);
    const early = guess
      ? await ledger.claim({ uid: request.uid, ...guess }, { leaseMs: leaseMs(), dvm: { namespace: request.namespace, name: request.name } })
      : undefined;
    if (guess && early?.kind === "held") return { done: this.busyHeld(request, guess.phase, early) };
    const earlyClaim = early?.kind === "claimed" ? early.claim : undefined;
    // With a claimed guess the body likely runs right after the read: the Secrets this DVM's last context
    // named are read meanwhile (clusterPrefetch.ts). Without one they are read while the fence re-reads.
    const clusters = this.prefetch.forInvocation(request.uid, request.namespace, earlyClaim !== undefined);
    const read = await this.givingBack(earlyClaim, hostEndAt, () => store.get(request.namespace, request.name));
    const confirmed = guess !== undefined && read !== undefined && confirmsGuess(read, request.uid, guess);
    if (earlyClaim && !confirmed) await this.dropGuess(earlyClaim, read, request.uid, hostEndAt);
    if (!read || read.metadata.uid !== request.uid) return { done: this.gone(request.uid) };
    return { next: { dvm: read, clusters, ...(confirmed && early ? { confirmedClaim: early } : {}) } };
  }

  /** What stops the invocation before any body runs; otherwise the claim the body runs under. */
  private async gate(acquired: Acquired, stats: RunStats, leaseMs: () => number): Promise<Step<Gated>> {
    let fresh = acquired.dvm;
    if (fresh.metadata.deletionTimestamp) return { done: await this.onDeletion(fresh) };
    const unreadable = unreadableStatus(fresh);
    if (unreadable) return { done: await this.stopUnreadable(fresh, unreadable, stats) };
    const position = positionOf(fresh.status, migrationTypeOf(fresh));
    if (position.phase === "Completed") return { done: this.finished(fresh.metadata.uid) };
    if (!fresh.metadata.finalizers?.includes(DVM_FINALIZER)) {
      const adopted = await this.adopt(fresh);
      if (adopted.kind !== "adopted") return { done: adopted.result };
      fresh = adopted.dvm;
    }
    const { uid, generation, namespace, name } = fresh.metadata;
    const log = this.log.child({ dvm: `${namespace}/${name}`, uid, phase: position.phase, generation });
    const claimed =
      acquired.confirmedClaim ??
      (await this.options.ledger.claim({ uid, phase: position.phase, generation }, { leaseMs: leaseMs(), dvm: { namespace, name } }));
    if (claimed.kind === "held") return { done: this.busyHeld(fresh.metadata, position.phase, claimed, log) };
    if (claimed.kind === "completed") return { done: await this.repair(fresh, position, claimed.outcome, log, stats) };
    const claim = claimed.claim;
    stats.attempt = claim.attempt;
    stats.takeover = claim.takeover;
    const claimLog = log.child({ attempt: claim.attempt });
    if (claim.takeover) claimLog.warn("lease takeover: the previous holder's lease expired before it finished");
    const phase = position.phase;
    return {
      next: { dvm: fresh, position: { ...position, phase }, claim, log: claimLog, clusters: acquired.clusters, fenced: acquired.confirmedClaim !== undefined },
    };
  }

  /**
   * Recorded as done: the body must not run again. The status may lag (a crash between the ledger write
   * and the status write, or a stale request): it is brought up to the recorded outcome.
   */
  private async repair(fresh: DirectVolumeMigration, position: Position, outcome: RecordedOutcome, log: Logger, stats: RunStats): Promise<RunResult> {
    const repaired = await this.writeTransition(fresh, position, outcome, stats);
    log.info("duplicate suppressed", { next: outcome.nextPhase, statusRepaired: repaired });
    return {
      kind: "duplicate",
      phase: position.phase,
      next: outcome.nextPhase,
      statusRepaired: repaired,
      requeueAfterMs: phaseSpec(outcome.nextPhase).requeueMs,
    };
  }

  /** The body under its lease, once the deletion fence has passed; its outcome, or the result of an error. */
  private async execute(gated: Gated, stats: RunStats, hostEndAt: number | undefined): Promise<Step<Executed>> {
    const { dvm: fresh, position, claim, log } = gated;
    const lease = new BodyLease({
      ledger: this.options.ledger,
      claim,
      leaseMs: this.leaseMs,
      marginMs: this.leaseMarginMs,
      clock: this.clock,
      ...(hostEndAt !== undefined ? { hostDeadlineAt: hostEndAt - HOST_DEADLINE_RESERVE_MS, hostEndAt } : {}),
    });
    // The body's context (the policy check, then the kubeconfig Secrets' read) is built while the fence
    // re-reads the DVM: both only read, and the body needs both, so they cost one round trip. Its outcome
    // is taken inside lease.run; a DVM found deleted just drops it.
    const parsed = parseDvmSpec(fresh.spec);
    const specChanged = specChangeOf(fresh, position);
    const context = settle(
      specChanged
        ? Promise.reject(new MigrationInputError([specChanged]))
        : buildPhaseContext({ ...this.contextDeps(log), dvm: fresh, parsed, position, clusters: gated.clusters, attempt: claim.attempt, lease }),
    );
    if (!gated.fenced) {
      const stopped = await this.deletionFence(gated, hostEndAt);
      if (stopped) return { done: stopped };
    }
    const body = this.bodies[position.phase];
    try {
      const outcome = await lease.run(async () => {
        const built = unwrap(await context);
        log.info("phase started");
        return body(built);
      });
      return { next: { ...gated, lease, outcome } };
    } catch (error) {
      const handled = await this.onBodyError(error, { ...gated, lease, parsed }, stats);
      return "outcome" in handled ? { next: { ...gated, lease, outcome: handled.outcome } } : { done: handled.result };
    }
  }

  /**
   * The deletion fence: a DVM deleted between the read and the claim must not get anything created for
   * it. Deletion waits for every lease claimed before it began (deletion.ts); a claim made after it began
   * sees the deletionTimestamp on this read, which follows the claim, and stops before the body. (A
   * confirmed guess was claimed before the first read, so that read was its fence.)
   */
  private async deletionFence(gated: Gated, hostEndAt: number | undefined): Promise<RunResult | undefined> {
    const { claim, log } = gated;
    const { uid, namespace, name } = gated.dvm.metadata;
    const recheck = await this.givingBack(claim, hostEndAt, () => this.options.store.get(namespace, name));
    if (recheck && recheck.metadata.uid === uid && !recheck.metadata.deletionTimestamp) return undefined;
    await this.releaseUnrun(claim, hostEndAt);
    log.info("DVM deleted while the phase was being claimed: not run");
    if (recheck?.metadata.uid === uid) return this.onDeletion(recheck);
    // Gone already: this entry was written after the deletion retired the others.
    await this.options.ledger.retire(uid);
    return this.gone(uid);
  }

  /**
   * A body that threw: a credential problem is retried within its grace and fails the migration after it;
   * otherwise the error's disposition decides: bad input fails it, a lost claim (superseded) stops, and
   * anything else is retried with backoff.
   */
  private async onBodyError(
    error: unknown,
    running: Gated & { lease: BodyLease; parsed: SpecParseResult },
    stats: RunStats,
  ): Promise<{ outcome: PhaseOutcome } | { result: RunResult }> {
    const { dvm: fresh, position, log } = running;
    const credential = credentialProblem(error);
    if (credential !== undefined) {
      const since = credentialFailureSince(fresh.status) ?? this.clock.now();
      // A rotation in progress, or a credential being renewed: retried, the first failure's time kept.
      if (this.clock.now() - since < this.credentialGraceMs) return { result: await this.retryLater(running, error, stats, credential) };
      const gaveUp = gaveUpMessage(credential, since, this.credentialGraceMs);
      return {
        outcome:
          position.itinerary === "VolumeMigrationFailed" && running.parsed.ok
            ? { kind: "fail", errors: [gaveUp], category: "Warn", warnings: [cleanupLeftCondition(fresh.metadata, running.parsed.spec, fresh.status, gaveUp)] }
            : { kind: "fail", errors: [gaveUp], category: "Critical" },
      };
    }
    switch (dispositionOf(error)) {
      case "input":
        return { outcome: inputFailure(error) };
      case "superseded":
        log.warn("claim lost while the body ran (lease renewal refused): stopped", {
          holderAttempt: error instanceof LostClaimError ? error.current?.attempt : undefined,
        });
        return { result: { kind: "busy", phase: position.phase, retryAfterMs: 0 } };
      default:
        if (error instanceof LeaseDeadlineError) log.warn("phase body stopped at its lease deadline", { leaseMs: this.leaseMs });
        return { result: await this.retryLater(running, error, stats) };
    }
  }

  /** Records the body's outcome, then writes the status; a claim lost meanwhile belongs to its new holder. */
  private async commit(executed: Executed, stats: RunStats): Promise<RunResult> {
    try {
      return await this.finish(executed, stats);
    } catch (error) {
      if (!(error instanceof LostClaimError)) throw error;
      executed.log.warn("claim lost before completion: another invocation took over", { holderAttempt: error.current?.attempt });
      return { kind: "busy", phase: executed.position.phase, retryAfterMs: 0 };
    }
  }

  private busyHeld(dvm: DvmRef, phase: string, held: Extract<ClaimResult, { kind: "held" }>, log?: Logger): RunResult {
    (log ?? this.log.child({ dvm: `${dvm.namespace}/${dvm.name}`, uid: dvm.uid, phase })).info("phase held by another invocation", {
      holderAttempt: held.attempt,
    });
    return { kind: "busy", phase, retryAfterMs: Math.max(0, Math.min(held.leaseExpiresAt - this.clock.now(), this.leaseMs)) };
  }

  /**
   * Gives back a claim whose body never ran, retrying a throttled ledger until the lease would end anyway;
   * one lost to a takeover meanwhile is the new holder's.
   */
  private async releaseUnrun(claim: Claim, hostEndAt: number | undefined): Promise<void> {
    await this.writeByDeadline(ledgerWriteDeadline(claim.leaseExpiresAt, hostEndAt), () => this.options.ledger.release(claim)).catch((error: unknown) => {
      if (!(error instanceof LostClaimError)) throw error;
    });
  }

  /**
   * Runs a step that follows a claim, before any body ran (a read): when it fails, the claim is given
   * back first, so the failure does not also lock the phase for the rest of its lease.
   */
  private async givingBack<T>(claim: Claim | undefined, hostEndAt: number | undefined, step: () => Promise<T>): Promise<T> {
    try {
      return await step();
    } catch (error) {
      if (claim) {
        await this.releaseUnrun(claim, hostEndAt).catch((releaseError: unknown) =>
          this.log.warn("could not give back a claim after a failed step; it ends with its lease", {
            uid: claim.key.uid,
            phase: claim.key.phase,
            error: errorText(releaseError),
          }),
        );
      }
      throw error;
    }
  }

  /** A ledger write that ends an attempt, retried through a throttled or unreachable ledger until `deadlineAt`. */
  private writeByDeadline<T>(deadlineAt: number, write: () => Promise<T>): Promise<T> {
    return retryUntil(write, { deadlineAt, now: () => this.clock.now(), sleep: this.sleep });
  }

  /**
   * A guess the read did not confirm: its claim is given back unrun. When the DVM is gone (or was
   * recreated), the claim may have brought a retired entry back: its retention starts again.
   */
  private async dropGuess(claim: Claim, read: DirectVolumeMigration | undefined, uid: string, hostEndAt: number | undefined): Promise<void> {
    await this.releaseUnrun(claim, hostEndAt);
    if (!read || read.metadata.uid !== uid) await this.options.ledger.retire(uid);
  }

  private gone(uid: string): RunResult {
    this.prefetch.forget(uid);
    return { kind: "gone" };
  }

  private finished(uid: string): RunResult {
    this.prefetch.forget(uid);
    return { kind: "finished", phase: "Completed" };
  }

  private async finish(executed: Executed, stats: RunStats): Promise<RunResult> {
    const { dvm: fresh, position, claim, lease, outcome, log } = executed;
    const { ledger } = this.options;
    // Giving up on a completion runs the body again once the lease ends: it is retried until then.
    const writeInTime = <T>(write: () => Promise<T>) => this.writeByDeadline(lease.ledgerWriteDeadline(), write);
    switch (outcome.kind) {
      case "advance": {
        // The status update is recorded with the completion: a repair after a crash replays exactly it.
        const recorded = await this.record(claim, position, writeInTime, {
          result: "advanced",
          nextPhase: nextPhase(position.itinerary, position.phase),
          ...decidedBy(outcome),
        });
        await this.writeTransition(fresh, position, recorded, stats);
        const next = recorded.nextPhase;
        log.info("phase completed", { next });
        return { kind: "advanced", phase: position.phase, next, requeueAfterMs: phaseSpec(next).requeueMs };
      }
      case "fail": {
        // Cleanup after a failure is best effort: a failing cleanup step records its errors and moves on.
        const recorded = await this.record(claim, position, writeInTime, { ...failureOf(position, outcome.errors, outcome.category), ...decidedBy(outcome) });
        await this.writeTransition(fresh, position, recorded, stats);
        log.warn("phase failed the migration", { errors: recorded.errors, next: recorded.nextPhase });
        return { kind: "advanced", phase: position.phase, next: recorded.nextPhase, requeueAfterMs: phaseSpec(recorded.nextPhase).requeueMs };
      }
      case "wait": {
        await writeInTime(() => ledger.release(claim));
        await this.writeProgress(fresh, outcome.status, outcome.warnings ?? [], stats);
        const requeueAfterMs = outcome.afterMs ?? phaseSpec(position.phase).requeueMs;
        log.debug("phase waiting", { reason: outcome.reason, requeueAfterMs });
        return { kind: "waiting", phase: position.phase, reason: outcome.reason, requeueAfterMs };
      }
    }
  }

  /**
   * Records the phase's outcome. One too large for a ledger item (a DVM beyond the sizes the controller
   * supports) is refused before the write and becomes a failure of the migration, recorded at once: never
   * a write that fails again on every retry while the claim stays held.
   */
  private async record(
    claim: Claim,
    position: Position,
    writeInTime: <T>(write: () => Promise<T>) => Promise<T>,
    outcome: RecordedOutcome,
  ): Promise<RecordedOutcome> {
    const { ledger } = this.options;
    try {
      return await writeInTime(() => ledger.complete(claim, outcome));
    } catch (error) {
      if (!(error instanceof OutcomeTooLargeError)) throw error;
      const message = `${position.phase}: ${error.message}; the DVM is larger than the controller supports (docs/security.md, "Size limits")`;
      return writeInTime(() => ledger.complete(claim, failureOf(position, [message], "Critical")));
    }
  }

  /** What every phase context is built with, besides the DVM, its claim and its clusters. */
  private contextDeps(log: Logger): Pick<PhaseContextInput, "policy" | "clock" | "log" | "credentialGraceMs"> {
    return { policy: this.policy, clock: this.clock, log, credentialGraceMs: this.credentialGraceMs };
  }

  /**
   * Moves the status from `from` to the position the ledger recorded, with the status update the body
   * decided (recorded with it). Guarded by resourceVersion: on a conflict it re-reads, and stops if
   * someone else already moved the DVM past `from`. Returns whether it wrote.
   */
  private async writeTransition(fresh: DirectVolumeMigration, from: Position, transition: RecordedOutcome, stats: RunStats): Promise<boolean> {
    return this.guardedWrite(fresh, stats, (current) => {
      const position = positionOf(current.status, migrationTypeOf(current));
      if (position.phase !== from.phase || position.itinerary !== from.itinerary) return undefined;
      const nowIso = new Date(this.clock.now()).toISOString();
      let base: DvmStatus = { ...current.status, ...transition.statusUpdate };
      // A completed phase's warnings outlive the phase change: they describe its result.
      for (const warning of transition.warnings ?? [])
        base = { ...base, conditions: setCondition(base.conditions ?? [], { ...warning, durable: true }, nowIso) };
      // The generation the decision was made on: a spec edited meanwhile stays visible as a mismatch.
      const generation = fresh.metadata.generation;
      if (transition.result === "failed") {
        return enterFailure(base, from.phase, transition.errors ?? [], transition.category ?? "Critical", generation, nowIso);
      }
      const withErrors = transition.errors?.length ? { ...base, errors: boundedErrors([...new Set([...(base.errors ?? []), ...transition.errors])]) } : base;
      // A phase that gave up (errors on the failure itinerary) keeps the credential failure's first time.
      const updated = transition.errors?.length ? withErrors : clearCredentialFailure(withErrors);
      return enterPhase(updated, positionAfter(from, transition.result, transition.nextPhase), generation, nowIso);
    });
  }

  /** Progress and warnings of a waiting phase; written only when they changed, so polling makes no events. */
  private async writeProgress(
    fresh: DirectVolumeMigration,
    update: StatusUpdate | undefined,
    warnings: Omit<Condition, "lastTransitionTime">[],
    stats: RunStats,
  ): Promise<void> {
    const phase = fresh.status.phase;
    try {
      await this.guardedWrite(fresh, stats, (current) => {
        if (current.status.phase !== phase) return undefined;
        const nowIso = new Date(this.clock.now()).toISOString();
        const asserted = new Set(warnings.map((w) => w.type));
        // Warnings hold only while re-asserted (upstream's staging); other conditions are kept.
        let conditions = (current.status.conditions ?? []).filter((c) => c.durable || c.category !== "Warn" || asserted.has(c.type));
        for (const warning of warnings) conditions = setCondition(conditions, warning, nowIso);
        return clearCredentialFailure({ ...current.status, ...update, conditions });
      });
    } catch (error) {
      // Progress is re-collected on the next poll; losing one write loses nothing.
      if (dispositionOf(error) !== "retryable") throw error;
    }
  }

  /**
   * Writes the status `compute` makes of the latest copy (none: nothing to write), guarded by its
   * resourceVersion; a conflict re-reads and computes again. Returns whether it wrote.
   */
  private async guardedWrite(
    fresh: DirectVolumeMigration,
    stats: RunStats,
    compute: (current: DirectVolumeMigration) => DvmStatus | undefined,
  ): Promise<boolean> {
    const { store } = this.options;
    return retryOnConflict(async (attempt) => {
      const current = attempt === 1 ? fresh : await store.get(fresh.metadata.namespace, fresh.metadata.name);
      if (!current || current.metadata.uid !== fresh.metadata.uid) return false;
      const next = compute(current);
      if (!next || JSON.stringify(next) === JSON.stringify(current.status)) return false;
      try {
        await store.writeStatus(current, next);
        return true;
      } catch (error) {
        if (error instanceof KubeApiError && error.isConflict) stats.statusConflicts++;
        throw error;
      }
    });
  }

  /** The DVM is being deleted: carry the deletion one step further (deletion.ts). */
  private async onDeletion(dvm: DirectVolumeMigration): Promise<RunResult> {
    const { namespace, name, uid } = dvm.metadata;
    const log = this.log.child({ dvm: `${namespace}/${name}`, uid, phase: DELETING });
    const step = await continueDeletion(
      {
        store: this.options.store,
        ledger: this.options.ledger,
        clusters: this.options.clusters,
        clock: this.clock,
        log,
        policy: this.policy,
        credentialGraceMs: this.credentialGraceMs,
      },
      dvm,
    );
    switch (step.kind) {
      case "leaseHeld":
        log.info("deletion waits for a running phase", { phases: step.phases });
        return { kind: "busy", phase: DELETING, retryAfterMs: step.retryAfterMs };
      case "terminating":
        return { kind: "waiting", phase: DELETING, reason: step.reason, requeueAfterMs: POLL_REQUEUE_MS };
      case "released":
        return this.gone(uid);
    }
  }

  /** Puts the finalizer on a DVM before anything is created for it, so that deleting it always cleans up. */
  private async adopt(dvm: DirectVolumeMigration): Promise<{ kind: "adopted"; dvm: DirectVolumeMigration } | { kind: "not"; result: RunResult }> {
    try {
      return { kind: "adopted", dvm: await this.options.store.writeFinalizers(dvm, [...(dvm.metadata.finalizers ?? []), DVM_FINALIZER]) };
    } catch (error) {
      if (!(error instanceof KubeApiError)) throw error;
      if (error.isNotFound) return { kind: "not", result: { kind: "gone" } };
      // Changed (or being deleted) since the read: decide again from a fresh read.
      if (error.isConflict) return { kind: "not", result: { kind: "busy", phase: dvm.status.phase ?? "Started", retryAfterMs: 0 } };
      throw error;
    }
  }

  /**
   * A status that does not parse must never read as "not started": the DVM is stopped with a durable
   * condition naming the fields, and stays stopped until someone fixes the status and removes the
   * condition (or creates a new DVM).
   */
  private async stopUnreadable(dvm: DirectVolumeMigration, problem: string, stats: RunStats): Promise<RunResult> {
    const { namespace, name, uid } = dvm.metadata;
    const message = `The status cannot be read (${problem}); the migration is stopped so that it never starts again from the beginning. Fix the status and remove this condition to resume, or create a new DVM.`;
    const wrote = await this.guardedWrite(dvm, stats, (current) => {
      if (findCondition(current.status.conditions, CONDITION.StatusUnreadable)?.status === "True") return undefined;
      const conditions = setCondition(
        current.status.conditions ?? [],
        { type: CONDITION.StatusUnreadable, status: "True", category: "Critical", reason: "StatusUnreadable", message, durable: true },
        new Date(this.clock.now()).toISOString(),
      );
      return { ...current.status, conditions };
    });
    if (wrote) this.log.error("DVM stopped: its status cannot be read", { dvm: `${namespace}/${name}`, uid, problem });
    return { kind: "stopped", reason: message };
  }

  private async retryLater(running: Gated & { lease: BodyLease }, error: unknown, stats: RunStats, credential?: string): Promise<RunResult> {
    const { dvm: fresh, position, claim, lease, log } = running;
    // Into the ledger, a condition and the run result: bounded, as any error text that is recorded.
    const message = truncateUtf8(errorText(error), MAX_ERROR_TEXT_BYTES);
    log.warn("phase attempt failed; will retry", { error: message });
    try {
      await this.writeByDeadline(lease.ledgerWriteDeadline(), () => this.options.ledger.fail(claim, message));
    } catch (failError) {
      // Our lease ended and another invocation took the phase over: it owns the phase (and its status) now.
      if (!(failError instanceof LostClaimError)) throw failError;
      log.warn("claim lost before the failure was recorded: another invocation took over", { holderAttempt: failError.current?.attempt });
      return { kind: "busy", phase: position.phase, retryAfterMs: 0 };
    }
    // The backoff, or longer when the API server said when to come back (429 or 503 with Retry-After).
    const backoffMs = backoffDelay(claim.attempt, { maxMs: this.maxRetryDelayMs });
    const askedMs = error instanceof KubeApiError ? error.retryAfterMs : undefined;
    const retryAfterMs = askedMs === undefined ? backoffMs : Math.max(backoffMs, Math.min(askedMs, this.maxRetryDelayMs));
    try {
      await this.guardedWrite(fresh, stats, (current) => {
        if (current.status.phase !== fresh.status.phase) return undefined;
        const nowIso = new Date(this.clock.now()).toISOString();
        const conditions = setCondition(
          current.status.conditions ?? [],
          { type: CONDITION.PhaseRetrying, status: "True", category: "Warn", reason: position.phase, message },
          nowIso,
        );
        return {
          ...current.status,
          conditions: credential === undefined ? conditions : noteCredentialFailure(conditions, credential, this.credentialGraceMs, nowIso),
        };
      });
    } catch (writeError) {
      log.warn("could not record the retry in the status", { error: errorText(writeError) });
    }
    return { kind: "retry", phase: position.phase, error: message, retryAfterMs };
  }
}

/** What an input error fails the migration with; cleanup that gave up warns, naming what it left behind. */
function inputFailure(error: unknown): PhaseOutcome {
  if (error instanceof CleanupGaveUpError) return { kind: "fail", errors: error.errors, category: "Warn", warnings: [error.left] };
  return { kind: "fail", errors: error instanceof MigrationInputError ? error.errors : [errorText(error)], category: "Critical" };
}

/** A step of runOnce: the invocation's result, or the next step's input. */
type Step<T> = { done: RunResult } | { next: T };

type DvmRef = { namespace: string; name: string; uid: string };

/** After acquire: the DVM read fresh, and the guessed claim when that read confirmed it. */
interface Acquired {
  dvm: DirectVolumeMigration;
  clusters: ClusterResolver;
  confirmedClaim?: ClaimResult;
}

/** After gate: the phase claimed for this invocation. */
interface Gated {
  dvm: DirectVolumeMigration;
  position: Position & { phase: ExecutablePhaseName };
  claim: Claim;
  log: Logger;
  clusters: ClusterResolver;
  /** Claimed before the fresh read (a confirmed guess): that read was the deletion fence. */
  fenced: boolean;
}

/** After execute: what the body decided, to be recorded. */
interface Executed extends Gated {
  lease: BodyLease;
  outcome: PhaseOutcome;
}

/** The ledger key the request's phase names, when it names an executable phase and a generation. */
function guessedKey(request: ReconcileRequest): { phase: ExecutablePhaseName; generation: number } | undefined {
  const { phase, generation } = request;
  if (generation === undefined || !(EXECUTABLE_PHASES as readonly string[]).includes(phase ?? "")) return undefined;
  return { phase: phase as ExecutablePhaseName, generation };
}

/**
 * Whether a DVM read after claiming `guess` is the same DVM, at that phase and generation, with nothing
 * else to do first (a deletion, an unreadable status, the finalizer): then the claim stands.
 */
function confirmsGuess(dvm: DirectVolumeMigration, uid: string, guess: { phase: string; generation: number }): boolean {
  return (
    dvm.metadata.uid === uid &&
    dvm.metadata.generation === guess.generation &&
    !dvm.metadata.deletionTimestamp &&
    unreadableStatus(dvm) === undefined &&
    (dvm.metadata.finalizers ?? []).includes(DVM_FINALIZER) &&
    positionOf(dvm.status, migrationTypeOf(dvm)).phase === guess.phase
  );
}

/** What RunResults call the deletion of a DVM (it is no phase of any itinerary). */
const DELETING = "Deleting";

/** Why the status cannot be trusted: it does not parse, or it was stopped for that before. */
function unreadableStatus(dvm: DirectVolumeMigration): string | undefined {
  if (dvm.statusIssues?.length) return dvm.statusIssues.join("; ");
  const stopped = findCondition(dvm.status.conditions, CONDITION.StatusUnreadable);
  return stopped?.status === "True" ? (stopped.message ?? "stopped earlier") : undefined;
}

/**
 * A DVM's spec is immutable once its migration started (the CRD refuses edits); an edit that got through
 * anyway (a CRD without the rule) fails the migration rather than running later phases for a spec the
 * earlier ones never saw. The failure itinerary only cleans up, so it goes on whatever the spec says.
 */
function specChangeOf(dvm: DirectVolumeMigration, position: Position): string | undefined {
  const observed = dvm.status.observedGeneration;
  if (observed === undefined || observed === dvm.metadata.generation || position.itinerary === "VolumeMigrationFailed") return undefined;
  return `spec: changed after the migration started (generation ${observed} -> ${dvm.metadata.generation}); the spec of a DirectVolumeMigration cannot change, create a new DVM for the new spec`;
}

/**
 * The recorded outcome of a phase that failed: the migration fails, or, on the failure itinerary (whose
 * cleanup is best effort), goes on with the errors recorded. The errors are bounded (src/dvm/limits.ts).
 */
function failureOf(position: Position, errors: readonly string[], category: "Critical" | "Warn" | undefined): RecordedOutcome {
  const bounded = boundedErrors(errors);
  return position.itinerary === "VolumeMigrationFailed"
    ? { result: "advanced", nextPhase: nextPhase(position.itinerary, position.phase), errors: bounded }
    : { result: "failed", nextPhase: "MigrationFailed", errors: bounded, category: category ?? "Critical" };
}

/** What a body decided for the status, in the shape the ledger records it with the completion. */
function decidedBy(outcome: { status?: StatusUpdate; warnings?: ConditionInput[] }): Pick<RecordedOutcome, "statusUpdate" | "warnings"> {
  return {
    ...(outcome.status && Object.keys(outcome.status).length > 0 ? { statusUpdate: outcome.status } : {}),
    ...(outcome.warnings && outcome.warnings.length > 0 ? { warnings: outcome.warnings } : {}),
  };
}

export interface PhaseContextInput {
  /** The DVM as read fresh. */
  dvm: DirectVolumeMigration;
  parsed: SpecParseResult;
  position: Position;
  clusters: ClusterResolver;
  /** What a DVM may reference (checked before anything is read or created for it). */
  policy: MigrationPolicy;
  /** The ledger attempt that holds the phase. */
  attempt: number;
  clock: Clock;
  log: Logger;
  /** The claim's lease: the context's clusters are fenced by it (a body past its deadline cannot act). */
  lease?: BodyLease;
  /** RunnerOptions.credentialGraceMs. */
  credentialGraceMs?: number;
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
  // The policy is checked before anything is read or created for the DVM (its Secrets included).
  const violations = parsed.ok ? policyViolations(dvm.metadata.namespace, parsed.spec, input.policy) : [];
  if (violations.length > 0 && !inFailure) throw new MigrationInputError(violations.map(formatViolation));
  // An invalid or refused spec on the failure itinerary: nothing was created from it, so there is
  // nothing to clean, and its references are not followed.
  const spec: DvmSpec = parsed.ok && violations.length === 0 ? parsed.spec : { persistentVolumeClaims: [] };
  let clusters: MigrationClusters;
  try {
    clusters = await input.clusters.resolve(dvm.metadata.namespace, spec);
  } catch (error) {
    if (inFailure && error instanceof ClusterCredentialsUnavailableError) {
      // Retried like on the other itineraries; after the grace, cleanup gives up naming what it leaves.
      const graceMs = input.credentialGraceMs ?? DEFAULT_CREDENTIAL_GRACE_MS;
      if (!credentialGraceExpired(dvm.status, input.clock.now(), graceMs)) throw error;
      const problem = credentialProblem(error) ?? error.message;
      throw new CleanupGaveUpError([`cleanup: ${problem}`], cleanupLeftCondition(dvm.metadata, spec, dvm.status, problem));
    }
    if (!(inFailure && dispositionOf(error) === "input")) throw error;
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
    clusters: input.lease ? input.lease.fence(clusters) : clusters,
    volumes: volumePairs(spec, dvm.status, inFailure ? "VolumeMigration" : position.itinerary),
    transferImage: transferImageFor(spec, input.policy),
    transfer: transferSettingsFor(spec, input.policy.transfer, (namespace) => isAdminNamespace(namespace, input.policy)),
    adminNamespace: isAdminNamespace(namespace, input.policy),
    attempt: input.attempt,
    clock: input.clock,
    log: input.log,
    ...(input.lease ? { lease: input.lease } : {}),
  };
}

export function migrationTypeOf(dvm: DirectVolumeMigration): string | undefined {
  const spec = dvm.spec as { migrationType?: unknown } | undefined;
  return typeof spec?.migrationType === "string" ? spec.migrationType : undefined;
}
