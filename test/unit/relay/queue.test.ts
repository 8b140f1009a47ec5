/**
 * The relay's work queue (pure logic, fake timers): coalescing, one worker per key, delayed adds,
 * bounded concurrency, forget, and memory bounded by distinct keys.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { WorkQueue } from "../../../src/relay/queue";

interface Deferred {
  promise: Promise<void>;
  resolve: () => void;
  reject: (error: Error) => void;
}

function deferred(): Deferred {
  let resolve!: () => void;
  let reject!: (error: Error) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** A queue whose handler records calls and blocks until the test releases each one. */
function harness(options: { concurrency?: number; block?: boolean } = {}) {
  const calls: Array<{ key: string; value: string }> = [];
  const pending = new Map<string, Deferred[]>();
  const active = new Map<string, number>();
  let maxActivePerKey = 0;
  let maxActive = 0;
  const errors: Array<{ key: string; error: unknown }> = [];
  const queue = new WorkQueue<string, string>({
    concurrency: options.concurrency ?? 16,
    handler: async (key, value) => {
      calls.push({ key, value });
      active.set(key, (active.get(key) ?? 0) + 1);
      maxActivePerKey = Math.max(maxActivePerKey, active.get(key)!);
      maxActive = Math.max(
        maxActive,
        [...active.values()].reduce((a, b) => a + b, 0),
      );
      try {
        if (options.block) {
          const d = deferred();
          pending.set(key, [...(pending.get(key) ?? []), d]);
          await d.promise;
        }
      } finally {
        active.set(key, active.get(key)! - 1);
        if (active.get(key) === 0) active.delete(key);
      }
    },
    onHandlerError: (key, error) => errors.push({ key, error }),
  });
  /** Lets the oldest blocked handling of `key` finish. */
  const release = async (key: string, error?: Error) => {
    const list = pending.get(key) ?? [];
    const d = list.shift();
    if (!d) throw new Error(`nothing in flight for ${key}`);
    if (error) d.reject(error);
    else d.resolve();
    await flush();
  };
  return {
    queue,
    calls,
    errors,
    release,
    callsFor: (key: string) => calls.filter((c) => c.key === key),
    stats: () => ({ maxActivePerKey, maxActive }),
  };
}

/** Lets resolved promises run (handlers, the queue's bookkeeping after them). */
async function flush(): Promise<void> {
  for (let i = 0; i < 5; i++) await Promise.resolve();
}

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

describe("WorkQueue: coalescing", () => {
  it("collapses adds of a waiting key into one handling with the newest value", async () => {
    const h = harness({ concurrency: 1, block: true });
    h.queue.add("busy", "b1"); // occupies the only worker
    h.queue.add("a", "v1");
    h.queue.add("a", "v2");
    h.queue.add("a", "v3");
    expect(h.queue.depth()).toBe(1);
    await h.release("busy");
    expect(h.callsFor("a")).toEqual([{ key: "a", value: "v3" }]);
    await h.release("a");
    expect(h.queue.size()).toBe(0);
  });

  it("keeps FIFO order across keys, and a re-add keeps the key's place", async () => {
    const h = harness({ concurrency: 1, block: true });
    h.queue.add("busy", "x");
    h.queue.add("a", "1");
    h.queue.add("b", "1");
    h.queue.add("a", "2");
    h.queue.add("c", "1");
    await h.release("busy");
    await h.release("a");
    await h.release("b");
    await h.release("c");
    expect(h.calls.map((c) => `${c.key}${c.value}`)).toEqual(["busyx", "a2", "b1", "c1"]);
  });
});

describe("WorkQueue: one worker per key", () => {
  it("never handles a key twice at once; an add while in flight re-queues it once afterwards, newest value", async () => {
    const h = harness({ block: true });
    h.queue.add("a", "v1");
    await flush();
    expect(h.callsFor("a")).toHaveLength(1);
    h.queue.add("a", "v2");
    h.queue.add("a", "v3");
    await flush();
    expect(h.callsFor("a")).toHaveLength(1); // still in flight: marked dirty, not started again
    expect(h.queue.depth()).toBe(0);
    await h.release("a");
    expect(h.callsFor("a").map((c) => c.value)).toEqual(["v1", "v3"]);
    await h.release("a");
    expect(h.callsFor("a")).toHaveLength(2);
    expect(h.stats().maxActivePerKey).toBe(1);
    expect(h.queue.size()).toBe(0);
  });

  it("bounds concurrency across keys", async () => {
    const h = harness({ concurrency: 3, block: true });
    for (const key of ["a", "b", "c", "d", "e", "f", "g"]) h.queue.add(key, "v");
    await flush();
    expect(h.queue.inFlight()).toBe(3);
    expect(h.queue.depth()).toBe(4);
    for (const key of ["a", "b", "c", "d", "e", "f", "g"]) await h.release(key);
    expect(h.calls).toHaveLength(7);
    expect(h.stats().maxActive).toBe(3);
    expect(h.queue.size()).toBe(0);
  });

  it("a handler that throws is reported and does not wedge the key", async () => {
    const h = harness({ block: true });
    h.queue.add("a", "v1");
    await flush();
    await h.release("a", new Error("boom"));
    expect(h.errors).toHaveLength(1);
    expect(h.errors[0]?.key).toBe("a");
    h.queue.add("a", "v2");
    await flush();
    expect(h.callsFor("a").map((c) => c.value)).toEqual(["v1", "v2"]);
    await h.release("a");
    expect(h.queue.size()).toBe(0);
  });
});

describe("WorkQueue: delayed adds", () => {
  it("handles a key after its delay", async () => {
    const h = harness();
    h.queue.addAfter("a", "later", 1_000);
    expect(h.queue.size()).toBe(1);
    await vi.advanceTimersByTimeAsync(999);
    expect(h.calls).toHaveLength(0);
    await vi.advanceTimersByTimeAsync(1);
    expect(h.calls).toEqual([{ key: "a", value: "later" }]);
    expect(h.queue.size()).toBe(0);
  });

  it("the earliest due time wins (either order), once", async () => {
    const h = harness();
    h.queue.addAfter("a", "slow", 1_000);
    h.queue.addAfter("a", "fast", 300);
    h.queue.addAfter("b", "fast", 300);
    h.queue.addAfter("b", "slow", 1_000);
    await vi.advanceTimersByTimeAsync(300);
    expect(h.callsFor("a")).toHaveLength(1);
    expect(h.callsFor("b")).toHaveLength(1);
    // The later value of b replaced the earlier one at the earlier time (newest request wins).
    expect(h.callsFor("b")[0]?.value).toBe("slow");
    await vi.advanceTimersByTimeAsync(5_000);
    expect(h.calls).toHaveLength(2);
  });

  it("an immediate add supersedes a pending delayed add", async () => {
    const h = harness();
    h.queue.addAfter("a", "later", 1_000);
    h.queue.add("a", "now");
    await flush();
    expect(h.calls).toEqual([{ key: "a", value: "now" }]);
    await vi.advanceTimersByTimeAsync(2_000);
    expect(h.calls).toHaveLength(1);
    expect(h.queue.delayedCount()).toBe(0);
  });

  it("a delayed add of a key that is already waiting is dropped (the sooner one covers it)", async () => {
    const h = harness({ concurrency: 1, block: true });
    h.queue.add("busy", "x");
    h.queue.add("a", "now");
    h.queue.addAfter("a", "later", 100);
    expect(h.queue.delayedCount()).toBe(0);
    await h.release("busy");
    await h.release("a");
    await vi.advanceTimersByTimeAsync(1_000);
    expect(h.callsFor("a")).toHaveLength(1);
  });

  it("a delay that comes due while the key is in flight marks it dirty (still one at a time)", async () => {
    const h = harness({ block: true });
    h.queue.add("a", "first");
    await flush();
    h.queue.addAfter("a", "poll", 100);
    await vi.advanceTimersByTimeAsync(100);
    expect(h.callsFor("a")).toHaveLength(1);
    await h.release("a");
    expect(h.callsFor("a").map((c) => c.value)).toEqual(["first", "poll"]);
    await h.release("a");
    expect(h.stats().maxActivePerKey).toBe(1);
  });

  it("a zero or negative delay is an immediate add", async () => {
    const h = harness();
    h.queue.addAfter("a", "now", 0);
    await flush();
    expect(h.calls).toHaveLength(1);
  });
});

describe("WorkQueue: forget and memory", () => {
  it("forget drops waiting, delayed and dirty state; an in-flight handling finishes and is not repeated", async () => {
    const h = harness({ concurrency: 1, block: true });
    h.queue.add("a", "first");
    await flush();
    h.queue.add("a", "dirty");
    h.queue.add("b", "waiting");
    h.queue.addAfter("c", "delayed", 500);
    h.queue.forget("a");
    h.queue.forget("b");
    h.queue.forget("c");
    await h.release("a");
    await vi.advanceTimersByTimeAsync(1_000);
    expect(h.calls.map((c) => `${c.key}:${c.value}`)).toEqual(["a:first"]);
    expect(h.queue.size()).toBe(0);
  });

  it("state is bounded by distinct keys, not by the number of adds", async () => {
    const h = harness({ concurrency: 2 });
    for (let i = 0; i < 10_000; i++) {
      const key = `k${i % 5}`;
      if (i % 3 === 0) h.queue.addAfter(key, `v${i}`, 1_000 + (i % 7));
      else h.queue.add(key, `v${i}`);
    }
    expect(h.queue.size()).toBeLessThanOrEqual(5);
    expect(h.queue.depth() + h.queue.delayedCount()).toBeLessThanOrEqual(10);
    await vi.runAllTimersAsync();
    // Each key was handled a bounded number of times (first add, dirty re-run, last delayed add),
    // not once per add.
    for (let k = 0; k < 5; k++) expect(h.callsFor(`k${k}`).length).toBeLessThanOrEqual(3);
    expect(h.queue.size()).toBe(0);
  });

  it("size counts each key once whatever its states", async () => {
    const h = harness({ block: true });
    h.queue.add("a", "1");
    await flush();
    h.queue.add("a", "2"); // in flight + dirty
    h.queue.addAfter("b", "1", 1_000); // delayed
    h.queue.add("c", "1");
    await flush();
    expect(h.queue.size()).toBe(3);
    expect(h.queue.has("b")).toBe(true);
  });
});

describe("WorkQueue: close and drain", () => {
  it("close drops waiting and delayed keys; drain waits for what is in flight", async () => {
    const h = harness({ concurrency: 1, block: true });
    h.queue.add("a", "1");
    h.queue.add("b", "1");
    h.queue.addAfter("c", "1", 100);
    await flush();
    h.queue.close();
    h.queue.add("d", "1"); // ignored after close
    let drained: boolean | undefined;
    void h.queue.drain(10_000).then((d) => (drained = d));
    await flush();
    expect(drained).toBeUndefined();
    await h.release("a");
    await flush();
    expect(drained).toBe(true);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(h.calls.map((c) => c.key)).toEqual(["a"]);
  });

  it("drain gives up after its timeout", async () => {
    const h = harness({ block: true });
    h.queue.add("a", "1");
    await flush();
    const result = h.queue.drain(1_000);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(await result).toBe(false);
    await h.release("a");
  });
});
