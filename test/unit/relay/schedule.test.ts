/**
 * The relay's pure decisions: when to forward a trigger, what to schedule after a forward, and how it
 * reads watched objects. Delays are checked against the itinerary table, never against copied numbers.
 */

import { describe, expect, it } from "vitest";
import { LABEL } from "../../../src/contracts/labels";
import type { RunResult } from "../../../src/contracts/request";
import { FAST_REQUEUE_MS, PHASE_NAMES, PHASES, POLL_REQUEUE_MS, phaseSpec } from "../../../src/dvm/itinerary";
import { backoffDelay } from "../../../src/lib/backoff";
import { objectKey, ownerUidOf, parseObservedDvm } from "../../../src/relay/observed";
import { parseRunResult } from "../../../src/relay/runResult";
import {
  followUpAfter,
  forwardDelay,
  isTerminalPhase,
  type LastForward,
  minForwardIntervalMs,
  needsForwarding,
  POD_CHANGE_SPACING_MS,
  podChangeIntervalMs,
  recordForward,
  repeatIntervalMs,
  requestPhase,
  sameForwardKey,
} from "../../../src/relay/schedule";

const WAIT_PHASE = PHASE_NAMES.find((p) => PHASES[p].waits)!;
const FAST_PHASE = PHASE_NAMES.find((p) => !PHASES[p].waits && !("terminal" in PHASES[p]))!;

describe("forwardDelay: no hot loop, no lost progress", () => {
  it("forwards at once when nothing was forwarded yet", () => {
    expect(forwardDelay(1_000, { phase: WAIT_PHASE, generation: 1 }, undefined)).toBe(0);
  });

  it("forwards at once when the phase or the generation changed", () => {
    const last = { phase: WAIT_PHASE, generation: 1, at: 1_000 };
    expect(forwardDelay(1_001, { phase: FAST_PHASE, generation: 1 }, last)).toBe(0);
    expect(forwardDelay(1_001, { phase: WAIT_PHASE, generation: 2 }, last)).toBe(0);
    expect(forwardDelay(1_001, { generation: 1 }, last)).toBe(0);
  });

  it("holds a same-phase trigger (status-only change, pod heartbeat) until the phase's requeue delay passed", () => {
    const last = { phase: WAIT_PHASE, generation: 1, at: 1_000 };
    const interval = phaseSpec(WAIT_PHASE).requeueMs;
    expect(forwardDelay(1_000, { phase: WAIT_PHASE, generation: 1 }, last)).toBe(interval);
    expect(forwardDelay(1_000 + interval - 1, { phase: WAIT_PHASE, generation: 1 }, last)).toBe(1);
    expect(forwardDelay(1_000 + interval, { phase: WAIT_PHASE, generation: 1 }, last)).toBe(0);
    expect(forwardDelay(1_000 + 10 * interval, { phase: WAIT_PHASE, generation: 1 }, last)).toBe(0);
  });

  it("spaces out the forwards an event storm makes at one key: a non-waiting phase is not invoked every 100 ms", () => {
    // Pod events every 10 ms for 30 s while a non-waiting phase's body runs (or fails): the relay forwards
    // whenever forwardDelay says 0, counting forwards in a row at the key as relay.ts does. In Event mode
    // no result (no "busy, retry after") comes back to slow it down.
    const key = { phase: FAST_PHASE, generation: 1 };
    let last: LastForward | undefined;
    const forwards: number[] = [];
    for (let now = 0; now <= 30_000; now += 10) {
      if (forwardDelay(now, key, last) > 0) continue;
      forwards.push(now);
      last = { ...key, at: now, inARow: sameForwardKey(key, last) ? (last?.inARow ?? 1) + 1 : 1 };
    }
    expect(phaseSpec(FAST_PHASE).requeueMs).toBeLessThan(POLL_REQUEUE_MS);
    // 100, 200, 400 ... ms apart, then one poll interval apart: about a dozen, not 300.
    expect(forwards.length).toBeLessThanOrEqual(16);
    expect(forwards.slice(0, 3)).toEqual([0, phaseSpec(FAST_PHASE).requeueMs, 3 * phaseSpec(FAST_PHASE).requeueMs]);
    // Progress resets the spacing: the next phase goes at once.
    expect(forwardDelay(30_001, { phase: WAIT_PHASE, generation: 1 }, last)).toBe(0);
    // A waiting phase keeps its poll interval, however many polls in a row.
    expect(repeatIntervalMs(WAIT_PHASE, 50)).toBe(phaseSpec(WAIT_PHASE).requeueMs);
  });

  it("forwards a pod change in a wait phase after the fast requeue delay: it is what the wait waits for", () => {
    const last: LastForward = { phase: WAIT_PHASE, generation: 1, at: 1_000, inARow: 40 };
    const key = { phase: WAIT_PHASE, generation: 1 };
    expect(POD_CHANGE_SPACING_MS).toBe(FAST_REQUEUE_MS);
    expect(forwardDelay(1_000, key, last, { podChange: true })).toBe(POD_CHANGE_SPACING_MS);
    expect(forwardDelay(1_000 + POD_CHANGE_SPACING_MS, key, last, { podChange: true })).toBe(0);
    // However many polls came before: a long transfer still ends on its client pod's change.
    expect(forwardDelay(1_050, key, { ...last, inARow: 1 }, { podChange: true })).toBe(POD_CHANGE_SPACING_MS - 50);
    // The DVM's own status or progress record keeps the poll spacing (no hot loop), as set.
    expect(forwardDelay(1_050, key, last)).toBe(phaseSpec(WAIT_PHASE).requeueMs - 50);
    expect(forwardDelay(1_050, key, last, { pollMs: 600_000 })).toBe(600_000 - 50);
    // A failed attempt's retry delay holds pod changes too.
    expect(forwardDelay(1_500, key, { ...last, notBefore: 8_000 }, { podChange: true })).toBe(6_500);
    // A phase that does not wait keeps its doubling spacing for pod events (its body is what it runs).
    const fast: LastForward = { phase: FAST_PHASE, generation: 1, at: 1_000, inARow: 6 };
    expect(forwardDelay(1_000, { phase: FAST_PHASE, generation: 1 }, fast, { podChange: true })).toBe(repeatIntervalMs(FAST_PHASE, 6));
  });

  it("spaces out a storm of pod changes in a wait phase (a tenant's own pods labelled as the DVM's): about one forward a second", () => {
    // Pod events every 10 ms for 30 s in a wait phase, the relay forwarding whenever forwardDelay says 0.
    const key = { phase: WAIT_PHASE, generation: 1 };
    let last: LastForward | undefined = recordForward(key, undefined, 0);
    const forwards: number[] = [0];
    for (let now = 10; now <= 30_000; now += 10) {
      if (forwardDelay(now, key, last, { podChange: true }) > 0) continue;
      forwards.push(now);
      last = recordForward(key, last, now);
    }
    // 100, 200, 400, 800, 1,600 ms apart, then the poll, then again: 6 in about 6.1 s, not 60.
    expect(forwards.slice(0, 6)).toEqual([0, 100, 300, 700, 1_500, 3_100]);
    expect(forwards.length).toBeLessThanOrEqual(32);
    // The forward at the poll spacing was not early: the next pod change goes after 100 ms again.
    expect(recordForward(key, { ...key, at: 0, earlyInARow: 5 }, phaseSpec(WAIT_PHASE).requeueMs).earlyInARow).toBeUndefined();
    expect(podChangeIntervalMs(0)).toBe(POD_CHANGE_SPACING_MS);
    expect(podChangeIntervalMs(50)).toBe(POLL_REQUEUE_MS);
    // A new phase starts the count afresh.
    expect(recordForward({ phase: FAST_PHASE, generation: 1 }, last, 30_001)).toEqual({ phase: FAST_PHASE, generation: 1, at: 30_001, inARow: 1 });
  });

  it("forwards a pod milestone after the fast delay however long the start-up storm before it: the data phase ends on its client pod, not on the poll", () => {
    // A real kubelet writes a starting pod's status five or six times before Running: each early forward
    // doubled the spacing, and the client pod's Succeeded at the end of the transfer waited for the poll.
    const pollMs = 600_000;
    const key = { phase: WAIT_PHASE, generation: 1 };
    const stormed: LastForward = { ...key, at: 10_000, inARow: 7, earlyInARow: 6 };
    expect(forwardDelay(10_000, key, stormed, { podChange: true, pollMs })).toBe(POD_CHANGE_SPACING_MS * 2 ** 6);
    expect(forwardDelay(10_000, key, stormed, { podChange: true, podMilestone: true, pollMs })).toBe(POD_CHANGE_SPACING_MS);
    // A failed attempt's retry delay holds a milestone too.
    expect(forwardDelay(10_000, key, { ...stormed, notBefore: 15_000 }, { podChange: true, podMilestone: true, pollMs })).toBe(5_000);
  });

  it("holds events until the function's retry delay after a failed attempt (its backoff or the API server's Retry-After)", () => {
    const last: LastForward = { phase: FAST_PHASE, generation: 1, at: 1_000, notBefore: 1_000 + 7_000 };
    expect(forwardDelay(1_500, { phase: FAST_PHASE, generation: 1 }, last)).toBe(6_500);
    expect(forwardDelay(8_000, { phase: FAST_PHASE, generation: 1 }, last)).toBe(0);
    expect(forwardDelay(1_500, { phase: WAIT_PHASE, generation: 1 }, last)).toBe(0);
  });

  it("takes the minimum interval from the itinerary; unknown phases poll like a wait phase", () => {
    for (const phase of PHASE_NAMES) expect(minForwardIntervalMs(phase)).toBe(phaseSpec(phase).requeueMs);
    // A longer poll (RelayOptions.pollMs) applies to wait phases and unknown ones only.
    for (const phase of PHASE_NAMES) expect(minForwardIntervalMs(phase, 60_000)).toBe(PHASES[phase].waits ? 60_000 : phaseSpec(phase).requeueMs);
    expect(minForwardIntervalMs("NoSuchPhase", 60_000)).toBe(60_000);
    expect(minForwardIntervalMs(undefined)).toBe(phaseSpec("Started").requeueMs);
    expect(minForwardIntervalMs("NoSuchPhase")).toBe(POLL_REQUEUE_MS);
  });
});

describe("deletions are forwarded", () => {
  it("forwards a DVM being deleted whatever its phase (a finished one still has its finalizer to release)", () => {
    expect(needsForwarding({ phase: "Completed" })).toBe(false);
    expect(needsForwarding({ phase: "Completed", deleting: true })).toBe(true);
    expect(needsForwarding({ phase: WAIT_PHASE })).toBe(true);
  });

  it("forwards the start of a deletion at once, even within the phase's requeue delay", () => {
    const last = { phase: WAIT_PHASE, generation: 1, at: 1_000 };
    expect(forwardDelay(1_001, { phase: WAIT_PHASE, generation: 1, deleting: true }, last)).toBe(0);
  });

  it("reads metadata.deletionTimestamp", () => {
    const parsed = parseObservedDvm({
      metadata: { uid: "u", namespace: "n", name: "d", resourceVersion: "1", deletionTimestamp: "2026-12-01T00:00:00Z" },
      status: { phase: "Completed" },
    });
    expect(parsed).toMatchObject({ ok: true, dvm: { deleting: true, phase: "Completed" } });
  });

  it("forgets a DVM whose run result says it is stopped", () => {
    expect(followUpAfter({ kind: "stopped", reason: "status unreadable" }, WAIT_PHASE)).toEqual({ kind: "forget", why: "stopped" });
    expect(parseRunResult({ kind: "stopped", reason: "status unreadable" })).toEqual({ ok: true, result: { kind: "stopped", reason: "status unreadable" } });
  });
});

describe("followUpAfter", () => {
  const cases: Array<[RunResult, ReturnType<typeof followUpAfter>["kind"], number | undefined]> = [
    [{ kind: "advanced", phase: "A", next: "B", requeueAfterMs: 100 }, "requeue", 100],
    [{ kind: "waiting", phase: "A", reason: "pods", requeueAfterMs: 3_000 }, "requeue", 3_000],
    [{ kind: "duplicate", phase: "A", next: "B", statusRepaired: true, requeueAfterMs: 50 }, "requeue", 50],
    [{ kind: "busy", phase: "A", retryAfterMs: 700 }, "requeue", 700],
    [{ kind: "retry", phase: "A", error: "x", retryAfterMs: 900 }, "requeue", 900],
    [{ kind: "finished", phase: "Completed" }, "forget", undefined],
    [{ kind: "gone" }, "forget", undefined],
  ];
  it.each(cases)("a RunResult %o is followed by %s", (result, kind, afterMs) => {
    const next = followUpAfter(result, WAIT_PHASE);
    expect(next.kind).toBe(kind);
    if (next.kind === "requeue") expect(next.afterMs).toBe(afterMs);
  });

  it("without a RunResult (fire-and-forget), a wait phase is polled at its requeue delay", () => {
    for (const phase of PHASE_NAMES.filter((p) => PHASES[p].waits)) {
      expect(followUpAfter(undefined, phase)).toMatchObject({ kind: "requeue", afterMs: phaseSpec(phase).requeueMs });
    }
  });

  it("without a RunResult, an early (pod-driven) forward in a wait phase is checked again after 1 s, then 2 s, then the poll", () => {
    expect([1, 2, 3, 4].map((early) => followUpAfter(undefined, WAIT_PHASE, { earlyInARow: early }))).toEqual([
      { kind: "requeue", afterMs: 1_000, why: `recheck ${WAIT_PHASE} after a pod change` },
      { kind: "requeue", afterMs: 2_000, why: `recheck ${WAIT_PHASE} after a pod change` },
      { kind: "requeue", afterMs: 3_000, why: `recheck ${WAIT_PHASE} after a pod change` },
      { kind: "requeue", afterMs: 3_000, why: `recheck ${WAIT_PHASE} after a pod change` },
    ]);
    // The relay's own poll setting, not the itinerary's, when it has one.
    expect(followUpAfter(undefined, WAIT_PHASE, { pollMs: 600_000 })).toMatchObject({ afterMs: 600_000 });
    expect(followUpAfter(undefined, WAIT_PHASE, { pollMs: 600_000, earlyInARow: 1 })).toMatchObject({ afterMs: 1_000 });
  });

  it("without a RunResult, a phase that does not wait is driven by its phase-change event (nothing scheduled)", () => {
    for (const phase of PHASE_NAMES.filter((p) => !PHASES[p].waits && !isTerminalPhase(p))) {
      expect(followUpAfter(undefined, phase)).toEqual({ kind: "none" });
    }
    expect(followUpAfter(undefined, undefined)).toEqual({ kind: "none" });
    expect(followUpAfter(undefined, "NoSuchPhase")).toEqual({ kind: "none" });
  });

  it("a terminal phase is forgotten", () => {
    expect(isTerminalPhase("Completed")).toBe(true);
    expect(isTerminalPhase(WAIT_PHASE)).toBe(false);
    expect(isTerminalPhase(undefined)).toBe(false);
    expect(followUpAfter(undefined, "Completed").kind).toBe("forget");
  });
});

describe("backoffDelay", () => {
  it("doubles from the initial delay up to the maximum", () => {
    const opts = { initialMs: 100, maxMs: 1_000 };
    expect([1, 2, 3, 4, 5, 100, 10_000].map((n) => backoffDelay(n, opts))).toEqual([100, 200, 400, 800, 1_000, 1_000, 1_000]);
    expect(backoffDelay(0, opts)).toBe(0);
  });
});

describe("parseObservedDvm", () => {
  const metadata = { uid: "u-1", namespace: "ns", name: "dvm", resourceVersion: "42", generation: 3 };

  it("reads identity and phase", () => {
    expect(parseObservedDvm({ metadata, status: { phase: WAIT_PHASE } })).toEqual({
      ok: true,
      dvm: { ...metadata, phase: WAIT_PHASE },
    });
    expect(parseObservedDvm({ metadata })).toEqual({ ok: true, dvm: metadata });
  });

  it("forwards a DVM whose status is garbage, reporting the problem", () => {
    for (const status of ["garbage", 42, [1, 2], { phase: 7 }, { phase: { nested: true } }]) {
      const parsed = parseObservedDvm({ metadata, status });
      expect(parsed.ok).toBe(true);
      if (parsed.ok) {
        expect(parsed.dvm.phase).toBeUndefined();
        expect(parsed.statusProblem).toMatch(/status/);
      }
    }
    // An unknown phase name is a string: kept, for the function to judge.
    const unknown = parseObservedDvm({ metadata, status: { phase: "NoSuchPhase" } });
    expect(unknown.ok && unknown.dvm.phase).toBe("NoSuchPhase");
  });

  it("rejects objects without identity, naming the field", () => {
    expect(parseObservedDvm(null)).toMatchObject({ ok: false });
    expect(parseObservedDvm("text")).toMatchObject({ ok: false });
    const noUid = parseObservedDvm({ metadata: { ...metadata, uid: undefined } });
    expect(noUid.ok).toBe(false);
    if (!noUid.ok) expect(noUid.error).toContain("metadata.uid");
    const badGeneration = parseObservedDvm({ metadata: { ...metadata, generation: "three" } });
    expect(!badGeneration.ok && badGeneration.error).toContain("metadata.generation");
  });
});

describe("owned objects", () => {
  it("finds the DVM uid in the label, and nothing in anything else", () => {
    expect(ownerUidOf({ metadata: { labels: { [LABEL.dvmUid]: "u-1" } } })).toBe("u-1");
    expect(ownerUidOf({ metadata: { labels: { [LABEL.dvmUid]: "" } } })).toBeUndefined();
    expect(ownerUidOf({ metadata: { labels: { other: "x" } } })).toBeUndefined();
    expect(ownerUidOf({ metadata: { labels: "garbage" } })).toBeUndefined();
    expect(ownerUidOf(undefined)).toBeUndefined();
    expect(objectKey({ metadata: { namespace: "ns", name: "p" } })).toBe("ns/p");
    expect(objectKey(42)).toBe("?");
  });
});

describe("parseRunResult", () => {
  it("accepts every RunResult kind and rejects anything else, naming the field", () => {
    expect(parseRunResult({ kind: "waiting", phase: "A", reason: "r", requeueAfterMs: 3 })).toMatchObject({ ok: true });
    expect(parseRunResult({ kind: "gone" })).toMatchObject({ ok: true });
    expect(parseRunResult({ kind: "nope" })).toMatchObject({ ok: false });
    const bad = parseRunResult({ kind: "busy", phase: "A", retryAfterMs: -1 });
    expect(!bad.ok && bad.error).toContain("retryAfterMs");
  });
});

describe("requestPhase: the phase a request names", () => {
  it("is the phase observed, or none before the DVM started", () => {
    expect(requestPhase({ phase: "CreateRsyncConfig", resourceVersion: "7" }, undefined)).toEqual({ phase: "CreateRsyncConfig" });
    expect(requestPhase({ resourceVersion: "7" }, undefined)).toEqual({});
  });

  it("is the phase the last result reported until an event newer than that forward arrives", () => {
    const reported = { phase: "CreateStunnelConfig", basedOn: "7" };
    // The watch event of the move has not arrived: the relay still holds resourceVersion 7.
    expect(requestPhase({ phase: "CreateRsyncConfig", resourceVersion: "7" }, reported)).toEqual({ phase: "CreateStunnelConfig" });
    // Any later event wins, whatever it says.
    expect(requestPhase({ phase: "CreateRsyncConfig", resourceVersion: "8" }, reported)).toEqual({ phase: "CreateRsyncConfig" });
  });
});
