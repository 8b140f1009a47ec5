/**
 * What sends requests: either a loop per DVM that behaves like the relay (deliver, then again after the
 * result's requeue delay; several loops per DVM for concurrent invocations), or the real watch relay with
 * an in-process transport (for relay restarts and 410 Gone). Both go through a Deliverer, which adds the
 * event-stream faults. Requeue delays are capped (`capMs`) so a run takes seconds, not minutes.
 */

import type { KubeConfig } from "@kubernetes/client-node";
import type { ReconcileRequest, RunResult } from "../../../src/contracts/request";
import { silentLogger } from "../../../src/lib/log";
import { Relay } from "../../../src/relay/relay";
import type { RelayTransport } from "../../../src/relay/transport";
import { InProcessTransport } from "../../support/inProcessTransport";
import { type Deliverer, delayOf } from "./delivery";
import type { StartedMigration } from "./fixture";
import type { DvmHistory } from "./observatory";
import { type Random, sleep } from "./random";

export function requestFrom(history: DvmHistory, migration: StartedMigration, reason: string): ReconcileRequest {
  const latest = history.latestByUid(migration.uid);
  if (!latest) return { ...migration.request, reason };
  const { uid, namespace, name, generation, resourceVersion } = latest.metadata;
  // The phase as the watch shows it, as the relay sends it: a guess the runner checks.
  const phase = typeof latest.status.phase === "string" ? latest.status.phase : undefined;
  return { uid, namespace, name, generation, resourceVersion, ...(phase ? { phase } : {}), reason };
}

export interface LoopOptions {
  /** Independent loops per DVM: more than one means concurrent invocations for the same DVM. */
  loopsPerDvm: number;
  capMs: number;
  deadline: number;
  random: Random;
}

/** Longest wait after "busy" or "retry": the phase change (a watch event) usually comes first. */
export const MAX_RETRY_WAIT_MS = 1_000;

/**
 * How long to wait before the next delivery. Phase requeue delays are compressed to `capMs` (kwok pods
 * need no real time); "busy" and "retry" delays are kept (up to MAX_RETRY_WAIT_MS): polling a held
 * phase faster than the runner asks would only load the machine.
 */
export function nextDelay(result: RunResult, capMs: number): number {
  if (result.kind === "busy" || result.kind === "retry") return Math.min(MAX_RETRY_WAIT_MS, Math.max(capMs, result.retryAfterMs));
  return Math.min(capMs, Math.max(0, delayOf(result)));
}

/**
 * Drives every migration to Completed (as the watch shows it) or until the deadline. Like the relay, a
 * loop also wakes up early when the DVM's phase changes from the one it delivered at: a phase change
 * seen during the invocation (the invocation's own advance, usually) sends the next delivery at once,
 * as the relay's watch event does (src/relay/queue.ts re-runs a key that changed while in flight).
 */
export async function driveLoops(deliverer: Deliverer, history: DvmHistory, migrations: readonly StartedMigration[], options: LoopOptions): Promise<void> {
  const loop = async (migration: StartedMigration, index: number) => {
    if (index > 0) await sleep(Math.floor(options.random() * 60));
    for (let step = 0; Date.now() < options.deadline && history.completedAt(migration.uid) === undefined; step++) {
      const delivered = history.latestByUid(migration.uid)?.status.phase;
      const result = await deliverer.deliver(requestFrom(history, migration, `loop ${index} step ${step}`));
      if (result.kind === "finished" || result.kind === "gone") return;
      await history.waitUntil(() => history.latestByUid(migration.uid)?.status.phase !== delivered, nextDelay(result, options.capMs));
    }
  };
  await Promise.all(migrations.flatMap((m) => Array.from({ length: options.loopsPerDvm }, (_, i) => loop(m, i))));
}

/** A result with its delays compressed as nextDelay does, for a relay that schedules from it. */
export function cappedResult(result: RunResult, capMs: number): RunResult {
  if ("requeueAfterMs" in result) return { ...result, requeueAfterMs: nextDelay(result, capMs) };
  if ("retryAfterMs" in result) return { ...result, retryAfterMs: nextDelay(result, capMs) };
  return result;
}

export interface RelayDriverOptions {
  /** The relay's view of the host cluster (possibly through a CuttableProxy). */
  hostKubeConfig: KubeConfig;
  destination: KubeConfig;
  namespace: string;
  deliverer: Deliverer;
  /** Relays running at once (more than one: concurrent invocations, as two replicas would make). */
  replicas: number;
  capMs: number;
  /** How the relay forwards; default an in-process transport to the deliverer, with capped delays. */
  transport?: RelayTransport;
}

/** What drives a run by itself and can be restarted: the relay, or a baseline controller's replicas. */
export interface Driver {
  start(): void;
  restart(): Promise<void>;
  /** Lists beyond the first: re-lists after 410 Gone (and after restarts). */
  relists(): number;
  watchConnected(): boolean;
  stop(): Promise<void>;
}

/** The real relay (src/relay) forwarding to the deliverer through an InProcessTransport. */
export class RelayDriver implements Driver {
  private relays: Relay[] = [];
  private readonly retired: Relay[] = [];
  restarts = 0;

  constructor(private readonly options: RelayDriverOptions) {}

  start(): void {
    for (let i = 0; i < this.options.replicas; i++) this.relays.push(this.newRelay());
  }

  private newRelay(): Relay {
    const { deliverer, capMs } = this.options;
    const relay = new Relay({
      kubeConfig: this.options.hostKubeConfig,
      transport: this.options.transport ?? new InProcessTransport(async (request) => cappedResult(await deliverer.deliver(request), capMs)),
      clusters: [{ name: "destination", kubeConfig: this.options.destination }],
      namespace: this.options.namespace,
      resyncMs: 5_000,
      watchBackoff: { initialMs: 100, maxMs: 1_000 },
      retryBackoff: { initialMs: 100, maxMs: 1_000 },
      log: silentLogger,
    });
    relay.start();
    return relay;
  }

  /** Stops every relay (in-flight forwards finish) and starts new ones, which pick up from a list. */
  async restart(): Promise<void> {
    const old = this.relays;
    this.relays = [];
    await Promise.all(old.map((r) => r.stop(5_000)));
    this.retired.push(...old);
    this.relays = old.map(() => this.newRelay());
    this.restarts++;
  }

  /** Lists of the DVM collection beyond each relay's first one: re-lists after 410 Gone. */
  relists(): number {
    return [...this.retired, ...this.relays].reduce(
      (sum, relay) => sum + Math.max(0, (relay.stats().watches.find((w) => w.name === "dvms")?.lists ?? 1) - 1),
      0,
    );
  }

  watchConnected(): boolean {
    return this.relays.every((r) => r.stats().watchConnected);
  }

  async stop(): Promise<void> {
    await Promise.all(this.relays.map((r) => r.stop(5_000)));
    this.retired.push(...this.relays);
    this.relays = [];
  }
}
