/**
 * The relay's Prometheus metrics (prom-client, in a Registry of its own, served on the health port at
 * /metrics). The Relay and the replica only call the hooks below; what becomes a series, and how many,
 * is decided here.
 *
 * Per-DVM series carry namespace, name and uid (object names, no secret) and, for the phase, a phase of
 * the itinerary or "Unknown": a status written by hand cannot mint label values. Their number is bounded
 * (`maxDvmSeries`): DVMs beyond it are counted in dvm_relay_dvms_unexported, not exported. Progress comes
 * from the DVM watch events' status.progress (three numbers); list rows carry none, so a DVM's progress
 * appears with its next event. A forgotten DVM (completed, failed, deleted) loses its series at once.
 */

import { Counter, Gauge, Histogram, Registry } from "prom-client";
import { isPhaseName } from "../dvm/itinerary";
import type { DvmProgress, ObservedDvm } from "./observed";
import { LambdaInvokeError, RemoteFunctionError } from "./transport";

/** What the Relay reports as it works; RelayMetrics implements it, NO_RELAY_METRICS ignores it. */
export interface RelayMetricsHooks {
  /** A DVM event, list or resync asked for a forward; `coalesced`: one was already waiting, delayed or running. */
  triggered(coalesced: boolean): void;
  /** The transport accepted a request after `seconds`; `result` is the RunResult's kind, or "accepted" (fire-and-forget). */
  forwarded(seconds: number, result: string): void;
  /** The transport rejected a request after `seconds`. */
  forwardFailed(seconds: number, error: unknown): void;
  /** A live DVM as the relay last saw it; `progress` only from a watch event's status. */
  dvmObserved(dvm: ObservedDvm, progress?: DvmProgress): void;
  /** The relay no longer tracks this DVM: its series go. */
  dvmForgotten(uid: string): void;
}

/** What the replica reports: it starts or stops leading (a failover is a start on another replica). */
export interface LeadershipHooks {
  leadershipChanged(leading: boolean): void;
}

export const NO_RELAY_METRICS: RelayMetricsHooks & LeadershipHooks = {
  triggered: () => undefined,
  forwarded: () => undefined,
  forwardFailed: () => undefined,
  dvmObserved: () => undefined,
  dvmForgotten: () => undefined,
  leadershipChanged: () => undefined,
};

/** The replica's state the gauges read at scrape time (ReplicaStats fits). */
export interface RelayGaugeSource {
  role: string;
  queueDepth?: number;
  inFlight?: number;
  delayed?: number;
  liveDvms?: number;
  watches?: Array<{ name: string; connected: boolean }>;
}

export interface RelayMetricsOptions {
  /** At most this many DVMs get per-DVM series (0: none). */
  maxDvmSeries: number;
  /** Read at each scrape for the queue, watch and leader gauges. */
  source?: () => RelayGaugeSource;
}

export const DEFAULT_MAX_DVM_SERIES = 1_000;

/** Why a forward failed, as a bounded label value. */
export type ForwardErrorKind = "function_error" | "invoke_status" | "throttled" | "not_found" | "denied" | "network" | "other";

export function forwardErrorKind(error: unknown): ForwardErrorKind {
  if (error instanceof RemoteFunctionError) return "function_error";
  if (error instanceof LambdaInvokeError) return "invoke_status";
  const name = error instanceof Error ? error.name : "";
  if (/Throttl|TooManyRequests/.test(name)) return "throttled";
  if (name === "ResourceNotFoundException") return "not_found";
  if (/AccessDenied|Unrecognized|InvalidSignature|ExpiredToken|CredentialsProvider/.test(name)) return "denied";
  const code = (error as { code?: unknown } | null)?.code;
  if (name === "TimeoutError" || (typeof code === "string" && /^E[A-Z]+$/.test(code))) return "network";
  return "other";
}

const DVM_LABELS = ["namespace", "name", "uid"] as const;
type DvmLabels = Record<(typeof DVM_LABELS)[number], string>;

/** Every metric the relay exports: name, type, labels. docs/operations.md lists the same (a unit test compares). */
export const RELAY_METRIC_NAMES = {
  triggers: "dvm_relay_triggers_total",
  coalesced: "dvm_relay_coalesced_events_total",
  forwards: "dvm_relay_forwards_total",
  errors: "dvm_relay_forward_errors_total",
  latency: "dvm_relay_invoke_duration_seconds",
  queueDepth: "dvm_relay_queue_depth",
  inFlight: "dvm_relay_in_flight",
  delayed: "dvm_relay_delayed",
  liveDvms: "dvm_relay_live_dvms",
  unexported: "dvm_relay_dvms_unexported",
  watchConnected: "dvm_relay_watch_connected",
  leader: "dvm_relay_leader",
  transitions: "dvm_relay_leader_transitions_total",
  dvmPhase: "dvm_relay_dvm_phase",
  dvmBytes: "dvm_relay_dvm_bytes_transferred",
  dvmTotal: "dvm_relay_dvm_bytes_total",
  dvmRate: "dvm_relay_dvm_bytes_per_second",
} as const;

export class RelayMetrics implements RelayMetricsHooks, LeadershipHooks {
  readonly registry = new Registry();
  private readonly maxDvmSeries: number;
  /** The DVMs that have series, with their phase label (to remove the old one on a change). */
  private readonly exported = new Map<string, { labels: DvmLabels; phase: string }>();
  private readonly triggers: Counter;
  private readonly coalesced: Counter;
  private readonly forwards: Counter<"result">;
  private readonly errors: Counter<"kind">;
  private readonly latency: Histogram<"outcome">;
  private readonly transitions: Counter<"to">;
  private readonly dvmPhase: Gauge<"namespace" | "name" | "uid" | "phase">;
  private readonly dvmBytes: Gauge<"namespace" | "name" | "uid">;
  private readonly dvmTotal: Gauge<"namespace" | "name" | "uid">;
  private readonly dvmRate: Gauge<"namespace" | "name" | "uid">;

  constructor(options: RelayMetricsOptions) {
    this.maxDvmSeries = options.maxDvmSeries;
    const registers = [this.registry];
    const source: () => RelayGaugeSource = options.source ?? (() => ({ role: "standby" }));
    const N = RELAY_METRIC_NAMES;
    this.triggers = new Counter({ name: N.triggers, help: "Watch events, lists and resyncs that asked to forward a DVM.", registers });
    this.coalesced = new Counter({
      name: N.coalesced,
      help: "Triggers that joined a forward already waiting, delayed or running for the same DVM instead of adding one.",
      registers,
    });
    this.forwards = new Counter({
      name: N.forwards,
      help: "Reconcile requests the transport accepted, by the function's result kind (accepted: fire-and-forget).",
      labelNames: ["result"],
      registers,
    });
    this.errors = new Counter({
      name: N.errors,
      help: "Reconcile requests the transport rejected, by kind (each is retried).",
      labelNames: ["kind"],
      registers,
    });
    this.latency = new Histogram({
      name: N.latency,
      help: "Time of one invocation of a phase function, seconds (the whole run with RequestResponse).",
      labelNames: ["outcome"],
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
      registers,
    });
    const gauge = (name: string, help: string, read: (s: RelayGaugeSource) => number) =>
      new Gauge({
        name,
        help,
        registers,
        collect() {
          this.set(read(source()));
        },
      });
    gauge(N.queueDepth, "DVMs waiting for a worker.", (s) => s.queueDepth ?? 0);
    gauge(N.inFlight, "Invocations in flight.", (s) => s.inFlight ?? 0);
    gauge(N.delayed, "DVMs with a scheduled requeue.", (s) => s.delayed ?? 0);
    gauge(N.liveDvms, "DVMs the relay tracks (not finished, not deleted).", (s) => s.liveDvms ?? 0);
    gauge(N.unexported, "Live DVMs without per-DVM series (above RELAY_METRICS_MAX_DVM_SERIES).", (s) => Math.max(0, (s.liveDvms ?? 0) - this.exported.size));
    gauge(N.leader, "1 while this replica forwards (leader, or the only replica), else 0.", (s) => (s.role === "standby" ? 0 : 1));
    new Gauge({
      name: N.watchConnected,
      help: "1 while the watch is open, by watched collection (dvms, progress, pods@cluster).",
      labelNames: ["watch"],
      registers,
      collect() {
        this.reset();
        for (const watch of source().watches ?? []) this.set({ watch: watch.name }, watch.connected ? 1 : 0);
      },
    });
    this.transitions = new Counter({
      name: N.transitions,
      help: "Leadership changes of this replica: to=leader when it starts leading, to=standby when it stops.",
      labelNames: ["to"],
      registers,
    });
    this.dvmPhase = new Gauge({ name: N.dvmPhase, help: "1 for each live DVM's phase (status.phase).", labelNames: [...DVM_LABELS, "phase"], registers });
    this.dvmBytes = new Gauge({ name: N.dvmBytes, help: "A live DVM's bytes transferred so far (status.progress).", labelNames: DVM_LABELS, registers });
    this.dvmTotal = new Gauge({ name: N.dvmTotal, help: "A live DVM's total bytes to transfer (status.progress).", labelNames: DVM_LABELS, registers });
    this.dvmRate = new Gauge({ name: N.dvmRate, help: "A live DVM's transfer rate, bytes per second (status.progress).", labelNames: DVM_LABELS, registers });
  }

  /** The exposition text and its content type, for /metrics. */
  async render(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }

  /** How many DVMs have series now (at most maxDvmSeries). */
  exportedDvms(): number {
    return this.exported.size;
  }

  triggered(coalesced: boolean): void {
    this.triggers.inc();
    if (coalesced) this.coalesced.inc();
  }

  forwarded(seconds: number, result: string): void {
    this.forwards.inc({ result });
    this.latency.observe({ outcome: "ok" }, seconds);
  }

  forwardFailed(seconds: number, error: unknown): void {
    this.errors.inc({ kind: forwardErrorKind(error) });
    this.latency.observe({ outcome: "error" }, seconds);
  }

  dvmObserved(dvm: ObservedDvm, progress?: DvmProgress): void {
    let entry = this.exported.get(dvm.uid);
    if (!entry) {
      if (this.exported.size >= this.maxDvmSeries) return;
      entry = { labels: { namespace: dvm.namespace, name: dvm.name, uid: dvm.uid }, phase: "" };
      this.exported.set(dvm.uid, entry);
    }
    const phase = dvm.phase === undefined ? "None" : isPhaseName(dvm.phase) ? dvm.phase : "Unknown";
    if (phase !== entry.phase) {
      if (entry.phase) this.dvmPhase.remove({ ...entry.labels, phase: entry.phase });
      this.dvmPhase.set({ ...entry.labels, phase }, 1);
      entry.phase = phase;
    }
    if (progress?.bytesTransferred !== undefined) this.dvmBytes.set(entry.labels, progress.bytesTransferred);
    if (progress?.totalBytes !== undefined) this.dvmTotal.set(entry.labels, progress.totalBytes);
    if (progress?.bytesPerSecond !== undefined) this.dvmRate.set(entry.labels, progress.bytesPerSecond);
  }

  dvmForgotten(uid: string): void {
    const entry = this.exported.get(uid);
    if (!entry) return;
    this.exported.delete(uid);
    this.dvmPhase.remove({ ...entry.labels, phase: entry.phase });
    for (const gauge of [this.dvmBytes, this.dvmTotal, this.dvmRate]) gauge.remove(entry.labels);
  }

  /** A replica that stops leading no longer watches: its per-DVM series would go stale, so they go. */
  leadershipChanged(leading: boolean): void {
    this.transitions.inc({ to: leading ? "leader" : "standby" });
    if (!leading) for (const uid of [...this.exported.keys()]) this.dvmForgotten(uid);
  }
}
