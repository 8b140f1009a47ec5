/**
 * What the phase function does with an error that escaped the runner, read from the error's marker
 * (src/contracts/controllerError.ts). Lambda retries an async invocation only when the handler throws,
 * and then sends it to the on-failure destination, so:
 *   - retryable: a later try of the same request can succeed (DynamoDB throttling or 5xx, Kubernetes
 *     429/5xx/409, dropped connections): throw, Lambda's async retry applies.
 *   - terminal: the request can never succeed as it is: return a result, a retry would only repeat it.
 *   - unexpected: anything else (a bug, 403 from RBAC, a missing setting, an input error or a lost
 *     claim the runner should have handled): throw too, so the event is retried and then kept in the
 *     dead-letter queue with the error instead of being dropped.
 */
import { dispositionOf } from "../contracts/controllerError";
import { isTransientDynamoError } from "../ledger";

export type HandlerDisposition = "retryable" | "terminal" | "unexpected";

export function classifyError(error: unknown): HandlerDisposition {
  const marked = dispositionOf(error);
  if (marked === "retryable" || marked === "terminal") return marked;
  // SDK errors outside the ledger (SSM) and raw socket errors: same rules as the ledger's own retries.
  if (isTransientDynamoError(error) || isNetworkError(error)) return "retryable";
  return "unexpected";
}

const NETWORK_MESSAGES = /fetch failed|socket hang up|network socket disconnected/i;

/** undici's `TypeError: fetch failed` and node-fetch's FetchError carry the socket error below them. */
function isNetworkError(error: unknown): boolean {
  for (let e = error, depth = 0; e && typeof e === "object" && depth < 4; e = (e as { cause?: unknown }).cause, depth++) {
    const { type, message } = e as { type?: unknown; message?: unknown };
    if (type === "system" || (typeof message === "string" && NETWORK_MESSAGES.test(message))) return true;
    if (depth > 0 && isTransientDynamoError(e)) return true;
  }
  return false;
}
