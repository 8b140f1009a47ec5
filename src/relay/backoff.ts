/**
 * Exponential backoff for retries after failures (transport errors, broken watches). Deterministic:
 * the relay retries per uid, so failures of different uids are already spread out in time.
 */
export interface BackoffOptions {
  /** Delay after the first failure (default 500 ms). */
  initialMs?: number;
  /** Upper bound of the delay (default 30 s). */
  maxMs?: number;
}

export const DEFAULT_BACKOFF: Required<BackoffOptions> = { initialMs: 500, maxMs: 30_000 };

/** Delay before the retry that follows the `failures`-th consecutive failure (1-based). */
export function backoffDelay(failures: number, options: BackoffOptions = {}): number {
  const initialMs = options.initialMs ?? DEFAULT_BACKOFF.initialMs;
  const maxMs = options.maxMs ?? DEFAULT_BACKOFF.maxMs;
  if (failures <= 0) return 0;
  // 2^30 already exceeds any sensible maximum; capping the exponent avoids Infinity.
  return Math.min(maxMs, initialMs * 2 ** Math.min(failures - 1, 30));
}
