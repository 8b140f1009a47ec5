/**
 * What every PhaseLedger promises, as one suite run against each implementation: the DynamoDB ledger on
 * DynamoDB Local (test/integration/ledger.test.ts) and the in-memory one the unit tests of the runner use
 * (test/unit/support/memoryLedger.test.ts), so the stand-in cannot drift from the real thing. Time is the
 * clock handed to `make`: lease expiry is exact and nothing sleeps.
 */
import { randomUUID } from "node:crypto";
import { expect, it } from "vitest";
import { type Claim, type ClaimResult, LostClaimError, type PhaseLedger } from "../../src/ledger";
import type { LedgerKey } from "../../src/ledger/types";

const LEASE_MS = 10_000;

/** A clock the test moves by hand. */
export class ManualClock {
  constructor(public ms: number) {}
  readonly now = (): number => this.ms;
  advance(ms: number): void {
    this.ms += ms;
  }
}

export function keyFor(phase: LedgerKey["phase"] = "CreateDestinationPVCs", generation = 1): LedgerKey {
  return { uid: randomUUID(), phase, generation };
}

export function claimed(result: ClaimResult): Claim {
  if (result.kind !== "claimed") throw new Error(`expected a claim, got ${JSON.stringify(result)}`);
  return result.claim;
}

/**
 * Registers the contract's tests in the calling describe block. `make(now)` returns a ledger over the one
 * store of the suite, reading time from `now`; `t0` is the suite's start time.
 */
export function ledgerContract(make: (now: () => number) => PhaseLedger, t0: number): void {
  const clock = new ManualClock(t0);
  const newClock = () => new ManualClock(clock.now());

  it("lets exactly one of 50 concurrent claims win and tells the others who holds it", async () => {
    const key = keyFor();
    // 50 invocations, each with its own ledger (own holder tokens), as 50 Lambdas would.
    const results = await Promise.all(Array.from({ length: 50 }, () => make(clock.now).claim(key, { leaseMs: LEASE_MS })));

    const winners = results.filter((r) => r.kind === "claimed");
    expect(winners).toHaveLength(1);
    const claim = claimed(winners[0]!);
    expect(claim).toEqual({ key, attempt: 1, leaseExpiresAt: clock.now() + LEASE_MS, takeover: false });
    const others = results.filter((r) => r.kind !== "claimed");
    expect(others).toHaveLength(49);
    for (const other of others) expect(other).toEqual({ kind: "held", attempt: 1, leaseExpiresAt: clock.now() + LEASE_MS });
  });

  it("returns the recorded outcome to every claim after completion and never claims again", async () => {
    const key = keyFor("CreateRsyncConfig");
    const ledger = make(clock.now);
    const claim = claimed(await ledger.claim(key, { leaseMs: LEASE_MS }));
    const outcome = await ledger.complete(claim, { result: "advanced", nextPhase: "CreateStunnelConfig" });
    expect(outcome).toEqual({ result: "advanced", nextPhase: "CreateStunnelConfig", finishedAt: clock.now() });

    // Even long after the lease would have expired: COMPLETED is final.
    const later = new ManualClock(clock.now() + 10 * LEASE_MS);
    const results = await Promise.all(Array.from({ length: 20 }, () => make(later.now).claim(key, { leaseMs: LEASE_MS })));
    for (const result of results) expect(result).toEqual({ kind: "completed", outcome, attempts: 1 });

    const [entry] = await ledger.history(key.uid);
    expect(entry).toMatchObject({ state: "COMPLETED", attempts: 1, takeovers: 0, outcome });
  });

  it("records a failed phase with its errors as the outcome", async () => {
    const key = keyFor("CreateDestinationNamespaces");
    const ledger = make(clock.now);
    const claim = claimed(await ledger.claim(key, { leaseMs: LEASE_MS }));
    const outcome = await ledger.complete(claim, { result: "failed", nextPhase: "MigrationFailed", errors: ["namespace quota exceeded"] });
    expect(await ledger.claim(key, { leaseMs: LEASE_MS })).toEqual({ kind: "completed", outcome, attempts: 1 });
    expect(outcome.errors).toEqual(["namespace quota exceeded"]);
  });

  it("lets a claim take over an expired lease with attempt + 1 and fences the previous holder out", async () => {
    const key = keyFor("CreateRsyncTransferPods");
    const local = newClock();
    const ledger = make(local.now);
    const first = claimed(await ledger.claim(key, { leaseMs: LEASE_MS }));

    local.advance(LEASE_MS); // the lease ends at leaseExpiresAt, exclusive: still held at that instant
    expect(await ledger.claim(key, { leaseMs: LEASE_MS })).toEqual({ kind: "held", attempt: 1, leaseExpiresAt: first.leaseExpiresAt });

    local.advance(1);
    const second = claimed(await ledger.claim(key, { leaseMs: LEASE_MS }));
    expect(second).toEqual({ key, attempt: 2, leaseExpiresAt: local.now() + LEASE_MS, takeover: true });

    const lost = ledger.complete(first, { result: "advanced", nextPhase: "WaitForRsyncTransferPodsRunning" });
    await expect(lost).rejects.toBeInstanceOf(LostClaimError);
    await expect(lost).rejects.toMatchObject({ attempt: 1, current: { attempt: 2, state: "RUNNING" } });
    await expect(ledger.release(first)).rejects.toBeInstanceOf(LostClaimError);
    await expect(ledger.fail(first, "stalled")).rejects.toBeInstanceOf(LostClaimError);

    local.advance(2_500);
    await ledger.complete(second, { result: "advanced", nextPhase: "WaitForRsyncTransferPodsRunning" });
    const [entry] = await ledger.history(key.uid);
    expect(entry).toMatchObject({ state: "COMPLETED", attempts: 2, takeovers: 1, waits: 0, failures: 0, elapsedSeconds: (LEASE_MS + 1 + 2_500) / 1000 });
    // The fenced-out holder cannot complete after the fact either.
    await expect(ledger.complete(first, { result: "failed", nextPhase: "MigrationFailed" })).rejects.toMatchObject({
      current: { attempt: 2, state: "COMPLETED" },
    });
  });

  it("counts waits and failures, and a claim after release() or fail() is a new attempt without takeover", async () => {
    const key = keyFor("WaitForRsyncTransferPodsRunning");
    const ledger = make(clock.now);

    const first = claimed(await ledger.claim(key, { leaseMs: LEASE_MS }));
    await ledger.release(first);
    const second = claimed(await ledger.claim(key, { leaseMs: LEASE_MS }));
    expect(second).toMatchObject({ attempt: 2, takeover: false });
    expect((await ledger.history(key.uid))[0]).toMatchObject({ state: "RUNNING", attempts: 2, waits: 1, failures: 0, takeovers: 0 });

    await ledger.fail(second, "ThrottlingException from the destination API server");
    expect((await ledger.history(key.uid))[0]).toMatchObject({
      state: "RETRYING",
      attempts: 2,
      waits: 1,
      failures: 1,
      takeovers: 0,
      lastError: "ThrottlingException from the destination API server",
    });
    // A settled attempt cannot write again.
    await expect(ledger.complete(second, { result: "advanced", nextPhase: "RunRsyncOperations" })).rejects.toBeInstanceOf(LostClaimError);

    const third = claimed(await ledger.claim(key, { leaseMs: LEASE_MS }));
    expect(third).toMatchObject({ attempt: 3, takeover: false });
    await ledger.complete(third, { result: "advanced", nextPhase: "RunRsyncOperations" });
    expect((await ledger.history(key.uid))[0]).toMatchObject({ state: "COMPLETED", attempts: 3, waits: 1, failures: 1, takeovers: 0 });
  });

  it("keeps counting takeovers exactly across waits, failures and crashes", async () => {
    const key = keyFor("RunRsyncOperations");
    const local = newClock();
    const ledger = make(local.now);
    await ledger.release(claimed(await ledger.claim(key, { leaseMs: LEASE_MS }))); // attempt 1 waits
    await ledger.claim(key, { leaseMs: LEASE_MS }); // attempt 2 crashes
    local.advance(LEASE_MS + 1);
    const third = claimed(await ledger.claim(key, { leaseMs: LEASE_MS })); // takes over
    expect(third).toMatchObject({ attempt: 3, takeover: true });
    await ledger.fail(third, "rsync exited 23");
    const fourth = claimed(await ledger.claim(key, { leaseMs: LEASE_MS }));
    expect(fourth).toMatchObject({ attempt: 4, takeover: false });
    local.advance(LEASE_MS + 1); // attempt 4 crashes too
    const fifth = claimed(await ledger.claim(key, { leaseMs: LEASE_MS }));
    expect(fifth).toMatchObject({ attempt: 5, takeover: true });
    expect((await ledger.history(key.uid))[0]).toMatchObject({ attempts: 5, waits: 1, failures: 1, takeovers: 2 });
  });

  it("returns one DVM's history in the order its phases started, with elapsed seconds, and nothing of other DVMs", async () => {
    const uid = randomUUID();
    const other = randomUUID();
    const local = newClock();
    const ledger = make(local.now);
    const dvm = { namespace: "openshift-migration", name: "dvm-1" };
    const steps = [
      { phase: "Started", generation: 1, next: "CleanStaleRsyncResources", ms: 200 },
      { phase: "CleanStaleRsyncResources", generation: 1, next: "WaitForStaleRsyncResourcesTerminated", ms: 1_500 },
      // The spec changed: generation 2 starts over; its sort key sorts after generation 1's.
      { phase: "Started", generation: 2, next: "CleanStaleRsyncResources", ms: 300 },
    ] as const;
    for (const step of steps) {
      const claim = claimed(await ledger.claim({ uid, phase: step.phase, generation: step.generation }, { leaseMs: LEASE_MS, dvm }));
      await ledger.claim({ uid: other, phase: step.phase, generation: step.generation }, { leaseMs: LEASE_MS });
      local.advance(step.ms);
      await ledger.complete(claim, { result: "advanced", nextPhase: step.next });
      local.advance(50);
    }

    const history = await ledger.history(uid);
    expect(history.map((e) => [e.key.phase, e.key.generation, e.elapsedSeconds])).toEqual([
      ["Started", 1, 0.2],
      ["CleanStaleRsyncResources", 1, 1.5],
      ["Started", 2, 0.3],
    ]);
    for (const entry of history) {
      expect(entry.key.uid).toBe(uid);
      expect(entry.dvm).toEqual(dvm);
      expect(entry.finishedAt! - entry.startedAt).toBe(entry.elapsedSeconds! * 1000);
    }
    expect(history.map((e) => e.startedAt)).toEqual([...history.map((e) => e.startedAt)].sort((a, b) => a - b));
    expect(await ledger.history(randomUUID())).toEqual([]);
    expect((await ledger.history(other)).every((e) => e.key.uid === other && e.state === "RUNNING")).toBe(true);
  });

  it("records the body's status update and failure category with the completion and returns them to later claims", async () => {
    const key = keyFor("RunRsyncOperations");
    const ledger = make(clock.now);
    const claim = claimed(await ledger.claim(key, { leaseMs: LEASE_MS }));
    const statusUpdate = {
      rsyncOperations: [{ pvcReference: { namespace: "shop", name: "db" }, currentAttempt: 2, failed: true }],
      failedPods: [{ name: "rsync-db-2", namespace: "shop", pvcRef: { namespace: "shop", name: "db" } }],
    };
    const outcome = await ledger.complete(claim, {
      result: "failed",
      nextPhase: "MigrationFailed",
      errors: ["rsync failed"],
      statusUpdate,
      category: "Warn",
    });
    expect(outcome).toMatchObject({ statusUpdate, category: "Warn" });
    const again = await make(clock.now).claim(key, { leaseMs: LEASE_MS });
    expect(again).toEqual({ kind: "completed", outcome, attempts: 1 });
  });

  it("renews a lease for the attempt that holds it and refuses the renewal of an attempt taken over", async () => {
    const key = keyFor("RunRsyncOperations");
    const local = newClock();
    const ledger = make(local.now);
    const first = claimed(await ledger.claim(key, { leaseMs: LEASE_MS }));
    local.advance(LEASE_MS - 1);
    expect(await ledger.renew(first, LEASE_MS)).toBe(local.now() + LEASE_MS);
    // Renewed: a claim just after the original lease would have ended still finds it held.
    local.advance(2);
    expect(await make(local.now).claim(key, { leaseMs: LEASE_MS })).toMatchObject({ kind: "held", attempt: 1 });
    // Not renewed again: after the renewed lease ends, another invocation takes over and the old one is fenced out.
    local.advance(LEASE_MS);
    const second = claimed(await make(local.now).claim(key, { leaseMs: LEASE_MS }));
    expect(second).toMatchObject({ attempt: 2, takeover: true });
    await expect(ledger.renew(first, LEASE_MS)).rejects.toBeInstanceOf(LostClaimError);
    expect(await ledger.renew(second, LEASE_MS)).toBe(local.now() + LEASE_MS);
  });
}
