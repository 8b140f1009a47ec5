/**
 * Leader election's logic against an in-memory Lease with the API server's rules (create fails if it
 * exists, update fails on a stale resourceVersion), on fake timers. The real Lease and real processes
 * are in test/integration/relayFailover.test.ts.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { silentLogger } from "../../../src/lib/log";
import { LeaderElectionConfigError, LeaderElector, leaderElectionTimingProblem } from "../../../src/relay/leaderElection";
import { Link, MemoryLeaderLease } from "../../support/memoryLeaderLease";

const TIMING = { leaseDurationMs: 4_000, renewDeadlineMs: 2_500, retryPeriodMs: 500 };

/** Who leads when, from the callbacks: the one record every test checks for overlaps. */
class Timeline {
  readonly events: Array<{ at: number; who: string; what: "started" | "stopped" }> = [];
  private readonly leading = new Set<string>();
  maxLeaders = 0;

  candidate(lease: MemoryLeaderLease, identity: string): { elector: LeaderElector; link: Link } {
    const link = new Link(lease);
    const elector = new LeaderElector({
      ...TIMING,
      store: link,
      identity,
      log: silentLogger,
      onStartedLeading: () => {
        this.leading.add(identity);
        this.maxLeaders = Math.max(this.maxLeaders, this.leading.size);
        this.events.push({ at: Date.now(), who: identity, what: "started" });
      },
      onStoppedLeading: async () => {
        this.leading.delete(identity);
        this.events.push({ at: Date.now(), who: identity, what: "stopped" });
      },
    });
    return { elector, link };
  }

  started(who: string): number | undefined {
    return this.events.find((e) => e.who === who && e.what === "started")?.at;
  }
}

describe("LeaderElector", () => {
  let electors: LeaderElector[] = [];
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(async () => {
    const stopping = electors.map((e) => e.stop());
    await vi.runAllTimersAsync();
    await Promise.all(stopping);
    electors = [];
    vi.useRealTimers();
  });

  function start(timeline: Timeline, lease: MemoryLeaderLease, identity: string) {
    const candidate = timeline.candidate(lease, identity);
    electors.push(candidate.elector);
    candidate.elector.start();
    return candidate;
  }

  it("the first candidate creates the Lease and leads; the next one stands by, in contact, and renewals keep it there", async () => {
    const lease = new MemoryLeaderLease();
    const timeline = new Timeline();
    const a = start(timeline, lease, "a");
    await vi.advanceTimersByTimeAsync(10);
    const b = start(timeline, lease, "b");
    await vi.advanceTimersByTimeAsync(20_000);
    expect(a.elector.isLeader()).toBe(true);
    expect(b.elector.isLeader()).toBe(false);
    expect(b.elector.inContact()).toBe(true);
    expect(b.elector.snapshot()).toMatchObject({ identity: "b", leading: false, holder: "a", terms: 0, failures: 0 });
    expect(lease.lease?.record).toMatchObject({ holderIdentity: "a", leaseDurationSeconds: 4, leaseTransitions: 0 });
    expect(timeline.events).toEqual([{ at: expect.any(Number), who: "a", what: "started" }]);
  });

  it("a leader cut off from the API server steps down before the standby may take over; never two leaders", async () => {
    const lease = new MemoryLeaderLease();
    const timeline = new Timeline();
    const a = start(timeline, lease, "a");
    await vi.advanceTimersByTimeAsync(10);
    start(timeline, lease, "b");
    await vi.advanceTimersByTimeAsync(5_000);
    const cutAt = Date.now();
    a.link.state = "cut";
    await vi.advanceTimersByTimeAsync(10_000);

    const stopped = timeline.events.find((e) => e.who === "a" && e.what === "stopped")!;
    const bStarted = timeline.started("b")!;
    expect(stopped.at - cutAt).toBeLessThanOrEqual(TIMING.renewDeadlineMs);
    expect(bStarted).toBeGreaterThan(stopped.at);
    expect(timeline.maxLeaders).toBe(1);
    expect(a.elector.snapshot()).toMatchObject({ leading: false, failures: expect.any(Number) });
    expect(a.elector.snapshot().failures).toBeGreaterThan(0);

    // Healed: a sees b's Lease and stays a standby.
    a.link.state = "up";
    await vi.advanceTimersByTimeAsync(10_000);
    expect(a.elector.isLeader()).toBe(false);
    expect(a.elector.snapshot().holder).toBe("b");
    expect(lease.lease?.record).toMatchObject({ holderIdentity: "b", leaseTransitions: 1 });
  });

  it("a leader that stops answering (killed, frozen) is replaced only after the lease duration without renewal", async () => {
    const lease = new MemoryLeaderLease();
    const timeline = new Timeline();
    const a = start(timeline, lease, "a");
    await vi.advanceTimersByTimeAsync(10);
    start(timeline, lease, "b");
    await vi.advanceTimersByTimeAsync(5_000);
    const frozenAt = Date.now();
    a.link.state = "frozen";
    await vi.advanceTimersByTimeAsync(TIMING.leaseDurationMs - TIMING.retryPeriodMs - 10);
    expect(timeline.started("b")).toBeUndefined();
    await vi.advanceTimersByTimeAsync(5_000);
    // The last renewal b saw was at most one retry period before the freeze.
    expect(timeline.started("b")! - frozenAt).toBeGreaterThanOrEqual(TIMING.leaseDurationMs - TIMING.retryPeriodMs);
    expect(timeline.maxLeaders).toBe(1);
  });

  it("a clean stop steps down, then releases the Lease: the standby takes over at its next attempt", async () => {
    const lease = new MemoryLeaderLease();
    const timeline = new Timeline();
    const a = start(timeline, lease, "a");
    await vi.advanceTimersByTimeAsync(10);
    start(timeline, lease, "b");
    await vi.advanceTimersByTimeAsync(5_000);
    const stopping = a.elector.stop();
    await vi.advanceTimersByTimeAsync(10);
    await stopping;
    const stoppedAt = Date.now();
    expect(lease.lease?.record.holderIdentity).toBe("");
    await vi.advanceTimersByTimeAsync(TIMING.retryPeriodMs + 10);
    expect(timeline.started("b")! - stoppedAt).toBeLessThanOrEqual(TIMING.retryPeriodMs);
    expect(lease.lease?.record).toMatchObject({ holderIdentity: "b", leaseTransitions: 1 });
  });

  it("candidates racing for a missing Lease: exactly one wins", async () => {
    const lease = new MemoryLeaderLease();
    const timeline = new Timeline();
    for (const id of ["a", "b", "c", "d"]) start(timeline, lease, id);
    await vi.advanceTimersByTimeAsync(30_000);
    expect(timeline.maxLeaders).toBe(1);
    expect(timeline.events.filter((e) => e.what === "started")).toHaveLength(1);
  });

  it("a restarted replica with the same identity takes its own Lease back at once", async () => {
    const lease = new MemoryLeaderLease();
    lease.create({ holderIdentity: "a", leaseDurationSeconds: 4, leaseTransitions: 3, renewTime: new Date() });
    const timeline = new Timeline();
    start(timeline, lease, "a");
    await vi.advanceTimersByTimeAsync(10);
    expect(timeline.started("a")).toBeDefined();
    expect(lease.lease?.record.leaseTransitions).toBe(3);
  });

  it("refuses timings that would let two leaders work at once", () => {
    expect(leaderElectionTimingProblem(TIMING)).toBeUndefined();
    expect(leaderElectionTimingProblem({ ...TIMING, renewDeadlineMs: 4_000 })?.field).toBe("renewDeadlineMs");
    expect(leaderElectionTimingProblem({ ...TIMING, retryPeriodMs: 2_500 })?.field).toBe("retryPeriodMs");
    expect(leaderElectionTimingProblem({ ...TIMING, leaseDurationMs: 4_500 })?.field).toBe("leaseDurationMs");
    expect(() => new Timeline().candidate(new MemoryLeaderLease(), "")).toThrow(LeaderElectionConfigError);
  });
});
