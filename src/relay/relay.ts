/**
 * The watch relay: watches DVMs (and the pods and progress records they own), coalesces per uid, and
 * forwards reconcile requests to the phase functions. It decides nothing about phases: the function
 * reads the DVM fresh and the ledger makes each phase complete exactly once. The relay only has to be
 * prompt (forward on change), bounded (one forward per uid at a time, no hot loops, memory per live
 * DVM) and never lose a migration (resume watches, re-list after 410, periodic resync).
 */

import type { KubeConfig } from "@kubernetes/client-node";
import type { ReconcileRequest } from "../contracts/request";
import { POLL_REQUEUE_MS } from "../dvm/itinerary";
import { type BackoffOptions, backoffDelay } from "../lib/backoff";
import { type Clock, systemClock } from "../lib/clock";
import { definedFields } from "../lib/definedFields";
import { errorMessage } from "../lib/errorMessage";
import { jsonLogger, type Logger } from "../lib/log";
import { ListWatch, type ListWatchStats, type WatchEventType } from "./listWatch";
import { NO_RELAY_METRICS, type RelayMetricsHooks } from "./metrics";
import { type DvmProgress, dvmProgressOf, type ObservedDvm, objectKey, ownerUidOf, parseObservedDvm } from "./observed";
import { PodPhases } from "./podPhases";
import { DEFAULT_CONCURRENCY, WorkQueue } from "./queue";
import { dvmLister, dvmPath, OWNED_SELECTOR, POD_PATH, podVersionLister, progressPath, progressVersionLister, TRANSFER_POD_SELECTOR } from "./resources";
import {
  followUpAfter,
  forwardDelay,
  type LastForward,
  needsForwarding,
  type ReportedPhase,
  recordForward,
  requestPhase,
  type TriggerContext,
} from "./schedule";
import type { RelayTransport } from "./transport";

/** A cluster whose labelled pods drive their DVM (a source or destination other than the host). */
export interface RelayCluster {
  name: string;
  kubeConfig: KubeConfig;
}

export interface RelayOptions {
  /** The host cluster: where the DVMs and their progress records live. */
  kubeConfig: KubeConfig;
  /** Where requests go (Lambda, in-process, ...). */
  transport: RelayTransport;
  /** More clusters to watch labelled pods on (source and destination). Default: none. */
  clusters?: RelayCluster[];
  /** Watch labelled pods on the host cluster too. Default true (the host is often one side). */
  watchHostPods?: boolean;
  /** Only DVMs (and progress records) in this namespace. Default: all namespaces. Pods: always all. */
  namespace?: string;
  /** Every this often, every live DVM is triggered again (a safety net for lost invocations). Default 60 s. */
  resyncMs?: number;
  /** Forwards in flight at once, across uids. Default 16. */
  concurrency?: number;
  /** Server-side timeout of each watch request, seconds. Default: random in [300, 600) per request. */
  watchTimeoutSeconds?: number;
  /** Retry delays after a transport error, per uid. Default 500 ms doubling to 30 s. */
  retryBackoff?: BackoffOptions;
  /** Delays after a failed list or a broken watch. Default 500 ms doubling to 30 s. */
  watchBackoff?: BackoffOptions;
  /** How long stop() lets in-flight forwards finish. Default 10 s. */
  stopTimeoutMs?: number;
  /**
   * The poll delay of wait phases: how soon the DVM's own changes (status, progress records) and the
   * fallback of a deletion forward it again. Default the itinerary's POLL_REQUEUE_MS; tests lengthen it
   * to show that a wait ends on the event it waits for.
   */
  pollMs?: number;
  /** Default: JSON lines on stdout with component "relay". */
  log?: Logger;
  /** Where forwards, triggers and per-DVM progress are counted (src/relay/metrics.ts). Default: nowhere. */
  metrics?: RelayMetricsHooks;
  clock?: Clock;
}

export const RELAY_DEFAULTS = {
  resyncMs: 60_000,
  concurrency: DEFAULT_CONCURRENCY,
  stopTimeoutMs: 10_000,
  watchHostPods: true,
} as const;

/** What /readyz and /healthz report. */
export interface RelayStats {
  /** The DVM watch is open now. */
  watchConnected: boolean;
  /** The DVM list has been read at least once. */
  synced: boolean;
  /** ISO time of the last watch event of any watched collection. */
  lastEventAt?: string;
  /** DVMs the relay tracks: not Completed, not deleted. */
  liveDvms: number;
  /** Uids with any queue state (waiting, in flight, delayed): bounded by live DVMs plus forwards in flight. */
  queuedUids: number;
  /** Uids waiting for a worker now. */
  queueDepth: number;
  inFlight: number;
  /** Uids with a scheduled requeue. */
  delayed: number;
  /** Requests the transport accepted. */
  forwarded: number;
  /** Requests the transport rejected (each is retried with backoff). */
  errors: number;
  /** Objects skipped because they could not be read (no uid, name, namespace, resourceVersion). */
  malformed: number;
  /** Each watched collection (DVMs, progress records, pods per cluster). */
  watches: WatchStats[];
}

/** A watch's stats with its last event time as an ISO string, like the rest of the report. */
export type WatchStats = Omit<ListWatchStats, "lastEventAt"> & { lastEventAt?: string };

/** One live DVM: its last observed identity and phase, and the relay's bookkeeping for it. */
interface LiveDvm {
  dvm: ObservedDvm;
  lastForward?: LastForward;
  /** Consecutive transport errors, for the retry backoff. */
  failures: number;
  /**
   * The phase the last result said the DVM moved to, and the resourceVersion the relay had then: until a
   * newer event arrives, the next request names that phase (the watch event of the move may still be
   * on its way). A guess either way: the function decides from its own read.
   */
  reported?: ReportedPhase;
  /** The phase each of its pods was last seen in: which pod change is a milestone. */
  pods: PodPhases;
}

export class Relay {
  private readonly log: Logger;
  private readonly clock: Clock;
  private readonly metrics: RelayMetricsHooks;
  private readonly live = new Map<string, LiveDvm>();
  private readonly queue: WorkQueue<string, string>;
  private readonly watches: ListWatch[] = [];
  private dvmWatch: ListWatch | undefined;
  private resyncTimer: ReturnType<typeof setInterval> | undefined;
  private started = false;
  private stopping = false;
  private readonly counters = { forwarded: 0, errors: 0, malformed: 0 };
  private readonly pollMs: number;

  constructor(private readonly options: RelayOptions) {
    this.log = options.log ?? jsonLogger({ component: "relay" });
    this.clock = options.clock ?? systemClock;
    this.pollMs = options.pollMs ?? POLL_REQUEUE_MS;
    this.metrics = options.metrics ?? NO_RELAY_METRICS;
    this.queue = new WorkQueue<string, string>({
      concurrency: options.concurrency ?? RELAY_DEFAULTS.concurrency,
      handler: (uid, reason) => this.forward(uid, reason),
      onHandlerError: (uid, error) => this.log.error("forward crashed", { uid, error: errorMessage(error) }),
      now: () => this.clock.now(),
    });
  }

  /** Starts the watches and the resync. Returns at once; see stats().synced. */
  start(): void {
    if (this.started) return;
    this.started = true;
    const { kubeConfig, namespace, watchTimeoutSeconds } = this.options;
    const common = {
      log: this.log,
      clock: this.clock,
      ...definedFields({ timeoutSeconds: watchTimeoutSeconds, backoff: this.options.watchBackoff }),
    };

    this.dvmWatch = new ListWatch({
      ...common,
      name: "dvms",
      kubeConfig,
      path: dvmPath(namespace),
      list: dvmLister(kubeConfig, namespace),
      onList: (items, initial) => this.onDvmList(items, initial),
      onEvent: (type, object) => this.onDvmEvent(type, object),
    });
    this.watches.push(this.dvmWatch);

    this.watches.push(
      new ListWatch({
        ...common,
        name: "progress",
        kubeConfig,
        path: progressPath(namespace),
        labelSelector: OWNED_SELECTOR,
        list: progressVersionLister(kubeConfig, namespace),
        onList: (_items, initial) => this.onOwnedList("progress", initial),
        onEvent: (type, object) => this.onOwnedEvent("progress", "progress", type, object),
      }),
    );

    const podClusters: RelayCluster[] = [
      ...((this.options.watchHostPods ?? RELAY_DEFAULTS.watchHostPods) ? [{ name: "host", kubeConfig }] : []),
      ...(this.options.clusters ?? []),
    ];
    for (const cluster of podClusters) {
      const name = `pods@${cluster.name}`;
      this.watches.push(
        new ListWatch({
          ...common,
          name,
          kubeConfig: cluster.kubeConfig,
          path: POD_PATH,
          labelSelector: TRANSFER_POD_SELECTOR,
          list: podVersionLister(cluster.kubeConfig),
          onList: (_items, initial) => this.onOwnedList(name, initial),
          onEvent: (type, object) => this.onOwnedEvent(cluster.name, "pod", type, object),
        }),
      );
    }

    for (const watch of this.watches) watch.start();
    const resyncMs = this.options.resyncMs ?? RELAY_DEFAULTS.resyncMs;
    if (resyncMs > 0) {
      this.resyncTimer = setInterval(() => this.triggerAll("resync"), resyncMs);
      this.resyncTimer.unref?.();
    }
    this.log.info("relay started", { namespace: namespace ?? "(all)", watches: this.watches.map((w) => w.snapshot().name) });
  }

  /**
   * Stops the watches and the resync, drops work not yet started (a successor re-lists it), and lets
   * forwards in flight finish for up to `timeoutMs`. Resolves true when they all finished.
   */
  async stop(timeoutMs = this.options.stopTimeoutMs ?? RELAY_DEFAULTS.stopTimeoutMs): Promise<boolean> {
    if (this.stopping) return this.queue.drain(timeoutMs);
    this.stopping = true;
    clearInterval(this.resyncTimer);
    // The queue first: no forward starts after stop() is called, even while the watches wind down
    // (a relay that lost its leadership must stop forwarding at once, src/relay/leaderElection.ts).
    this.queue.close();
    await Promise.all(this.watches.map((w) => w.stop()));
    const drained = await this.queue.drain(timeoutMs);
    this.log.info("relay stopped", { drained, inFlight: this.queue.inFlight() });
    return drained;
  }

  stats(): RelayStats {
    const snapshots = this.watches.map((w) => w.snapshot());
    const dvms = this.dvmWatch?.snapshot();
    const lastEventAt = Math.max(0, ...snapshots.map((w) => w.lastEventAt ?? 0));
    const watches = snapshots.map(
      ({ lastEventAt: at, ...rest }): WatchStats => ({
        ...rest,
        ...(at !== undefined ? { lastEventAt: new Date(at).toISOString() } : {}),
      }),
    );
    return {
      watchConnected: dvms?.connected ?? false,
      synced: dvms?.synced ?? false,
      ...(lastEventAt > 0 ? { lastEventAt: new Date(lastEventAt).toISOString() } : {}),
      liveDvms: this.live.size,
      queuedUids: this.queue.size(),
      queueDepth: this.queue.depth(),
      inFlight: this.queue.inFlight(),
      delayed: this.queue.delayedCount(),
      ...this.counters,
      watches,
    };
  }

  /** Ready to serve: the DVM list was read and its watch is open. */
  ready(): boolean {
    const stats = this.stats();
    return !this.stopping && stats.synced && stats.watchConnected;
  }

  private onDvmEvent(type: WatchEventType, object: unknown): void {
    const dvm = this.readDvm(object, type);
    if (!dvm) return;
    if (type === "DELETED" || !needsForwarding(dvm)) {
      this.forget(dvm.uid, type === "DELETED" ? "deleted" : `phase ${dvm.phase}`);
      return;
    }
    this.observe(dvm, dvmProgressOf(object));
    this.trigger(dvm.uid, `${type.toLowerCase()} rv=${dvm.resourceVersion}`);
  }

  /**
   * After a (re-)list: DVMs that are new or changed are triggered, and DVMs the relay knew that the
   * list no longer has were deleted while it was not watching, so they are forgotten.
   */
  private onDvmList(items: unknown[], initial: boolean): void {
    const listed = new Set<string>();
    for (const item of items) {
      const dvm = this.readDvm(item, "LIST");
      if (!dvm) continue;
      listed.add(dvm.uid);
      if (!needsForwarding(dvm)) {
        this.forget(dvm.uid, `phase ${dvm.phase}`);
        continue;
      }
      const before = this.live.get(dvm.uid)?.dvm.resourceVersion;
      this.observe(dvm);
      if (before !== dvm.resourceVersion) this.trigger(dvm.uid, initial ? "list" : "relist");
    }
    for (const uid of [...this.live.keys()]) {
      if (!listed.has(uid)) this.forget(uid, "not in the list (deleted while not watching)");
    }
    this.log.info(initial ? "DVMs listed" : "DVMs listed again", { listed: listed.size, live: this.live.size });
  }

  private onOwnedEvent(cluster: string, kind: string, type: WatchEventType, object: unknown): void {
    const uid = ownerUidOf(object);
    const entry = uid === undefined ? undefined : this.live.get(uid);
    // Only DVMs the relay knows are forwarded: a pod of a finished or foreign migration is noise.
    if (!uid || !entry) return;
    const key = objectKey(object);
    const pod = kind === "pod";
    const milestone = pod && entry.pods.observe(`${cluster}/${key}`, type, object);
    this.trigger(uid, `${kind} ${key} ${type.toLowerCase()}@${cluster}`, { podChange: pod, podMilestone: milestone });
  }

  /** Owned-object events may have been missed while the watch was expired: every live DVM gets a look. */
  private onOwnedList(watch: string, initial: boolean): void {
    if (!initial) this.triggerAll(`${watch} listed again`);
  }

  private readDvm(object: unknown, event: string): ObservedDvm | undefined {
    const parsed = parseObservedDvm(object);
    if (!parsed.ok) {
      this.counters.malformed += 1;
      this.log.warn("skipping a DirectVolumeMigration that cannot be read", { event, object: objectKey(object), error: parsed.error });
      return undefined;
    }
    if (parsed.statusProblem) {
      // Not the relay's to judge: the function reads the object fresh and records the problem.
      this.log.warn("DirectVolumeMigration has an unreadable status; forwarding it anyway", {
        uid: parsed.dvm.uid,
        dvm: `${parsed.dvm.namespace}/${parsed.dvm.name}`,
        problem: parsed.statusProblem,
      });
    }
    return parsed.dvm;
  }

  private observe(dvm: ObservedDvm, progress?: DvmProgress): void {
    this.metrics.dvmObserved(dvm, progress);
    const entry = this.live.get(dvm.uid);
    if (entry) entry.dvm = dvm;
    else this.live.set(dvm.uid, { dvm, failures: 0, pods: new PodPhases() });
  }

  /**
   * Enqueues `uid` now, or when its spacing since the last forward has passed (src/relay/schedule.ts
   * forwardDelay): the phase's requeue delay, or the short one for a pod change in a wait phase.
   */
  private trigger(uid: string, reason: string, pod: Pick<TriggerContext, "podChange" | "podMilestone"> = {}): void {
    const entry = this.live.get(uid);
    if (!entry || this.stopping) return;
    const delay = forwardDelay(this.clock.now(), entry.dvm, entry.lastForward, { ...pod, pollMs: this.pollMs });
    this.metrics.triggered(this.queue.has(uid));
    if (delay === 0) this.queue.add(uid, reason);
    else this.queue.addAfter(uid, reason, delay);
  }

  private triggerAll(reason: string): void {
    for (const uid of this.live.keys()) this.trigger(uid, reason);
  }

  private forget(uid: string, why: string): void {
    const known = this.live.delete(uid);
    this.metrics.dvmForgotten(uid);
    this.queue.forget(uid);
    if (known) this.log.debug("forgot DVM", { uid, why });
  }

  /** The queue's handler: one forward of one uid (never two at once for the same uid). */
  private async forward(uid: string, reason: string): Promise<void> {
    const entry = this.live.get(uid);
    if (!entry) return;
    const { dvm } = entry;
    const guess = requestPhase(entry.dvm, entry.reported);
    const request: ReconcileRequest = {
      uid,
      namespace: dvm.namespace,
      name: dvm.name,
      ...(dvm.generation !== undefined ? { generation: dvm.generation } : {}),
      resourceVersion: dvm.resourceVersion,
      ...guess,
      reason,
    };
    const key = { ...definedFields({ phase: dvm.phase, generation: dvm.generation }), ...(dvm.deleting ? { deleting: true } : {}) };
    const forwarded = recordForward(key, entry.lastForward, this.clock.now(), this.pollMs);
    entry.lastForward = forwarded;
    const log = this.log.child({ uid, dvm: `${dvm.namespace}/${dvm.name}`, phase: dvm.phase ?? "(none)" });

    let result: Awaited<ReturnType<RelayTransport["forward"]>>;
    const seconds = () => (this.clock.now() - forwarded.at) / 1000;
    try {
      result = await this.options.transport.forward(request, guess);
    } catch (error) {
      this.counters.errors += 1;
      this.metrics.forwardFailed(seconds(), error);
      // Forgotten (deleted, completed) while in flight: nothing to retry.
      if (this.live.get(uid) !== entry) return;
      entry.failures += 1;
      const retryInMs = backoffDelay(entry.failures, this.options.retryBackoff);
      log.warn("forward failed; retrying", { reason, error: errorMessage(error), failures: entry.failures, retryInMs });
      this.queue.addAfter(uid, "retry after transport error", retryInMs);
      return;
    }
    this.counters.forwarded += 1;
    this.metrics.forwarded(seconds(), result?.kind ?? "accepted");
    log.debug("forwarded", { reason, result: result?.kind ?? "(accepted)" });
    if (this.live.get(uid) !== entry) return;
    entry.failures = 0;
    if (result?.kind === "advanced" || result?.kind === "duplicate") entry.reported = { phase: result.next, basedOn: dvm.resourceVersion };
    // A failed attempt's retry delay (the runner's backoff, or the API server's Retry-After) holds events too.
    if (result?.kind === "retry") forwarded.notBefore = forwarded.at + result.retryAfterMs;

    // A deletion is followed until the DVM is gone (its DELETED event, or a "gone" result), whatever phase it was in.
    const next =
      entry.dvm.deleting && !result
        ? { kind: "requeue" as const, afterMs: this.pollMs, why: "deletion" }
        : followUpAfter(result, entry.dvm.phase, { pollMs: this.pollMs, earlyInARow: forwarded.earlyInARow ?? 0 });
    switch (next.kind) {
      case "requeue":
        this.queue.addAfter(uid, next.why, next.afterMs);
        break;
      case "forget":
        this.forget(uid, next.why);
        break;
      case "none":
        break;
      default: {
        const unexpected: never = next;
        throw new Error(`unexpected follow-up ${JSON.stringify(unexpected)}`);
      }
    }
  }
}
