/** The baseline's work queue keeps client-go's guarantees (pure logic, no services). */
import { describe, expect, it } from "vitest";
import { BucketRateLimiter, defaultControllerRateLimiter, ItemExponentialRateLimiter, RateLimitingQueue } from "../../chaos/harness/workQueue";

describe("RateLimitingQueue", () => {
  it("merges adds of a key that is already queued", async () => {
    const q = new RateLimitingQueue();
    q.add("a");
    q.add("a");
    q.add("b");
    expect(q.length).toBe(2);
    expect(q.merged).toBe(1);
    expect(await q.get()).toBe("a");
    expect(await q.get()).toBe("b");
  });

  it("never hands out a key that is processing; an add meanwhile queues it again once done", async () => {
    const q = new RateLimitingQueue();
    q.add("a");
    const key = await q.get();
    q.add("a");
    expect(q.length, "dirty, not queued, while processing").toBe(0);
    q.done(key!);
    expect(q.length).toBe(1);
    expect(await q.get()).toBe("a");
    q.done("a");
    expect(q.length).toBe(0);
  });

  it("wakes a waiting worker on add, and ends waiting workers on shutdown", async () => {
    const q = new RateLimitingQueue();
    const waiting = q.get();
    q.add("a");
    expect(await waiting).toBe("a");
    const ended = q.get();
    q.shutDown();
    expect(await ended).toBeUndefined();
  });

  it("keeps one delayed add per key, the earliest", async () => {
    const q = new RateLimitingQueue();
    q.addAfter("a", 10_000);
    q.addAfter("a", 5);
    await new Promise((r) => setTimeout(r, 30));
    expect(q.length).toBe(1);
    q.shutDown();
  });
});

describe("rate limiters", () => {
  it("per key: 5 ms doubling, capped; forget starts over", () => {
    const l = new ItemExponentialRateLimiter(5, 40);
    expect([l.when("k"), l.when("k"), l.when("k"), l.when("k"), l.when("k")]).toEqual([5, 10, 20, 40, 40]);
    expect(l.when("other")).toBe(5);
    l.forget("k");
    expect(l.when("k")).toBe(5);
  });

  it("overall: a burst of 100 passes, then 10 per second", () => {
    let now = 0;
    const l = new BucketRateLimiter(10, 100, () => now);
    for (let i = 0; i < 100; i++) expect(l.when()).toBe(0);
    expect(l.when()).toBeCloseTo(100);
    expect(l.when()).toBeCloseTo(200);
    // A second refills 10 tokens: 2 repay the debt, the rest pass at once.
    now += 1_000;
    expect(l.when()).toBe(0);
  });

  it("the default is the longer of both", () => {
    const l = defaultControllerRateLimiter();
    expect(l.when("k")).toBe(5);
    expect(l.when("k")).toBe(10);
  });
});
