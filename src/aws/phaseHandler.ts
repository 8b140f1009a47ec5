/**
 * The phase function's logic, independent of middy and Lambda: parse the request, run one phase,
 * record metrics, and decide between returning (done, or can never succeed) and throwing (Lambda's
 * async retry and on-failure destination should take over). functions/phase.ts wires it up.
 */

import type { RunResult } from "../contracts/request";
import { errorMessage } from "../lib/errorMessage";
import type { Logger } from "../lib/log";
import type { PhaseRunner } from "../runner/runner";
import { classifyError } from "./errors";
import { type MetricsWriter, recordRejected, recordRun, recordThrown } from "./phaseMetrics";
import { parseReconcileEvent, type RequestIssue } from "./reconcileEvent";

export type PhaseFunctionResult =
  | RunResult
  /** The payload is not a ReconcileRequest; `field` is the first field that failed. Not retried. */
  | { kind: "invalid"; field: string; message: string; issues: RequestIssue[] }
  /** The request is well-formed but can never run (see errors.ts, "terminal"). Not retried. */
  | { kind: "rejected"; error: string };

export interface PhaseHandlerOptions {
  /** The runner, created on first use and cached for the container (see runnerFromEnv). */
  runner: () => Promise<Pick<PhaseRunner, "runWithStats">>;
  log: Logger;
  metrics: MetricsWriter;
}

/** The part of Lambda's context the handler reads: how long the invocation may still run. */
export interface InvocationTime {
  getRemainingTimeInMillis(): number;
}

export function createPhaseHandler(options: PhaseHandlerOptions): (event: unknown, context?: InvocationTime) => Promise<PhaseFunctionResult> {
  const { metrics } = options;
  return async (event, context) => {
    const parsed = parseReconcileEvent(event);
    if (!parsed.ok) {
      // An async retry would fail the same way: log what to fix and return, so nothing retries it.
      const first = parsed.issues[0] ?? { field: "request", message: "invalid" };
      options.log.error(`invalid reconcile request: ${first.field}: ${first.message}`, { field: first.field, issues: parsed.issues });
      recordRejected(metrics);
      return { kind: "invalid", field: first.field, message: first.message, issues: parsed.issues };
    }
    const { request } = parsed;
    const log = options.log.child({ dvm: `${request.namespace}/${request.name}`, uid: request.uid });
    try {
      const runner = await options.runner();
      // Lambda's timeout bounds the body too: the runner stops it early enough to record the attempt.
      const remainingMs = context?.getRemainingTimeInMillis();
      const { result, stats } =
        remainingMs === undefined ? await runner.runWithStats(request) : await runner.runWithStats(request, { hostDeadlineAt: Date.now() + remainingMs });
      recordRun(metrics, result, stats);
      return result;
    } catch (error) {
      const disposition = classifyError(error);
      if (disposition === "terminal") {
        log.error("request refused for good; not retried", { error: errorMessage(error) });
        recordRejected(metrics);
        return { kind: "rejected", error: errorMessage(error) };
      }
      const retried = disposition === "retryable" ? "transient failure" : "unexpected failure";
      log.error(`${retried}; Lambda retries the event, then keeps it in the dead-letter queue`, { error: errorMessage(error), disposition });
      recordThrown(metrics);
      throw error;
    }
  };
}
