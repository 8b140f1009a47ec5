/**
 * How the relay hands a reconcile request to a phase function. The relay only forwards: the function
 * reads the DVM fresh and the ledger makes each phase complete exactly once, so a transport may deliver
 * a request more than once without harm.
 */

/** What the relay knows besides the request, for routing only (e.g. one function per phase). */
export interface ForwardContext {
  /** The phase the request names (its guess of status.phase; absent for a DVM that has not started): picks the function. */
  phase?: string;
}

export interface RelayTransport {
  /**
   * Delivers `request`. Resolves with the function's RunResult when the transport waits for it, or
   * undefined when it is fire-and-forget (the relay then schedules the next poll from the itinerary).
   * Rejects when the request was not delivered or the function failed; the relay retries with backoff.
   */
  forward(request: ReconcileRequest, context?: ForwardContext): Promise<RunResult | undefined>;
}

import { ControllerError } from "../contracts/controllerError";
import type { ReconcileRequest, RunResult } from "../contracts/request";

/** Lambda did not accept the invocation (an unexpected status code); the relay forwards again after its backoff. */
export class LambdaInvokeError extends ControllerError {
  override readonly name = "LambdaInvokeError";
  readonly disposition = "retryable";
  constructor(
    readonly functionName: string,
    readonly statusCode: number | undefined,
  ) {
    super(`invoke ${functionName}: unexpected status ${statusCode ?? "(none)"}`);
  }
}

/** The function ran and failed (the response carried FunctionError: "Unhandled" or "Handled"); forwarded again after the backoff. */
export class RemoteFunctionError extends ControllerError {
  override readonly name = "RemoteFunctionError";
  readonly disposition = "retryable";
  constructor(
    readonly functionName: string,
    readonly functionError: string,
    readonly detail: string,
  ) {
    super(`${functionName} failed (${functionError}): ${detail}`);
  }
}
