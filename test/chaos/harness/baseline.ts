/**
 * The baseline: a controller-runtime style reconciler as upstream's DVM controller is written. It reads
 * the DVM from an informer cache (the harness's watch of the API server, with the latency a watch has),
 * runs whatever phase that copy shows, with the SAME phase bodies as our runner, and writes the status
 * with a resourceVersion-guarded update as upstream's Update did: a 409 just requeues. That protects the
 * status (a stale write is refused) but not the side effects (the body already ran).
 *
 * A stale replay hands it the DVM as it was one write behind: the read a lagging informer serves to a
 * trigger that arrives between the write and the cache update (mig-controller#1026).
 */

import { systemClock } from "../../../src/clock";
import { setCondition } from "../../../src/dvm/conditions";
import { type ExecutablePhaseName, nextPhase, type PhaseName, phaseSpec } from "../../../src/dvm/itinerary";
import { enterFailure, enterPhase, type Position, positionAfter, positionOf } from "../../../src/dvm/status";
import { type DirectVolumeMigration, type DvmStatus, parseDvmSpec } from "../../../src/dvm/types";
import { KubeDvmStore } from "../../../src/kube/dvmStore";
import { KubeApiError } from "../../../src/kube/errors";
import { SecretClusterResolver } from "../../../src/kube/resolver";
import { silentLogger } from "../../../src/log";
import { MigrationInputError, type PhaseContext, type PhaseOutcome } from "../../../src/phases/types";
import type { ReconcileRequest, RunResult } from "../../../src/runner/request";
import { buildPhaseContext, migrationTypeOf } from "../../../src/runner/runner";
import { type Bodies, countedBodies, crashPlan, invocationScope, SimulatedCrash, tallyHooks } from "./bodies";
import type { ChaosEnvironment } from "./environment";
import type { DvmHistory } from "./observatory";
import { CHAOS_MIGRATION_POLICY } from "./ourRunner";
import type { Tally } from "./tally";
import type { InvokeHints, Target } from "./targets";

/** Upstream requeues a Conflict after 100 ms (migrate.go). */
const CONFLICT_REQUEUE_MS = 100;
const ERROR_REQUEUE_MS = 500;

export interface BaselineOptions {
  /** The informer cache. */
  cache: DvmHistory;
  /** Phases after whose body the "process" dies once per DVM (before any status write). */
  crashPhases?: readonly ExecutablePhaseName[];
}

export class BaselineController implements Target {
  readonly kind = "baseline";
  private readonly store: KubeDvmStore;
  private readonly resolver: SecretClusterResolver;
  private readonly bodies: Bodies;
  private readonly crashed = new Set<string>();

  constructor(
    env: ChaosEnvironment,
    readonly tally: Tally,
    private readonly options: BaselineOptions,
  ) {
    this.store = new KubeDvmStore(env.host.kubeConfig);
    this.resolver = new SecretClusterResolver(env.host.kubeConfig);
    const plan = crashPlan(options.crashPhases ?? []);
    this.bodies = countedBodies({
      ...tallyHooks(tally),
      // No ledger and no attempt numbers: it dies once per (DVM, phase) on the plan.
      crashAfter: (ctx, outcome) => {
        const key = `${ctx.dvm.uid}/${ctx.phase}`;
        if (!plan({ ...ctx, attempt: 1 }, outcome) || this.crashed.has(key)) return false;
        this.crashed.add(key);
        return true;
      },
      crash: async (ctx) => {
        throw new SimulatedCrash(`baseline died after ${ctx.phase}`);
      },
    });
  }

  async invoke(request: ReconcileRequest, hints: InvokeHints): Promise<RunResult> {
    const scope = { bodyMs: 0 };
    const started = Date.now();
    let statusConflicts = 0;
    let result: RunResult;
    try {
      result = await invocationScope.run(scope, () =>
        this.reconcile(request, hints, () => {
          statusConflicts++;
        }),
      );
    } catch (error) {
      this.tally.invocation({
        uid: request.uid,
        kind: "error",
        durationMs: Date.now() - started,
        bodyMs: scope.bodyMs,
        statusConflicts,
        takeover: false,
        stale: !!hints.staleDvm,
      });
      throw error;
    }
    this.tally.invocation({
      uid: request.uid,
      kind: result.kind,
      durationMs: Date.now() - started,
      bodyMs: scope.bodyMs,
      statusConflicts,
      takeover: false,
      stale: !!hints.staleDvm,
    });
    return result;
  }

  dynamoCounts(): undefined {
    return undefined;
  }

  async close(): Promise<void> {}

  private async reconcile(request: ReconcileRequest, hints: InvokeHints, onConflict: () => void): Promise<RunResult> {
    const dvm = hints.staleDvm ?? this.options.cache.latest(request.namespace, request.name);
    // Not in the cache yet (just created): controller-runtime would get the ADDED event soon.
    if (!dvm) return { kind: "retry", phase: "", error: "not in the informer cache yet", retryAfterMs: CONFLICT_REQUEUE_MS };
    if (dvm.metadata.uid !== request.uid) return { kind: "gone" };
    const position = positionOf(dvm.status, migrationTypeOf(dvm));
    if (position.phase === "Completed") return { kind: "finished", phase: "Completed" };

    let outcome: PhaseOutcome;
    try {
      outcome = await this.bodies[position.phase](await this.context(dvm, position));
    } catch (error) {
      if (error instanceof MigrationInputError) outcome = { kind: "fail", errors: error.errors, category: "Critical" };
      else return { kind: "retry", phase: position.phase, error: error instanceof Error ? error.message : String(error), retryAfterMs: ERROR_REQUEUE_MS };
    }

    const nowIso = new Date().toISOString();
    const generation = dvm.metadata.generation;
    const base: DvmStatus = { ...dvm.status, ...outcome.status };
    let status: DvmStatus;
    let next: PhaseName = position.phase;
    switch (outcome.kind) {
      case "advance": {
        const to = nextPhase(position.itinerary, position.phase);
        status = enterPhase(base, positionAfter(position, "advanced", to), generation, nowIso);
        next = to;
        break;
      }
      case "fail": {
        if (position.itinerary === "VolumeMigrationFailed") {
          const to = nextPhase(position.itinerary, position.phase);
          status = enterPhase(
            { ...base, errors: [...new Set([...(base.errors ?? []), ...outcome.errors])] },
            positionAfter(position, "advanced", to),
            generation,
            nowIso,
          );
          next = to;
        } else {
          status = enterFailure(base, position.phase, outcome.errors, outcome.category ?? "Critical", generation, nowIso);
          next = "MigrationFailed";
        }
        break;
      }
      case "wait": {
        let conditions = (base.conditions ?? []).filter((c) => c.durable || c.category !== "Warn" || (outcome.warnings ?? []).some((w) => w.type === c.type));
        for (const warning of outcome.warnings ?? []) conditions = setCondition(conditions, warning, nowIso);
        status = { ...base, conditions };
        break;
      }
    }
    if (JSON.stringify(status) !== JSON.stringify(dvm.status)) {
      try {
        await this.store.writeStatus(dvm, status);
      } catch (error) {
        if (error instanceof KubeApiError && error.isConflict) {
          onConflict();
          return { kind: "retry", phase: position.phase, error: "status write conflict: requeue", retryAfterMs: CONFLICT_REQUEUE_MS };
        }
        return { kind: "retry", phase: position.phase, error: error instanceof Error ? error.message : String(error), retryAfterMs: ERROR_REQUEUE_MS };
      }
    }
    if (outcome.kind === "wait")
      return { kind: "waiting", phase: position.phase, reason: outcome.reason, requeueAfterMs: outcome.afterMs ?? phaseSpec(position.phase).requeueMs };
    return { kind: "advanced", phase: position.phase, next, requeueAfterMs: phaseSpec(next).requeueMs };
  }

  /** The context our runner builds (buildPhaseContext), with attempt 1: the baseline has no ledger. */
  private context(dvm: DirectVolumeMigration, position: Position): Promise<PhaseContext> {
    return buildPhaseContext({
      dvm,
      parsed: parseDvmSpec(dvm.spec),
      position,
      clusters: this.resolver,
      // The same policy as our runner gets: the baseline must not fail where ours may run.
      policy: CHAOS_MIGRATION_POLICY,
      attempt: 1,
      clock: systemClock,
      log: silentLogger,
    });
  }
}
