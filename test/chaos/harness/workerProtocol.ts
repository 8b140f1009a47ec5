/** Messages between the harness and a phase-function worker process (worker.ts), over Node IPC. */
import type { ReconcileRequest, RunResult, RunStats } from "../../../src/contracts/request";
import type { DirectVolumeMigration } from "../../../src/dvm/types";
import type { DynamoCounts, ThrottleOptions } from "./dynamoFaults";
import type { DynamoEndpoint } from "./environment";
import type { BodyEntry, BodyOutcome } from "./tally";

export interface WorkerConfig {
  hostKubeconfigPath: string;
  dynamo: DynamoEndpoint;
  tableName: string;
  leaseMs: number;
  /**
   * The worker kills itself when an invocation runs longer than this, as Lambda ends a function at its
   * timeout. Shorter than the lease, so a live holder is never overtaken (the runner's premise).
   */
  functionTimeoutMs: number;
  /** Die right after these phases' bodies return, on their first `crashAttempts` attempts (default 1). */
  crashPhases: string[];
  crashAttempts?: number;
  /** These phases fail instead of running (bodies.ts, failurePlan). */
  failPhases?: string[];
  /**
   * Die after the ledger recorded these phases' completion and before the status write that leaves
   * them, once per DVM and phase: `statusCrashesDone` ("uid/phase") lists the ones already done.
   */
  statusCrashPhases?: string[];
  statusCrashesDone?: string[];
  /** Slow bodies (bodies.ts, slowBodyPlan), bounded by the function timeout. */
  slowBodies?: boolean;
  throttle?: ThrottleOptions;
}

export type ToWorker = { type: "init"; config: WorkerConfig } | { type: "invoke"; id: number; request: ReconcileRequest; staleDvm?: DirectVolumeMigration };

export type FromWorker =
  | { type: "ready" }
  | { type: "enter"; key: string; entry: Omit<BodyEntry, "exitedAt" | "outcome" | "error"> }
  | { type: "exit"; key: string; outcome: BodyOutcome; at: number; error?: string }
  /** Sent (and acknowledged) just before the worker kills itself instead of writing the status. */
  | { type: "statusCrash"; key: string }
  /** Sent just before the worker kills itself because an invocation hit the function timeout. */
  | { type: "timeout"; id: number }
  | { type: "result"; id: number; result?: RunResult; stats?: RunStats; bodyMs?: number; error?: string; dynamo: DynamoCounts };
