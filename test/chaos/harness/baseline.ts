/**
 * The baselines: upstream's DVM controller as controller-runtime runs it, with no ledger.
 *
 *   - one replica (mig-controller runs one leader), one worker, client-go's rate-limited work queue
 *     (workQueue.ts: a key never processed twice at once, queued duplicates merged, rate-limited requeue);
 *   - an informer per watched kind: the DVMs, and the progress records (DVMPs), mapped to their owning
 *     DVM as upstream's controller watches them. The cache is updated before the event handlers run, as
 *     client-go's shared informer does;
 *   - "baseline" reads the DVM from that cache; "fresh-get" reads it with a GET instead (the second
 *     baseline: fresh reads, still no ledger);
 *   - the same phase bodies as our runner, except that rsync client pods get a generated name ("rsync-",
 *     crane-lib's generateName) guarded by a label lookup, as upstream creates them, so a repeated body
 *     that misses the first one's pod creates a second pod;
 *   - the status is written with a resourceVersion-guarded update; a 409 requeues after 100 ms (FastReQ);
 *     an error requeues rate-limited; after a phase, an immediate rate-limited requeue as the seed's
 *     controller did, or the requeue task.go sets at HEAD (RequeuePolicy).
 *
 * Nothing injects stale reads here, and no watch latency is added. They come from the real mechanism of
 * mig-controller#1026: the requeue right after the status write (or an event that arrived during the
 * reconcile and marked the key dirty) reads the cache before the watch event of that write has arrived.
 * Each read is checked against the resourceVersion this replica last wrote, so stale reads are counted,
 * not assumed.
 */

import type { KubeConfig } from "@kubernetes/client-node";
import { MigrationInputError } from "../../../src/contracts/inputError";
import { LABEL } from "../../../src/contracts/labels";
import type { RunResult } from "../../../src/contracts/request";
import { setCondition } from "../../../src/dvm/conditions";
import { type ExecutablePhaseName, nextPhase, type PhaseName } from "../../../src/dvm/itinerary";
import { enterFailure, enterPhase, type Position, positionAfter, positionOf } from "../../../src/dvm/status";
import {
  type DirectVolumeMigration,
  DVM_API_VERSION,
  DVM_GROUP,
  DVM_KIND,
  DVM_PLURAL,
  DVM_VERSION,
  DVMP_KIND,
  DVMP_PLURAL,
  type DvmStatus,
  parseDvmSpec,
} from "../../../src/dvm/types";
import type { Cluster, EnsureResult, MigrationClusters } from "../../../src/kube/cluster";
import { KubeDvmStore, toDvm } from "../../../src/kube/dvmStore";
import { KubeApiError } from "../../../src/kube/errors";
import type { KubeObject } from "../../../src/kube/objects";
import { type ClusterResolver, SecretClusterResolver } from "../../../src/kube/resolver";
import { systemClock } from "../../../src/lib/clock";
import { silentLogger } from "../../../src/lib/log";
import { PHASE_BODIES } from "../../../src/phases";
import { CLIENT_ROLE } from "../../../src/phases/rsyncOperations";
import type { PhaseContext, PhaseOutcome } from "../../../src/phases/types";
import { buildPhaseContext, migrationTypeOf } from "../../../src/runner/runner";
import { type Bodies, countedBodies, crashPlan, failurePlan, invocationScope, SimulatedCrash, tallyHooks } from "./bodies";
import type { Driver } from "./drivers";
import { Follow, type ObservedEvent } from "./listWatch";
import { type MtcCounts, mtcQuiesceBodies, WorkloadInformers } from "./mtcQuiesce";
import { CHAOS_MIGRATION_POLICY } from "./ourRunner";
import { type Random, sleep } from "./random";
import type { Tally } from "./tally";
import type { InvokeHints, Target, TargetKind } from "./targets";
import { RateLimitingQueue } from "./workQueue";

/** task.go's FastReQ: after a Conflict, and for the phases that never set a requeue. */
const FAST_REQ_MS = 100;
/** task.go's PollReQ: waiting phases. */
const POLL_REQ_MS = 3_000;
/** A crashed controller pod is back (a new process: empty cache, empty queue) after this long. */
export const BASELINE_RESTART_MS = 2_000;

/**
 * What upstream's task.go sets after each phase advanced (dvm-anchor §1.2): 0 is NoReQ (the next
 * reconcile comes from a watch event), FastReQ where the phase never sets it, PollReQ where the
 * assignment comes after next() (the wait for stale resources). Ours without an upstream twin: NoReQ.
 */
const REQUEUE_AFTER_ADVANCE: Partial<Record<PhaseName, number>> = {
  Started: FAST_REQ_MS,
  WaitForStaleRsyncResourcesTerminated: POLL_REQ_MS,
  WaitForRsyncResourcesTerminated: POLL_REQ_MS,
};

/**
 * After a phase advanced:
 *   - "seed": what the controller of the seed's run did (March 2021, before mig-controller#1013, the
 *     code #1026 was filed against): it "requeued immediately after phases" (Requeue: true, so the work
 *     queue's rate limiter: 5 ms, 10 ms, ... per key until a result without it forgets the key). That
 *     requeue can read the cache before the status write's watch event arrived.
 *   - "head": task.go at HEAD (after #1013): NoReQ after most phases, so the next reconcile normally
 *     comes from the watch event of its own write; stale reads then need another event during a reconcile.
 * Waits poll at PollReQ and a Conflict requeues after FastReQ in both.
 */
export type RequeuePolicy = "seed" | "head";

/** crane-lib's generateName for rsync client pods. */
export const UPSTREAM_CLIENT_POD_PREFIX = "rsync-";

export interface BaselineOptions {
  /** Phases after whose body the controller process dies once per DVM (before the status write). */
  crashPhases?: readonly ExecutablePhaseName[];
  /** Phases that fail instead of running (bodies.ts, failurePlan). */
  failPhases?: readonly ExecutablePhaseName[];
  /** MTC's quiesce and unquiesce instead of ours (mtcQuiesce.ts), reading workloads from an informer cache. */
  mtcQuiesce?: boolean;
}

export interface ControllerOptions {
  /** The host cluster as the controller sees it (through a cuttable proxy in the relay scenario). */
  kubeConfig: KubeConfig;
  /** The namespace the controller watches (upstream: openshift-migration). */
  namespace: string;
  /** Replicas running at once: 1, or 2 during a rollout without leader election. */
  replicas: number;
  /** Every watch event delivered 2-3 times (the queue merges them). */
  duplicates: boolean;
  /** PollReQ, compressed as the harness compresses ours (default upstream's 3 s). */
  pollMs?: number;
  /** What a reconcile that advanced asks for (default "seed"; see RequeuePolicy). */
  requeue?: RequeuePolicy;
  random: Random;
}

/**
 * A baseline as the harness sees it. It drives itself (informers and a work queue), so `invoke` is not
 * used: `controllers()` starts its replicas.
 */
export class BaselineController implements Target {
  readonly crashed = new Set<string>();
  readonly bodies: Bodies;
  readonly mtc: MtcCounts = { refusedWrites: 0 };
  readonly mtcQuiesce: boolean;

  constructor(
    readonly kind: Extract<TargetKind, "baseline" | "fresh-get">,
    readonly tally: Tally,
    options: BaselineOptions = {},
  ) {
    const plan = crashPlan(options.crashPhases ?? []);
    this.mtcQuiesce = options.mtcQuiesce ?? false;
    const real = this.mtcQuiesce ? { ...PHASE_BODIES, ...mtcQuiesceBodies(this.mtc) } : PHASE_BODIES;
    this.bodies = countedBodies(
      {
        ...tallyHooks(tally),
        ...(options.failPhases?.length ? { inject: failurePlan(options.failPhases) } : {}),
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
      },
      real,
    );
  }

  invoke(_request: unknown, _hints: InvokeHints): Promise<RunResult> {
    return Promise.reject(new Error(`the ${this.kind} baseline drives itself from its informers: start controllers() instead`));
  }

  controllers(options: ControllerOptions): ControllerGroup {
    return new ControllerGroup(this, options);
  }

  dynamoCounts(): undefined {
    return undefined;
  }

  async close(): Promise<void> {}
}

/** The replicas of one baseline run, driven as the relay would be (start, restart, stop). */
export class ControllerGroup implements Driver {
  private replicas: ControllerReplica[] = [];
  private readonly retired: ControllerReplica[] = [];
  restarts = 0;

  constructor(
    private readonly baseline: BaselineController,
    private readonly options: ControllerOptions,
  ) {}

  start(): void {
    for (let i = 0; i < this.options.replicas; i++) this.replicas.push(new ControllerReplica(this.baseline, this.options).start());
  }

  /** A rollout: every replica stops and a new one (empty cache, empty queue) starts. */
  async restart(): Promise<void> {
    const old = this.replicas;
    this.replicas = [];
    await Promise.all(old.map((r) => r.stop()));
    this.retired.push(...old);
    this.replicas = old.map(() => new ControllerReplica(this.baseline, this.options).start());
    this.restarts++;
  }

  relists(): number {
    return [...this.retired, ...this.replicas].reduce((sum, r) => sum + r.relists(), 0);
  }

  watchConnected(): boolean {
    return false;
  }

  /** Merged adds and crashes, over every replica this group ran. */
  stats(): { merged: number; crashes: number } {
    const all = [...this.retired, ...this.replicas];
    return { merged: all.reduce((s, r) => s + r.merged(), 0), crashes: all.reduce((s, r) => s + r.crashes, 0) };
  }

  async stop(): Promise<void> {
    await Promise.all(this.replicas.map((r) => r.stop()));
    this.retired.push(...this.replicas);
    this.replicas = [];
  }
}

type ReconcileResult = { requeue: "no" } | { requeue: "after"; ms: number } | { requeue: "rateLimited" };

/** One controller process: informers, one work queue, one worker. A crash restarts it from nothing. */
class ControllerReplica {
  private cache = new Map<string, DirectVolumeMigration>();
  private queue = new RateLimitingQueue();
  private follows: Follow[] = [];
  private workloads: WorkloadInformers | undefined;
  private readonly store: KubeDvmStore;
  private readonly clusters: ClusterResolver;
  /** The resourceVersion of this process's last status write per key: a cache read older than it is stale. */
  private lastWritten = new Map<string, number>();
  private stopped = false;
  private worker: Promise<void> | undefined;
  private restarting: Promise<void> | undefined;
  private mergedBefore = 0;
  private listsBefore = 0;
  crashes = 0;
  private readonly pollMs: number;

  constructor(
    private readonly baseline: BaselineController,
    private readonly options: ControllerOptions,
  ) {
    this.pollMs = options.pollMs ?? POLL_REQ_MS;
    this.store = new KubeDvmStore(options.kubeConfig);
    const upstream = new UpstreamNaming(new SecretClusterResolver(options.kubeConfig));
    // MTC's quiesce reads through the manager's cached client; the fresh-get baseline reads by GET.
    this.clusters =
      baseline.mtcQuiesce && baseline.kind === "baseline"
        ? {
            resolve: async (...args) => {
              const clusters = await upstream.resolve(...args);
              return this.workloads ? { ...clusters, source: this.workloads.cachedReads(clusters.source) } : clusters;
            },
          }
        : upstream;
  }

  start(): this {
    const { kubeConfig, namespace } = this.options;
    const base = `/apis/${DVM_GROUP}/${DVM_VERSION}/namespaces/${namespace}`;
    this.follows = [
      new Follow(kubeConfig, { apiVersion: DVM_API_VERSION, kind: DVM_KIND, path: `${base}/${DVM_PLURAL}`, namespace }, (event, object) =>
        this.onDvm(event, object),
      ),
      new Follow(kubeConfig, { apiVersion: DVM_API_VERSION, kind: DVMP_KIND, path: `${base}/${DVMP_PLURAL}`, namespace }, (event, object) =>
        this.onProgress(event, object),
      ),
    ];
    for (const follow of this.follows) follow.start();
    // The workload cache of this process (a restart starts from nothing, as the DVM cache does).
    if (this.baseline.mtcQuiesce && this.baseline.kind === "baseline") this.workloads = new WorkloadInformers(kubeConfig).start();
    this.worker = this.work();
    return this;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.queue.shutDown();
    await this.restarting;
    await Promise.all(this.follows.map((f) => f.stop()));
    await this.workloads?.stop();
    await this.worker;
  }

  merged(): number {
    return this.mergedBefore + this.queue.merged;
  }

  relists(): number {
    return this.listsBefore + this.follows.reduce((sum, f) => sum + Math.max(0, f.stats.lists - 1), 0);
  }

  private enqueue(key: string): void {
    this.queue.add(key);
    if (this.options.duplicates) {
      const copies = 1 + Math.floor(this.options.random() * 2);
      for (let i = 0; i < copies; i++) setTimeout(() => this.queue.add(key), Math.floor(this.options.random() * 40));
    }
  }

  private onDvm(event: ObservedEvent, raw: unknown): void {
    const dvm = toDvm(raw);
    const key = `${dvm.metadata.namespace}/${dvm.metadata.name}`;
    if (dvm.metadata.namespace !== this.options.namespace) return;
    if (event === "DELETED") this.cache.delete(key);
    else this.cache.set(key, dvm);
    this.enqueue(key);
  }

  /** A progress record's event enqueues its controlling DVM (EnqueueRequestForOwner). */
  private onProgress(_event: ObservedEvent, raw: unknown): void {
    const meta = (raw as { metadata?: { namespace?: string; ownerReferences?: Array<{ kind?: string; name?: string; controller?: boolean }> } }).metadata;
    const owner = meta?.ownerReferences?.find((o) => o.controller && o.kind === DVM_KIND);
    if (!owner?.name || meta?.namespace !== this.options.namespace) return;
    this.enqueue(`${meta.namespace}/${owner.name}`);
  }

  private async work(): Promise<void> {
    for (;;) {
      const key = await this.queue.get();
      if (key === undefined) return;
      let result: ReconcileResult;
      try {
        result = await this.reconcile(key);
      } catch (error) {
        if (error instanceof SimulatedCrash) {
          this.queue.done(key);
          this.crash();
          return;
        }
        result = { requeue: "rateLimited" };
      }
      // controller-runtime's reconcileHandler.
      if (result.requeue === "rateLimited") this.queue.addRateLimited(key);
      else {
        this.queue.forget(key);
        if (result.requeue === "after") this.queue.addAfter(key, result.ms);
      }
      this.queue.done(key);
    }
  }

  /** The process died: everything in memory is gone; a new one lists and starts over. */
  private crash(): void {
    this.crashes++;
    this.mergedBefore += this.queue.merged;
    this.queue.shutDown();
    const follows = this.follows;
    this.follows = [];
    const workloads = this.workloads;
    this.workloads = undefined;
    this.restarting = (async () => {
      await Promise.all(follows.map((f) => f.stop()));
      await workloads?.stop();
      this.listsBefore += follows.reduce((sum, f) => sum + f.stats.lists, 0);
      await sleep(BASELINE_RESTART_MS);
      if (this.stopped) return;
      this.cache = new Map();
      this.queue = new RateLimitingQueue();
      this.lastWritten = new Map();
      this.start();
    })();
  }

  private async reconcile(key: string): Promise<ReconcileResult> {
    const [namespace, name] = key.split("/") as [string, string];
    const started = Date.now();
    const scope = { bodyMs: 0 };
    let statusConflicts = 0;
    let stale = false;
    let kind: RunResult["kind"] | "error" = "error";
    let uid = "";
    try {
      return await invocationScope.run(scope, async () => {
        const dvm = this.baseline.kind === "baseline" ? this.cache.get(key) : await this.store.get(namespace, name);
        // Gone (or not listed yet): controller-runtime ignores NotFound; the ADDED event comes.
        if (!dvm) return { requeue: "no" };
        uid = dvm.metadata.uid;
        const written = this.lastWritten.get(key);
        stale = written !== undefined && Number(dvm.metadata.resourceVersion) < written;
        const position = positionOf(dvm.status, migrationTypeOf(dvm));
        if (position.phase === "Completed") {
          kind = "finished";
          return { requeue: "no" };
        }
        let outcome: PhaseOutcome;
        try {
          outcome = await this.baseline.bodies[position.phase](await this.context(dvm, position));
        } catch (error) {
          if (error instanceof SimulatedCrash) throw error;
          if (!(error instanceof MigrationInputError)) {
            kind = "retry";
            return { requeue: "rateLimited" };
          }
          outcome = { kind: "fail", errors: error.errors, category: "Critical" };
        }
        const { status } = statusAfter(dvm, position, outcome);
        if (JSON.stringify(status) !== JSON.stringify(dvm.status)) {
          try {
            const rv = Number(await this.store.writeStatus(dvm, status));
            if (Number.isFinite(rv)) this.lastWritten.set(key, rv);
          } catch (error) {
            kind = "retry";
            if (error instanceof KubeApiError && error.isConflict) {
              statusConflicts++;
              return { requeue: "after", ms: FAST_REQ_MS };
            }
            return { requeue: "rateLimited" };
          }
        }
        if (outcome.kind === "wait") {
          kind = "waiting";
          return { requeue: "after", ms: this.pollMs };
        }
        kind = "advanced";
        if ((this.options.requeue ?? "seed") === "seed") return { requeue: "rateLimited" };
        const after = Math.min(REQUEUE_AFTER_ADVANCE[position.phase] ?? 0, this.pollMs);
        return after > 0 ? { requeue: "after", ms: after } : { requeue: "no" };
      });
    } finally {
      if (uid) this.baseline.tally.invocation({ uid, kind, durationMs: Date.now() - started, bodyMs: scope.bodyMs, statusConflicts, takeover: false, stale });
    }
  }

  /** The context our runner builds (buildPhaseContext), with attempt 1: the baseline has no ledger. */
  private context(dvm: DirectVolumeMigration, position: Position): Promise<PhaseContext> {
    return buildPhaseContext({
      dvm,
      parsed: parseDvmSpec(dvm.spec),
      position,
      clusters: this.clusters,
      // The same policy as our runner gets: the baseline must not fail where ours may run.
      policy: CHAOS_MIGRATION_POLICY,
      attempt: 1,
      clock: systemClock,
      log: silentLogger,
    });
  }
}

/** The status a reconcile writes after a phase body, as our runner's transitions compute it. */
function statusAfter(dvm: DirectVolumeMigration, position: Position, outcome: PhaseOutcome): { status: DvmStatus; next: PhaseName } {
  const nowIso = new Date().toISOString();
  const generation = dvm.metadata.generation;
  const base: DvmStatus = { ...dvm.status, ...outcome.status };
  switch (outcome.kind) {
    case "advance": {
      const to = nextPhase(position.itinerary, position.phase);
      return { status: enterPhase(base, positionAfter(position, "advanced", to), generation, nowIso), next: to };
    }
    case "fail": {
      if (position.itinerary === "VolumeMigrationFailed") {
        const to = nextPhase(position.itinerary, position.phase);
        const errors = [...new Set([...(base.errors ?? []), ...outcome.errors])];
        return { status: enterPhase({ ...base, errors }, positionAfter(position, "advanced", to), generation, nowIso), next: to };
      }
      return { status: enterFailure(base, position.phase, outcome.errors, outcome.category ?? "Critical", generation, nowIso), next: "MigrationFailed" };
    }
    case "wait": {
      let conditions = (base.conditions ?? []).filter((c) => c.durable || c.category !== "Warn" || (outcome.warnings ?? []).some((w) => w.type === c.type));
      for (const warning of outcome.warnings ?? []) conditions = setCondition(conditions, warning, nowIso);
      return { status: { ...base, conditions }, next: position.phase };
    }
  }
}

/** Clusters whose rsync client pods are created the way crane-lib creates them: generateName. */
class UpstreamNaming implements ClusterResolver {
  constructor(private readonly inner: ClusterResolver) {}

  async resolve(...args: Parameters<ClusterResolver["resolve"]>): Promise<MigrationClusters> {
    const clusters = await this.inner.resolve(...args);
    return { ...clusters, source: generatedClientPodNames(clusters.source) };
  }
}

/**
 * The body looks up the newest attempt by label first (as upstream does), then creates the pod: here
 * under a generated name, so a second body that missed the first one's pod makes a second pod.
 */
function generatedClientPodNames(cluster: Cluster): Cluster {
  const wrapped = Object.create(cluster) as Cluster;
  wrapped.ensure = <T extends KubeObject>(object: T): Promise<EnsureResult<T>> => {
    if (object.kind !== "Pod" || object.metadata.labels?.[LABEL.role] !== CLIENT_ROLE) return cluster.ensure(object);
    const { name: _name, ...metadata } = object.metadata;
    return cluster.ensure({ ...object, metadata: { ...metadata, generateName: UPSTREAM_CLIENT_POD_PREFIX } as unknown as T["metadata"] });
  };
  return wrapped;
}
