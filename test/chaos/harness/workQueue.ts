/**
 * client-go's rate-limited work queue, as controller-runtime uses it, so the baseline controller has the
 * same semantics as the controllers it stands for:
 *   - a key is never handed to two workers at once: an add while it is processing marks it dirty, and it
 *     is queued again when its worker calls `done`;
 *   - adds of a key that is already queued collapse into one;
 *   - `addAfter` keeps one timer per key (the earliest wins), as the delaying queue does;
 *   - `addRateLimited` waits the longer of a per-key exponential backoff (5 ms doubling up to 1000 s) and
 *     an overall token bucket (10 per second, burst 100): `DefaultControllerRateLimiter()`.
 */

export interface RateLimiter {
  /** How long the next retry of `key` waits, in ms (and counts it as a failure). */
  when(key: string): number;
  /** The key succeeded: its backoff starts over. */
  forget(key: string): void;
  failures(key: string): number;
}

/** Per key: base * 2^failures, at most max (client-go's ItemExponentialFailureRateLimiter). */
export class ItemExponentialRateLimiter implements RateLimiter {
  private readonly counts = new Map<string, number>();

  constructor(
    private readonly baseMs = 5,
    private readonly maxMs = 1_000_000,
  ) {}

  when(key: string): number {
    const n = this.counts.get(key) ?? 0;
    this.counts.set(key, n + 1);
    return Math.min(this.baseMs * 2 ** n, this.maxMs);
  }

  forget(key: string): void {
    this.counts.delete(key);
  }

  failures(key: string): number {
    return this.counts.get(key) ?? 0;
  }
}

/** An overall token bucket (golang.org/x/time/rate's Reserve: tokens may go negative, the delay pays them back). */
export class BucketRateLimiter implements RateLimiter {
  private tokens: number;
  private last: number;

  constructor(
    private readonly qps = 10,
    private readonly burst = 100,
    private readonly now: () => number = Date.now,
  ) {
    this.tokens = burst;
    this.last = now();
  }

  when(): number {
    const t = this.now();
    this.tokens = Math.min(this.burst, this.tokens + ((t - this.last) / 1000) * this.qps);
    this.last = t;
    this.tokens -= 1;
    return this.tokens >= 0 ? 0 : (-this.tokens / this.qps) * 1000;
  }

  forget(): void {}

  failures(): number {
    return 0;
  }
}

/** The longest wait of several limiters (client-go's MaxOfRateLimiter). */
export class MaxOfRateLimiter implements RateLimiter {
  private readonly limiters: readonly RateLimiter[];

  constructor(...limiters: RateLimiter[]) {
    this.limiters = limiters;
  }

  when(key: string): number {
    return Math.max(...this.limiters.map((l) => l.when(key)));
  }

  forget(key: string): void {
    for (const l of this.limiters) l.forget(key);
  }

  failures(key: string): number {
    return Math.max(...this.limiters.map((l) => l.failures(key)));
  }
}

/** workqueue.DefaultControllerRateLimiter(). */
export function defaultControllerRateLimiter(): RateLimiter {
  return new MaxOfRateLimiter(new ItemExponentialRateLimiter(5, 1_000_000), new BucketRateLimiter(10, 100));
}

export class RateLimitingQueue {
  private readonly queue: string[] = [];
  private readonly dirty = new Set<string>();
  private readonly processing = new Set<string>();
  private readonly waiting = new Map<string, { at: number; timer: NodeJS.Timeout }>();
  private readonly getters: Array<(key: string | undefined) => void> = [];
  private shuttingDown = false;
  /** Adds that found the key already queued or dirty, merged into one. */
  merged = 0;

  constructor(readonly limiter: RateLimiter = defaultControllerRateLimiter()) {}

  add(key: string): void {
    if (this.shuttingDown) return;
    if (this.dirty.has(key)) {
      this.merged++;
      return;
    }
    this.dirty.add(key);
    if (this.processing.has(key)) return;
    this.push(key);
  }

  addAfter(key: string, delayMs: number): void {
    if (this.shuttingDown) return;
    if (delayMs <= 0) {
      this.add(key);
      return;
    }
    const at = Date.now() + delayMs;
    const pending = this.waiting.get(key);
    if (pending && pending.at <= at) return;
    if (pending) clearTimeout(pending.timer);
    const timer = setTimeout(() => {
      this.waiting.delete(key);
      this.add(key);
    }, delayMs);
    this.waiting.set(key, { at, timer });
  }

  addRateLimited(key: string): void {
    this.addAfter(key, this.limiter.when(key));
  }

  forget(key: string): void {
    this.limiter.forget(key);
  }

  /** The next key to process (marked processing until `done`); undefined once shut down. */
  get(): Promise<string | undefined> {
    const key = this.queue.shift();
    if (key !== undefined) return Promise.resolve(this.take(key));
    if (this.shuttingDown) return Promise.resolve(undefined);
    return new Promise((resolve) => this.getters.push(resolve));
  }

  done(key: string): void {
    this.processing.delete(key);
    if (this.dirty.has(key)) this.push(key);
  }

  shutDown(): void {
    this.shuttingDown = true;
    for (const { timer } of this.waiting.values()) clearTimeout(timer);
    this.waiting.clear();
    for (const getter of this.getters.splice(0)) getter(undefined);
  }

  get length(): number {
    return this.queue.length;
  }

  private take(key: string): string {
    this.processing.add(key);
    this.dirty.delete(key);
    return key;
  }

  private push(key: string): void {
    const getter = this.getters.shift();
    if (getter) getter(this.take(key));
    else this.queue.push(key);
  }
}
