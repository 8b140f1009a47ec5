/**
 * A phase function in a process of its own, driven over IPC by the harness:
 *   node --import tsx test/chaos/harness/worker.ts      (forked, with an IPC channel)
 * It runs our real runner. Every body entry and exit is reported, and acknowledged by the channel,
 * before the body runs or the runner continues; when the crash plan says so, the process SIGKILLs
 * itself right after a body returned: side effects done, ledger completion not recorded. Like Lambda, it
 * also dies when an invocation outlives the function timeout (shorter than the ledger lease).
 */

import { KubeConfig } from "@kubernetes/client-node";
import { createLedgerClient } from "../../../src/aws/ledger";
import type { ExecutablePhaseName } from "../../../src/dvm/itinerary";
import { type BodyHooks, crashPlan, failurePlan, slowBodyPlan } from "./bodies";
import { type DynamoInstrument, instrumentDynamo } from "./dynamoFaults";
import { buildOurRunner, type OurRunner } from "./ourRunner";
import type { FromWorker, ToWorker, WorkerConfig } from "./workerProtocol";

if (!process.send) throw new Error("worker.ts must be started with an IPC channel (child_process.fork)");

function send(message: FromWorker): Promise<void> {
  return new Promise((resolve, reject) => process.send!(message, undefined, {}, (error) => (error ? reject(error) : resolve())));
}

let runner: OurRunner | undefined;
let dynamo: DynamoInstrument | undefined;
let keys = 0;
let timeoutMs = 60_000;

function init(config: WorkerConfig): void {
  timeoutMs = config.functionTimeoutMs;
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(config.hostKubeconfigPath);
  const client = createLedgerClient({
    endpoint: config.dynamo.endpoint,
    region: config.dynamo.region,
    ...(config.dynamo.credentials ? { credentials: config.dynamo.credentials } : {}),
  });
  dynamo = instrumentDynamo(client, config.throttle);
  const plan = crashPlan(config.crashPhases as ExecutablePhaseName[], config.crashAttempts);
  const hooks: BodyHooks = {
    enter: async (entry) => {
      const key = `${process.pid}:${keys++}`;
      await send({ type: "enter", key, entry });
      return key;
    },
    exit: (key, outcome, error) => send({ type: "exit", key, outcome, at: Date.now(), ...(error ? { error } : {}) }),
    crashAfter: (ctx, outcome) => plan(ctx, outcome),
    crash: async () => {
      process.kill(process.pid, "SIGKILL");
      return new Promise<never>(() => {});
    },
    ...(config.slowBodies ? { stall: slowBodyPlan(config.leaseMs, config.functionTimeoutMs - 1_500) } : {}),
    ...(config.failPhases?.length ? { inject: failurePlan(config.failPhases as ExecutablePhaseName[]) } : {}),
  };
  const statusCrashPhases = new Set(config.statusCrashPhases ?? []);
  const statusCrashesDone = new Set(config.statusCrashesDone ?? []);
  runner = buildOurRunner({
    hostKubeConfig: kubeConfig,
    dynamo: client,
    tableName: config.tableName,
    leaseMs: config.leaseMs,
    hooks,
    // The write that moves the DVM out of a crash phase: the ledger holds the completion, the status not yet.
    beforeStatusWrite: async (dvm, status) => {
      const from = dvm.status.phase;
      const key = `${dvm.metadata.uid}/${from}`;
      if (!from || !statusCrashPhases.has(from) || status.phase === from || statusCrashesDone.has(key)) return;
      await send({ type: "statusCrash", key });
      process.kill(process.pid, "SIGKILL");
      await new Promise<never>(() => {});
    },
  });
}

process.on("message", (message: ToWorker) => {
  switch (message.type) {
    case "init":
      init(message.config);
      void send({ type: "ready" });
      return;
    case "invoke": {
      const { id, request, staleDvm } = message;
      const timer = setTimeout(() => {
        void send({ type: "timeout", id }).finally(() => process.kill(process.pid, "SIGKILL"));
      }, timeoutMs);
      runner!
        .invoke(request, staleDvm)
        .finally(() => clearTimeout(timer))
        .then(
          ({ result, stats, bodyMs }) => send({ type: "result", id, result, stats, bodyMs, dynamo: dynamo!.counts() }),
          (error: unknown) =>
            send({ type: "result", id, error: error instanceof Error ? `${error.name}: ${error.message}` : String(error), dynamo: dynamo!.counts() }),
        )
        .catch(() => undefined);
      return;
    }
  }
});

// The parent going away ends the worker too.
process.on("disconnect", () => process.exit(0));
