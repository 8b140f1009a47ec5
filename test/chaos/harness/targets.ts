/**
 * What the harness delivers reconcile requests to: our phase function (in this process, or in worker
 * processes that can be killed), or the baseline controller (baseline.ts). All of them record what they
 * did in a Tally, the same way.
 */

import { type ChildProcess, fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import type { KubeConfig } from "@kubernetes/client-node";
import type { ReconcileRequest, RunResult } from "../../../src/contracts/request";
import type { DirectVolumeMigration } from "../../../src/dvm/types";
import { slowBodyPlan, tallyHooks } from "./bodies";
import { type DynamoCounts, type DynamoInstrument, instrumentDynamo, type ThrottleOptions } from "./dynamoFaults";
import type { ChaosEnvironment } from "./environment";
import { buildOurRunner, type OurRunner } from "./ourRunner";
import type { Tally } from "./tally";
import type { FromWorker, ToWorker, WorkerConfig } from "./workerProtocol";

/** Ours; the controller-runtime baseline reading an informer cache; the same loop with a fresh GET. */
export type TargetKind = "ours" | "baseline" | "fresh-get";

export interface InvokeHints {
  /** Serve this older version of the DVM as the invocation's read (a cache one write behind). */
  staleDvm?: DirectVolumeMigration;
}

export interface Target {
  readonly kind: TargetKind;
  readonly tally: Tally;
  /** Rejects when the invocation failed (a thrown error, a killed worker): the deliverer retries. */
  invoke(request: ReconcileRequest, hints: InvokeHints): Promise<RunResult>;
  /** DynamoDB requests so far (ours only). */
  dynamoCounts(): DynamoCounts | undefined;
  close(): Promise<void>;
}

export interface OurTargetOptions {
  leaseMs: number;
  throttle?: ThrottleOptions;
  /** Slow bodies that outlive or renew their lease (bodies.ts, slowBodyPlan). */
  slowBodies?: boolean;
  /** The runner's view of the host cluster, when it differs from the environment's (a slow API server). */
  hostKubeConfig?: KubeConfig;
}

/** Our runner in this process. */
export class OursInProcess implements Target {
  readonly kind = "ours";
  private readonly runner: OurRunner;
  private readonly dynamo: DynamoInstrument;
  private readonly client;

  constructor(
    env: ChaosEnvironment,
    readonly tally: Tally,
    options: OurTargetOptions,
  ) {
    this.client = env.dynamoClient();
    this.dynamo = instrumentDynamo(this.client, options.throttle);
    this.runner = buildOurRunner({
      hostKubeConfig: options.hostKubeConfig ?? env.host.kubeConfig,
      dynamo: this.client,
      tableName: env.tableName,
      leaseMs: options.leaseMs,
      hooks: { ...tallyHooks(tally), ...(options.slowBodies ? { stall: slowBodyPlan(options.leaseMs) } : {}) },
    });
  }

  async invoke(request: ReconcileRequest, hints: InvokeHints): Promise<RunResult> {
    const started = Date.now();
    try {
      const { result, stats, bodyMs } = await this.runner.invoke(request, hints.staleDvm);
      this.tally.invocation({
        uid: request.uid,
        kind: result.kind,
        durationMs: stats.durationMs,
        bodyMs,
        statusConflicts: stats.statusConflicts,
        takeover: stats.takeover ?? false,
        stale: !!hints.staleDvm,
      });
      return result;
    } catch (error) {
      this.tally.invocation({
        uid: request.uid,
        kind: "error",
        durationMs: Date.now() - started,
        bodyMs: 0,
        statusConflicts: 0,
        takeover: false,
        stale: !!hints.staleDvm,
      });
      throw error;
    }
  }

  dynamoCounts(): DynamoCounts {
    return this.dynamo.counts();
  }

  async close(): Promise<void> {
    this.client.destroy();
  }
}

const WORKER = fileURLToPath(new URL("./worker.ts", import.meta.url));
const REPO_ROOT = fileURLToPath(new URL("../../../", import.meta.url));

export class WorkerDied extends Error {
  override readonly name = "WorkerDied";
}

/** One phase-function process. Dies on purpose when its crash plan says so. */
class WorkerProcess {
  readonly child: ChildProcess;
  readonly ready: Promise<void>;
  exited = false;
  lastDynamo: DynamoCounts = { sent: {}, throttled: 0, serverErrors: 0 };
  private readonly pending = new Map<number, { resolve: (m: Extract<FromWorker, { type: "result" }>) => void; reject: (e: Error) => void }>();
  private nextId = 0;
  /** Uid of each invocation in flight, to attribute a timeout. */
  private readonly requests = new Map<number, string>();

  constructor(config: WorkerConfig, tally: Tally) {
    this.child = fork(WORKER, [], {
      cwd: REPO_ROOT,
      execArgv: ["--import", "tsx"],
      env: { ...process.env, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true" },
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    let readyResolve!: () => void;
    let readyReject!: (e: Error) => void;
    this.ready = new Promise<void>((resolve, reject) => ((readyResolve = resolve), (readyReject = reject)));
    this.ready.catch(() => undefined);
    this.child.on("message", (message: FromWorker) => {
      switch (message.type) {
        case "ready":
          readyResolve();
          break;
        case "enter":
          tally.enter(message.entry, message.key);
          break;
        case "exit":
          tally.exit(message.key, message.outcome, message.at, message.error);
          break;
        case "statusCrash":
          tally.statusCrashes.push(message.key);
          break;
        case "timeout": {
          const uid = this.requests.get(message.id);
          if (uid) tally.timeouts.push(uid);
          break;
        }
        case "result": {
          this.lastDynamo = message.dynamo;
          const waiter = this.pending.get(message.id);
          this.pending.delete(message.id);
          this.requests.delete(message.id);
          waiter?.resolve(message);
          break;
        }
      }
    });
    this.child.on("exit", () => {
      this.exited = true;
    });
    // A send to a process that was just killed fails with EPIPE before "exit" arrives: it is dead.
    this.child.on("error", () => {
      this.exited = true;
    });
    // "close" comes after the IPC channel delivered everything the process sent before it died (its
    // "crashed" report included); "exit" may come before.
    this.child.on("close", (code, signal) => {
      this.exited = true;
      tally.killOpen(`${this.child.pid}:`);
      const error = new WorkerDied(`phase function process ${this.child.pid} ended (${signal ?? `exit ${code}`})`);
      readyReject(error);
      for (const waiter of this.pending.values()) waiter.reject(error);
      this.pending.clear();
    });
    this.child.send({ type: "init", config } satisfies ToWorker, (error) => {
      if (error) readyReject(new WorkerDied(`phase function process ${this.child.pid} could not be started: ${error.message}`));
    });
  }

  call(request: ReconcileRequest, staleDvm: DirectVolumeMigration | undefined): Promise<Extract<FromWorker, { type: "result" }>> {
    if (this.exited) return Promise.reject(new WorkerDied("phase function process is gone"));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.requests.set(id, request.uid);
      this.child.send({ type: "invoke", id, request, ...(staleDvm ? { staleDvm } : {}) } satisfies ToWorker, (error) => {
        if (!error) return;
        this.exited = true;
        this.pending.delete(id);
        this.requests.delete(id);
        reject(new WorkerDied(`phase function process ${this.child.pid} is gone: ${error.message}`));
      });
    });
  }

  async stop(): Promise<void> {
    if (this.exited) return;
    const gone = new Promise<void>((resolve) => this.child.once("close", () => resolve()));
    this.child.kill("SIGTERM");
    await gone;
  }
}

/**
 * Our runner in worker processes, one per DVM (so a crash interrupts that DVM's phase only), started
 * again as soon as one dies. Needed for crash injection: the harness process itself is never killed.
 */
export class OursInWorkers implements Target {
  readonly kind = "ours";
  private readonly workers = new Map<string, WorkerProcess>();
  private readonly dead: WorkerProcess[] = [];
  private closing = false;

  constructor(
    private readonly config: WorkerConfig,
    readonly tally: Tally,
  ) {}

  /** Starts the DVMs' processes up front, so the first invocation does not pay for the start. */
  async prestart(uids: readonly string[]): Promise<void> {
    await Promise.all(uids.map((uid) => this.workerFor(uid).ready));
  }

  private workerFor(uid: string): WorkerProcess {
    let worker = this.workers.get(uid);
    if (!worker || worker.exited) {
      if (worker) this.dead.push(worker);
      const base = { ...this.config, statusCrashesDone: [...this.tally.statusCrashes] };
      const seeded = base.throttle
        ? { ...base, throttle: { ...base.throttle, seed: (base.throttle.seed ?? 7) + this.dead.length * 101 + this.workers.size } }
        : base;
      worker = new WorkerProcess(seeded, this.tally);
      const started = worker;
      // Replace a dead process at once, so the next invocation does not wait for a cold start; on
      // "close", when everything it sent has arrived (its status crash report included).
      started.child.once("close", () => {
        if (this.workers.get(uid) === started && !this.closing) this.workerFor(uid);
      });
      this.workers.set(uid, worker);
    }
    return worker;
  }

  async invoke(request: ReconcileRequest, hints: InvokeHints): Promise<RunResult> {
    const started = Date.now();
    const record = (kind: RunResult["kind"] | "error", extra: { durationMs?: number; bodyMs?: number; statusConflicts?: number; takeover?: boolean } = {}) =>
      this.tally.invocation({
        uid: request.uid,
        kind,
        durationMs: extra.durationMs ?? Date.now() - started,
        bodyMs: extra.bodyMs ?? 0,
        statusConflicts: extra.statusConflicts ?? 0,
        takeover: extra.takeover ?? false,
        stale: !!hints.staleDvm,
      });
    try {
      const worker = this.workerFor(request.uid);
      await worker.ready;
      const reply = await worker.call(request, hints.staleDvm);
      if (reply.error || !reply.result || !reply.stats) throw new Error(reply.error ?? "worker answered without a result");
      record(reply.result.kind, {
        durationMs: reply.stats.durationMs,
        bodyMs: reply.bodyMs ?? 0,
        statusConflicts: reply.stats.statusConflicts,
        takeover: reply.stats.takeover ?? false,
      });
      return reply.result;
    } catch (error) {
      record("error");
      throw error;
    }
  }

  dynamoCounts(): DynamoCounts {
    const total: DynamoCounts = { sent: {}, throttled: 0, serverErrors: 0, capacity: { write: 0, read: 0 } };
    for (const worker of [...this.dead, ...this.workers.values()]) {
      total.capacity!.write += worker.lastDynamo.capacity?.write ?? 0;
      total.capacity!.read += worker.lastDynamo.capacity?.read ?? 0;
      for (const [name, n] of Object.entries(worker.lastDynamo.sent)) total.sent[name] = (total.sent[name] ?? 0) + n;
      total.throttled += worker.lastDynamo.throttled;
      total.burstThrottled = (total.burstThrottled ?? 0) + (worker.lastDynamo.burstThrottled ?? 0);
      total.serverErrors += worker.lastDynamo.serverErrors;
      total.lostReplies = (total.lostReplies ?? 0) + (worker.lastDynamo.lostReplies ?? 0);
    }
    return total;
  }

  async close(): Promise<void> {
    this.closing = true;
    await Promise.all([...this.workers.values()].map((w) => w.stop()));
  }
}
