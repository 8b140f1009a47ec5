/**
 * Capped exponential backoff: the one formula every retry loop uses (the relay's forwards and watches,
 * the runner's retried phases, the ledger's and the event publisher's sends). The ceiling doubles per
 * failure from `initialMs` up to `maxMs`; jitter spreads retries of many callers apart:
 *   none  the ceiling itself (the relay already retries per uid, spread out in time);
 *   full  uniform in [0, ceiling) (AWS's "full jitter", for calls to a shared service);
 *   half  uniform in [ceiling/2, ceiling) (never at once, still spread).
 */
export interface BackoffOptions {
  /** Delay after the first failure (default 500 ms). */
  initialMs?: number;
  /** Upper bound of the delay (default 30 s). */
  maxMs?: number;
  /** Default none. */
  jitter?: "none" | "full" | "half";
  /** In [0, 1); default Math.random. */
  random?: () => number;
}

export const DEFAULT_BACKOFF = { initialMs: 500, maxMs: 30_000 } as const;

/** Delay before the retry that follows the `failures`-th consecutive failure (1-based; 0 and less: none). */
export function backoffDelay(failures: number, options: BackoffOptions = {}): number {
  if (failures <= 0) return 0;
  const initialMs = options.initialMs ?? DEFAULT_BACKOFF.initialMs;
  const maxMs = options.maxMs ?? DEFAULT_BACKOFF.maxMs;
  // 2^30 already exceeds any sensible maximum; capping the exponent avoids Infinity.
  const ceiling = Math.min(maxMs, initialMs * 2 ** Math.min(failures - 1, 30));
  const random = options.random ?? Math.random;
  switch (options.jitter ?? "none") {
    case "none":
      return ceiling;
    case "full":
      return Math.floor(random() * ceiling);
    case "half":
      return Math.floor(ceiling / 2 + random() * (ceiling / 2));
  }
}
