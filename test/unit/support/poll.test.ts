/** The tests' one poller (test/support/poll.ts): what it returns, and what its failures say. */
import { describe, expect, it } from "vitest";
import { found, until } from "../../support/poll";

/** A read that answers each of `answers` in turn, then the last one forever. */
function reads<T>(...answers: T[]): () => Promise<T> {
  let i = 0;
  return async () => answers[Math.min(i++, answers.length - 1)] as T;
}

describe("until and found", () => {
  it("return the first value the check accepts", async () => {
    expect(await until("three", reads(1, 2, 3, 4), (n) => n >= 3, { timeoutMs: 5_000, intervalMs: 1 })).toBe(3);
    expect(await found("a name", reads<string | undefined | false>(undefined, false, "web-0"), { timeoutMs: 5_000, intervalMs: 1 })).toBe("web-0");
  });

  it("on timeout name what was awaited, the last value read and the context", async () => {
    const waiting = until("the DVM to complete", reads({ phase: "Started" }), (dvm) => dvm.phase === "Completed", {
      timeoutMs: 50,
      intervalMs: 5,
      context: () => "relay log tail",
    });
    await expect(waiting).rejects.toThrow(/^timed out after 50 ms waiting for the DVM to complete; last: \{"phase":"Started"\}\nrelay log tail$/);
  });

  it("end at once on a read's error, unless told to read through errors", async () => {
    let calls = 0;
    const failing = async () => {
      calls++;
      throw new Error("403 forbidden");
    };
    await expect(until("an answer", failing, () => true, { timeoutMs: 5_000, intervalMs: 1 })).rejects.toThrow("403 forbidden");
    expect(calls).toBe(1);

    const refusedTwice = async () => {
      if (++calls < 4) throw new Error("connection refused");
      return "up";
    };
    expect(await until("the service", refusedTwice, () => true, { timeoutMs: 5_000, intervalMs: 1, retryErrors: true })).toBe("up");
    await expect(until("the service", failing, () => true, { timeoutMs: 50, intervalMs: 5, retryErrors: true })).rejects.toThrow(
      /waiting for the service; last error: 403 forbidden/,
    );
  });
});
