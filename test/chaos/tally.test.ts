/** The instrument: how body entries become repeats, retries and overlaps (pure, no services used). */
import { describe, expect, it } from "vitest";
import { type BodyEntry, summarizeRepeats } from "./harness/tally";

const entry = (phase: string, enteredAt: number, exitedAt: number | undefined, outcome: BodyEntry["outcome"], uid = "u1", attempt = 1): BodyEntry => ({
  uid,
  phase,
  generation: 1,
  attempt,
  enteredAt,
  ...(exitedAt !== undefined ? { exitedAt } : {}),
  ...(outcome ? { outcome } : {}),
});

describe("summarizeRepeats", () => {
  it("counts nothing for one execution per phase, and waiting polls before the advance", () => {
    const s = summarizeRepeats([
      entry("CreateRsyncConfig", 0, 10, "advance"),
      entry("WaitForRsyncTransferPodsRunning", 20, 30, "wait"),
      entry("WaitForRsyncTransferPodsRunning", 40, 50, "advance"),
    ]);
    expect(s).toMatchObject({ executions: 3, repeats: 0, waitRepeats: 0, overlaps: 0, retries: 0 });
  });

  it("a body that threw is retried, not repeated", () => {
    const s = summarizeRepeats([entry("CreateRsyncConfig", 0, 10, "threw"), entry("CreateRsyncConfig", 20, 30, "advance", "u1", 2)]);
    expect(s).toMatchObject({ repeats: 0, retries: 1 });
  });

  it("a second execution after one that did its work is a repeat; so is one killed right after returning", () => {
    expect(summarizeRepeats([entry("CreateRsyncConfig", 0, 10, "advance"), entry("CreateRsyncConfig", 20, 30, "advance")]).repeats).toBe(1);
    const crash = summarizeRepeats([entry("CreateRsyncConfig", 0, 10, "crashed"), entry("CreateRsyncConfig", 2_000, 2_010, "advance", "u1", 2)]);
    expect(crash).toMatchObject({ repeats: 1, crashed: 1, overlaps: 0 });
  });

  it("concurrent executions are repeats and overlaps; a body that never reported back counts as running", () => {
    const s = summarizeRepeats([entry("CreateRsyncTransferPods", 0, 50, "advance"), entry("CreateRsyncTransferPods", 10, undefined, undefined)]);
    expect(s).toMatchObject({ repeats: 1, overlaps: 1 });
  });

  it("a waiting phase polled again after it advanced is a wait repeat; other DVMs and phases are separate", () => {
    const s = summarizeRepeats([
      entry("EnsureRsyncEndpointReady", 0, 10, "advance"),
      entry("EnsureRsyncEndpointReady", 20, 30, "wait"),
      entry("EnsureRsyncEndpointReady", 0, 10, "advance", "u2"),
      entry("CreateRsyncEndpoint", 40, 50, "advance"),
    ]);
    expect(s).toMatchObject({ repeats: 0, waitRepeats: 1 });
  });
});
