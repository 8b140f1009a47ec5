/**
 * Retries of transient DynamoDB errors, owned here rather than by the SDK (clients are built with
 * maxAttempts: 1, see client.ts) so the number of tries and the backoff are predictable and testable.
 */
import { backoffDelay } from "../lib/backoff";
import { LedgerUnavailableError } from "./errors";

export interface RetryPolicy {
  /** Total tries including the first one. */
  attempts: number;
  /** Upper bound of the first backoff; doubles on every retry ("full jitter"). */
  baseDelayMs: number;
  maxDelayMs: number;
  sleep: (ms: number) => Promise<void>;
  /** In [0, 1); injectable so tests can pin the jitter. */
  random: () => number;
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = {
  attempts: 5,
  baseDelayMs: 25,
  maxDelayMs: 1_000,
  sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
  random: Math.random,
};

const TRANSIENT_ERROR_NAMES = new Set([
  "ProvisionedThroughputExceededException",
  "ThrottlingException",
  "ThrottlingError",
  "RequestLimitExceeded",
  "InternalServerError",
  "InternalFailure",
  "ServiceUnavailable",
  "ServiceUnavailableException",
  "RequestTimeout",
  "RequestTimeoutException",
  "TimeoutError",
  "TooManyRequestsException",
]);

const TRANSIENT_NETWORK_CODES = new Set([
  "ECONNRESET",
  "ECONNREFUSED",
  "ECONNABORTED",
  "ETIMEDOUT",
  "EPIPE",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENETDOWN",
  "UND_ERR_SOCKET",
  "UND_ERR_CONNECT_TIMEOUT",
]);

interface ErrorShape {
  name?: unknown;
  code?: unknown;
  cause?: unknown;
  $metadata?: { httpStatusCode?: unknown };
}

/**
 * True when trying the same request again may succeed: throttling, server-side failures, timeouts and
 * dropped connections. A failed condition is an answer, not a fault, so it is never transient.
 */
export function isTransientDynamoError(error: unknown): boolean {
  if (typeof error !== "object" || error === null) return false;
  const e = error as ErrorShape;
  if (e.name === "ConditionalCheckFailedException") return false;
  if (typeof e.name === "string" && TRANSIENT_ERROR_NAMES.has(e.name)) return true;
  const status = e.$metadata?.httpStatusCode;
  if (typeof status === "number" && (status >= 500 || status === 429)) return true;
  if (typeof e.code === "string" && TRANSIENT_NETWORK_CODES.has(e.code)) return true;
  // Node and undici wrap socket errors: look one level down.
  if (e.cause !== undefined && e.cause !== error) {
    const cause = e.cause as ErrorShape;
    if (typeof cause?.code === "string" && TRANSIENT_NETWORK_CODES.has(cause.code)) return true;
  }
  return false;
}

/** Delay before retry number `retry` (1-based): uniform in [0, min(max, base * 2^(retry-1))). */
export function backoffDelayMs(retry: number, policy: Pick<RetryPolicy, "baseDelayMs" | "maxDelayMs" | "random">): number {
  return backoffDelay(retry, { initialMs: policy.baseDelayMs, maxMs: policy.maxDelayMs, jitter: "full", random: policy.random });
}

/**
 * Runs `request` until it succeeds, fails with a non-transient error (rethrown as is), or the policy's
 * attempts are used up (LedgerUnavailableError carrying the last error).
 */
export async function withTransientRetry<T>(operation: string, request: () => Promise<T>, policy: RetryPolicy): Promise<T> {
  const attempts = Math.max(1, Math.floor(policy.attempts));
  for (let attempt = 1; ; attempt++) {
    try {
      return await request();
    } catch (error) {
      if (!isTransientDynamoError(error)) throw error;
      if (attempt >= attempts) throw new LedgerUnavailableError(operation, attempt, error);
      await policy.sleep(backoffDelayMs(attempt, policy));
    }
  }
}

/** When and how long to keep a ledger write going that must land (retryUntil). */
export interface DeadlineRetry {
  /** Ms since the epoch: no try starts after it (the claim's lease end, or the host's). */
  deadlineAt: number;
  now: () => number;
  sleep: (ms: number) => Promise<void>;
  /** In [0, 1); default Math.random. */
  random?: () => number;
}

/** Pauses between rounds of retryUntil: each round already spent the ledger's own short budget. */
const DEADLINE_RETRY = { baseDelayMs: 200, maxDelayMs: 2_000 } as const;

/**
 * Runs `request` again after each LedgerUnavailableError (DynamoDB throttled or unreachable through the
 * ledger's own five tries, about 375 ms) until it succeeds, fails with anything else, or the next round
 * would start after the deadline (then the last LedgerUnavailableError is thrown). For the writes that end
 * an attempt (complete, fail, release): giving up on one leaves the phase locked until its lease ends,
 * and a completion given up on runs the body again, so they are worth the lease's remaining time. Every
 * such write is fenced by the claim's attempt and recognises its own earlier success, so a round whose
 * answer was lost is harmless.
 */
export async function retryUntil<T>(request: () => Promise<T>, options: DeadlineRetry): Promise<T> {
  const random = options.random ?? Math.random;
  for (let round = 1; ; round++) {
    try {
      return await request();
    } catch (error) {
      if (!(error instanceof LedgerUnavailableError)) throw error;
      // Half the ceiling fixed, half jittered: a round never follows at once, and rounds of several
      // invocations spread out.
      const pause = backoffDelay(round, { initialMs: DEADLINE_RETRY.baseDelayMs, maxMs: DEADLINE_RETRY.maxDelayMs, jitter: "half", random });
      if (options.now() + pause >= options.deadlineAt) throw error;
      await options.sleep(pause);
    }
  }
}
