/**
 * A claim is given back on every path that can (issue 24, item 5): a step that fails after a claim
 * (the read, the deletion fence) releases it at once, and the writes that end an attempt (complete,
 * fail, release) are retried through a throttled ledger until the lease's end, so a short DynamoDB
 * throttle neither locks the phase for its lease nor runs a finished body again. Under a host that kills
 * the invocation at a deadline (Lambda), the lease ends there too (item 11). In-memory stand-ins, with a
 * clock that the runner's pauses move.
 */

import { beforeEach, describe, expect, it } from "vitest";
import type { ReconcileRequest } from "../../../src/contracts/request";
import { EXECUTABLE_PHASES, type ExecutablePhaseName } from "../../../src/dvm/itinerary";
import type { DvmStore } from "../../../src/kube/dvmStore";
import { KubeApiError } from "../../../src/kube/errors";
import type { ClusterResolver } from "../../../src/kube/resolver";
import type { Claim, RecordedOutcome } from "../../../src/ledger";
import { LedgerUnavailableError } from "../../../src/ledger/errors";
import { advance, type PhaseBody, type PhaseOutcome, wait } from "../../../src/phases/types";
import { PhaseRunner } from "../../../src/runner/runner";
import { FakeCluster } from "../../support/fakeCluster";
import { MemoryLedger } from "../../support/memoryLedger";
import { MemoryDvmStore } from "../../support/memoryStore";

const SPEC = {
  persistentVolumeClaims: [{ name: "data", namespace: "openshift-migration", targetStorageClass: "standard", targetAccessModes: ["ReadWriteOnce"] }],
};
const LEASE_MS = 60_000;

/** A ledger whose ending writes are throttled through the ledger's own retries for the next `n` calls. */
class ThrottledLedger extends MemoryLedger {
  throttled: Record<"complete" | "fail" | "release", number> = { complete: 0, fail: 0, release: 0 };
  refusals = 0;

  private refuse(operation: "complete" | "fail" | "release"): void {
    if (this.throttled[operation] <= 0) return;
    this.throttled[operation]--;
    this.refusals++;
    const cause = Object.assign(new Error("Rate of requests exceeds the allowed throughput."), { name: "ThrottlingException" });
    throw new LedgerUnavailableError(operation, 5, cause);
  }

  override async complete(claim: Claim, outcome: RecordedOutcome) {
    this.refuse("complete");
    return super.complete(claim, outcome);
  }

  override async fail(claim: Claim, error: string) {
    this.refuse("fail");
    return super.fail(claim, error);
  }

  override async release(claim: Claim) {
    this.refuse("release");
    return super.release(claim);
  }
}

describe("claims given back when a step after them fails", () => {
  let now: number;
  let store: MemoryDvmStore;
  let ledger: ThrottledLedger;
  let executions: Map<string, number>;
  let failReads: (readNumber: number) => Error | undefined;
  let reads: number;
  let started: Partial<Record<ExecutablePhaseName, () => Promise<PhaseOutcome>>>;
  const clock = { now: () => now };
  const host = new FakeCluster("host");
  const resolver: ClusterResolver = { resolve: async () => ({ host, source: host, destination: host, sameCluster: true }) };

  beforeEach(() => {
    now = Date.parse("2026-01-01T00:00:00Z");
    store = new MemoryDvmStore(SPEC);
    ledger = new ThrottledLedger(() => now);
    executions = new Map();
    reads = 0;
    failReads = () => undefined;
    started = {};
  });

  const reading: DvmStore = {
    get: async (namespace, name) => {
      const failure = failReads(++reads);
      if (failure) throw failure;
      return store.get(namespace, name);
    },
    writeStatus: (dvm, status) => store.writeStatus(dvm, status),
    writeFinalizers: (dvm, finalizers) => store.writeFinalizers(dvm, finalizers),
  };

  function runner(): PhaseRunner {
    const bodies = Object.fromEntries(
      EXECUTABLE_PHASES.map((phase) => [
        phase,
        (async () => {
          executions.set(phase, (executions.get(phase) ?? 0) + 1);
          return (started[phase] ?? (async () => advance()))();
        }) as PhaseBody,
      ]),
    ) as Record<ExecutablePhaseName, PhaseBody>;
    // The pauses between retry rounds move the test's clock: the lease's end is reached without waiting.
    return new PhaseRunner({ store: reading, ledger, clusters: resolver, bodies, clock, leaseMs: LEASE_MS, sleep: async (ms) => void (now += ms) });
  }

  function request(phase?: string): ReconcileRequest {
    const { uid, namespace, name, generation } = store.current().metadata;
    return { uid, namespace, name, generation, ...(phase ? { phase } : {}) };
  }

  async function entryOf(phase: string) {
    return (await ledger.history(request().uid)).find((e) => e.key.phase === phase);
  }

  const throttled = () => new KubeApiError("read DirectVolumeMigration: Too Many Requests", 429, "TooManyRequests");

  it("a guessed phase whose read fails gives its claim back: the next invocation runs it at once", async () => {
    const r = runner();
    expect(await r.run(request())).toMatchObject({ kind: "advanced", phase: "Started" });
    failReads = (n) => (n === 3 ? throttled() : undefined);
    await expect(r.run(request("CleanStaleRsyncResources"))).rejects.toThrow(/Too Many Requests/);
    expect(await entryOf("CleanStaleRsyncResources")).toMatchObject({ state: "WAITING" });
    expect(await r.run(request("CleanStaleRsyncResources"))).toMatchObject({ kind: "advanced", phase: "CleanStaleRsyncResources" });
  });

  it("a failed deletion re-check gives the claim back", async () => {
    const r = runner();
    expect(await r.run(request())).toMatchObject({ kind: "advanced", phase: "Started" });
    // No guess: the first read decides, the second (after the claim) is the deletion fence.
    failReads = (n) => (n === 4 ? throttled() : undefined);
    await expect(r.run(request())).rejects.toThrow(/Too Many Requests/);
    expect(executions.get("CleanStaleRsyncResources")).toBeUndefined();
    expect(await entryOf("CleanStaleRsyncResources")).toMatchObject({ state: "WAITING" });
    expect(await r.run(request())).toMatchObject({ kind: "advanced", phase: "CleanStaleRsyncResources" });
  });

  it("a completion throttled past the ledger's own retries is retried within the lease: the body runs once", async () => {
    const r = runner();
    ledger.throttled.complete = 4;
    expect(await r.run(request())).toMatchObject({ kind: "advanced", phase: "Started" });
    expect(ledger.refusals).toBe(4);
    expect(await entryOf("Started")).toMatchObject({ state: "COMPLETED", attempts: 1 });
    // Long after the lease: nothing to take over, nothing runs again.
    now += 2 * LEASE_MS;
    await r.run(request("Started"));
    expect(executions.get("Started")).toBe(1);
  });

  it("a failed attempt and a wait are recorded through a throttled ledger, leaving the phase claimable", async () => {
    const r = runner();
    started.Started = async () => {
      throw new KubeApiError("create Pod: Too Many Requests", 429, "TooManyRequests");
    };
    ledger.throttled.fail = 3;
    expect(await r.run(request())).toMatchObject({ kind: "retry", phase: "Started" });
    expect(await entryOf("Started")).toMatchObject({ state: "RETRYING" });

    started.Started = async () => wait("not yet");
    ledger.throttled.release = 3;
    expect(await r.run(request())).toMatchObject({ kind: "waiting", phase: "Started" });
    expect(await entryOf("Started")).toMatchObject({ state: "WAITING" });
  });

  it("gives up at the lease's end when the ledger stays throttled, not before and not after", async () => {
    const r = runner();
    const claimedAt = now;
    ledger.throttled.complete = Number.POSITIVE_INFINITY;
    await expect(r.run(request())).rejects.toBeInstanceOf(LedgerUnavailableError);
    expect(ledger.refusals).toBeGreaterThan(5);
    expect(now).toBeLessThanOrEqual(claimedAt + LEASE_MS);
    expect(now).toBeGreaterThan(claimedAt + LEASE_MS - 2_000);
  });

  it("under a host with a deadline (Lambda's timeout) the claim's lease ends with the host, renewals included", async () => {
    const hostDeadlineAt = now + 20_000;
    const leases: number[] = [];
    const leaseOfStarted = () => [...ledger.entries.values()].find((e) => e.key.phase === "Started")!.leaseExpiresAt;
    const bodies = Object.fromEntries(EXECUTABLE_PHASES.map((phase) => [phase, (async () => advance()) as PhaseBody])) as Record<
      ExecutablePhaseName,
      PhaseBody
    >;
    bodies.Started = async (ctx) => {
      leases.push(leaseOfStarted());
      now += 5_000;
      await ctx.lease!.renew();
      leases.push(leaseOfStarted());
      return advance();
    };
    const r = new PhaseRunner({ store: reading, ledger, clusters: resolver, bodies, clock, leaseMs: LEASE_MS });
    expect(await r.run(request(), { hostDeadlineAt })).toMatchObject({ kind: "advanced", phase: "Started" });
    expect(leases).toEqual([hostDeadlineAt, hostDeadlineAt]);
  });
});
