/**
 * A per-key coalescing work queue with client-go workqueue semantics, and the worker pool that drains
 * it. The relay's guarantees live here, in one structure, instead of being spread through the code:
 *
 * - Adds of a key that is already waiting collapse into one; the newest value wins.
 * - A key is never handled by two workers at once: a key added while in flight is marked dirty and
 *   handled again right after the current handling finishes (with the newest value).
 * - Delayed adds (addAfter): one timer per key, the earliest due time wins. An immediate add
 *   supersedes a pending delayed add, because the handling it causes schedules its own follow-up.
 * - At most `concurrency` keys are handled at once.
 * - forget(key) drops every trace of a key; memory is bounded by the number of distinct live keys,
 *   never by the number of adds.
 */

export interface WorkQueueOptions<K, V> {
  /** Handles one key. Never called twice at once for the same key. */
  handler: (key: K, value: V) => Promise<void>;
  /** How many keys are handled at once (default 16). */
  concurrency?: number;
  /** Called when the handler throws (the handler should catch its own errors; this is the backstop). */
  onHandlerError?: (key: K, error: unknown) => void;
  /** Milliseconds clock used to compare due times (default Date.now; timers are setTimeout). */
  now?: () => number;
}

export const DEFAULT_CONCURRENCY = 16;

interface Delayed<V> {
  dueAt: number;
  value: V;
  timer: ReturnType<typeof setTimeout>;
}

interface Active<V> {
  /** Set when the key was added while in flight: handle it again with this value afterwards. */
  dirty?: { value: V };
}

export class WorkQueue<K, V> {
  private readonly handler: (key: K, value: V) => Promise<void>;
  private readonly concurrency: number;
  private readonly onHandlerError: (key: K, error: unknown) => void;
  private readonly now: () => number;
  /** Keys waiting for a worker, in FIFO order (Map keeps insertion order; re-setting keeps position). */
  private readonly ready = new Map<K, V>();
  private readonly active = new Map<K, Active<V>>();
  private readonly delayed = new Map<K, Delayed<V>>();
  private closed = false;
  private idleWaiters: Array<() => void> = [];

  constructor(options: WorkQueueOptions<K, V>) {
    this.handler = options.handler;
    this.concurrency = Math.max(1, options.concurrency ?? DEFAULT_CONCURRENCY);
    this.onHandlerError = options.onHandlerError ?? (() => undefined);
    this.now = options.now ?? (() => Date.now());
  }

  /** Handle `key` as soon as a worker is free (and the key is not in flight). */
  add(key: K, value: V): void {
    if (this.closed) return;
    this.cancelDelayed(key);
    const active = this.active.get(key);
    if (active) {
      active.dirty = { value };
      return;
    }
    this.ready.set(key, value);
    this.pump();
  }

  /** Handle `key` after `delayMs`, unless it is handled sooner; the earliest due time wins. */
  addAfter(key: K, value: V, delayMs: number): void {
    if (this.closed) return;
    if (delayMs <= 0) {
      this.add(key, value);
      return;
    }
    // Already due now: the sooner handling makes this one redundant.
    if (this.ready.has(key) || this.active.get(key)?.dirty) return;
    const dueAt = this.now() + delayMs;
    const existing = this.delayed.get(key);
    if (existing && existing.dueAt <= dueAt) {
      existing.value = value;
      return;
    }
    if (existing) clearTimeout(existing.timer);
    const timer = setTimeout(() => {
      // The entry's value may have been replaced by a later addAfter with a later due time.
      const entry = this.delayed.get(key);
      this.delayed.delete(key);
      this.add(key, entry?.value ?? value);
    }, delayMs);
    // A pending requeue must not keep a stopping process alive.
    timer.unref?.();
    this.delayed.set(key, { dueAt, value, timer });
  }

  /** Drops all state of `key`: waiting, delayed and dirty. A handling in flight finishes but is not repeated. */
  forget(key: K): void {
    this.ready.delete(key);
    this.cancelDelayed(key);
    const active = this.active.get(key);
    if (active) delete active.dirty;
  }

  /** Keys with any state: waiting, in flight or delayed. */
  size(): number {
    const keys = new Set<K>([...this.ready.keys(), ...this.active.keys(), ...this.delayed.keys()]);
    return keys.size;
  }

  /** Keys waiting for a worker now. */
  depth(): number {
    return this.ready.size;
  }

  inFlight(): number {
    return this.active.size;
  }

  delayedCount(): number {
    return this.delayed.size;
  }

  has(key: K): boolean {
    return this.ready.has(key) || this.active.has(key) || this.delayed.has(key);
  }

  /** Stops taking and dispatching work; waiting and delayed keys are dropped, in-flight ones finish. */
  close(): void {
    this.closed = true;
    this.ready.clear();
    for (const key of [...this.delayed.keys()]) this.cancelDelayed(key);
    for (const active of this.active.values()) delete active.dirty;
  }

  /** Resolves true when nothing is in flight, false if `timeoutMs` passes first. */
  async drain(timeoutMs: number): Promise<boolean> {
    if (this.active.size === 0) return true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const idle = new Promise<boolean>((resolve) => this.idleWaiters.push(() => resolve(true)));
    const timeout = new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), timeoutMs);
    });
    try {
      return await Promise.race([idle, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  private cancelDelayed(key: K): void {
    const delayed = this.delayed.get(key);
    if (!delayed) return;
    clearTimeout(delayed.timer);
    this.delayed.delete(key);
  }

  private pump(): void {
    while (!this.closed && this.active.size < this.concurrency && this.ready.size > 0) {
      const next = this.ready.entries().next();
      if (next.done) return;
      const [key, value] = next.value;
      this.ready.delete(key);
      this.active.set(key, {});
      void this.run(key, value);
    }
  }

  private async run(key: K, value: V): Promise<void> {
    try {
      await this.handler(key, value);
    } catch (error) {
      this.onHandlerError(key, error);
    }
    const active = this.active.get(key);
    this.active.delete(key);
    if (active?.dirty && !this.closed) this.ready.set(key, active.dirty.value);
    if (this.active.size === 0) {
      const waiters = this.idleWaiters;
      this.idleWaiters = [];
      for (const wake of waiters) wake();
    }
    this.pump();
  }
}
