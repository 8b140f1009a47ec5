/**
 * Every body is bounded by its lease: a body slower than its lease is stopped before another invocation
 * may take the phase over, so two executions of one phase never overlap; a body that renews its lease
 * runs as long as it needs; a renewal (or a failure record) that finds the claim lost stops quietly.
 * Real timers with short leases; in-memory ledger and cluster (pure logic of the runner).
 */

import { beforeEach, describe, expect, it } from "vitest";
import type { ReconcileRequest, RunResult } from "../../../src/contracts/request";
import { EXECUTABLE_PHASES, type ExecutablePhaseName } from "../../../src/dvm/itinerary";
import { KINDS } from "../../../src/kube/objects";
import type { ClusterResolver } from "../../../src/kube/resolver";
import { advance, type PhaseBody, type PhaseContext, type PhaseOutcome } from "../../../src/phases/types";
import { PhaseRunner } from "../../../src/runner/runner";
import { FakeCluster } from "../../support/fakeCluster";
import { MemoryLedger } from "../../support/memoryLedger";
import { MemoryDvmStore } from "../../support/memoryStore";

// In the DVM's own namespace (MemoryDvmStore's), which the default migration policy allows.
const SPEC = {
  persistentVolumeClaims: [{ name: "data", namespace: "openshift-migration", targetStorageClass: "standard", targetAccessModes: ["ReadWriteOnce"] }],
};
const LEASE_MS = 400;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("a phase body bounded by its lease", () => {
  let store: MemoryDvmStore;
  let ledger: MemoryLedger;
  let host: FakeCluster;
  let resolver: ClusterResolver;
  let request: ReconcileRequest;

  beforeEach(() => {
    store = new MemoryDvmStore(SPEC);
    ledger = new MemoryLedger();
    host = new FakeCluster("host");
    resolver = { resolve: async () => ({ host, source: host, destination: host, sameCluster: true }) };
    const { uid, namespace, name } = store.current().metadata;
    request = { uid, namespace, name };
  });

  function runnerWithStarted(started: (ctx: PhaseContext) => Promise<PhaseOutcome>): PhaseRunner {
    const bodies = Object.fromEntries(EXECUTABLE_PHASES.map((phase) => [phase, async () => advance()])) as unknown as Record<ExecutablePhaseName, PhaseBody>;
    bodies.Started = started;
    return new PhaseRunner({ store, ledger, clusters: resolver, bodies, leaseMs: LEASE_MS, maxRetryDelayMs: 50 });
  }

  /** Invokes the runner again and again (as a relay with duplicates would) until `done` settles. */
  async function invokeMeanwhile(runner: PhaseRunner, done: Promise<unknown>): Promise<RunResult[]> {
    let over = false;
    void done.finally(() => (over = true));
    const results: RunResult[] = [];
    while (!over) {
      results.push(await runner.run(request));
      await sleep(40);
    }
    return results;
  }

  it("never overlaps a second execution, however slow the body (concurrent entries into the body: at most 1)", async () => {
    let inside = 0;
    let maxInside = 0;
    let entries = 0;
    // A body that makes one API call after another for three leases.
    const slow = async (ctx: PhaseContext): Promise<PhaseOutcome> => {
      entries++;
      inside++;
      maxInside = Math.max(maxInside, inside);
      try {
        const end = Date.now() + 3 * LEASE_MS;
        while (Date.now() < end) {
          await ctx.clusters.host.get({ ...KINDS.ConfigMap, namespace: "openshift-migration", name: "step" });
          await sleep(20);
        }
        return advance();
      } finally {
        inside--;
      }
    };
    const runner = runnerWithStarted(slow);
    const first = runner.run(request);
    const others = await invokeMeanwhile(runner, sleep(4 * LEASE_MS));

    expect(await first).toMatchObject({ kind: "retry", phase: "Started" });
    expect(entries).toBeGreaterThan(1);
    expect(maxInside).toBe(1);
    expect(others.some((r) => r.kind === "retry")).toBe(true);
    const [entry] = await ledger.history(request.uid);
    expect(entry).toMatchObject({ state: "RETRYING" });
    expect(entry?.lastError).toMatch(/did not finish within its lease/);
    // Stopped bodies are refused by the cluster: no takeover was ever needed.
    expect(entry?.takeovers).toBe(0);
  });

  it("lets a body that renews its lease run longer than the lease, once, while others find it held", async () => {
    let entries = 0;
    const renewing = async (ctx: PhaseContext): Promise<PhaseOutcome> => {
      entries++;
      for (let step = 0; step < 10; step++) {
        await sleep(LEASE_MS / 4);
        await ctx.lease?.renew();
        await ctx.clusters.host.get({ ...KINDS.ConfigMap, namespace: "openshift-migration", name: `step-${step}` });
      }
      return advance();
    };
    const runner = runnerWithStarted(renewing);
    const first = runner.run(request);
    const others = await invokeMeanwhile(runner, first);

    expect(await first).toMatchObject({ kind: "advanced", phase: "Started" });
    expect(entries).toBe(1);
    expect(others.length).toBeGreaterThan(0);
    expect(others.every((r) => r.kind === "busy" || r.kind === "advanced" || r.kind === "duplicate")).toBe(true);
    const [entry] = await ledger.history(request.uid);
    expect(entry).toMatchObject({ state: "COMPLETED", attempts: 1, takeovers: 0 });
  });

  it("stops a body whose renewal finds the claim taken over, without writing anything", async () => {
    let calledAfterLoss = false;
    const runner = runnerWithStarted(async (ctx) => {
      // Someone else took the entry over (e.g. this host was frozen past its lease).
      const entry = [...ledger.entries.values()][0]!;
      entry.attempts += 1;
      await ctx.lease?.renew();
      calledAfterLoss = true;
      return advance();
    });
    expect(await runner.run(request)).toMatchObject({ kind: "busy", phase: "Started" });
    expect(calledAfterLoss).toBe(false);
    expect(store.current().status.phase).toBeUndefined();
  });

  it("returns busy when recording a failed attempt finds the claim taken over (no unhandled LostClaimError)", async () => {
    const runner = runnerWithStarted(async () => {
      const entry = [...ledger.entries.values()][0]!;
      entry.attempts += 1;
      throw new Error("API server unavailable");
    });
    expect(await runner.run(request)).toMatchObject({ kind: "busy", phase: "Started" });
  });

  it("stops the body before the host's own deadline (Lambda's timeout), leaving room to record the attempt", async () => {
    let stoppedBy: unknown;
    const runner = runnerWithStarted(async (ctx) => {
      await new Promise((_, reject) => ctx.lease?.signal.addEventListener("abort", () => reject((stoppedBy = ctx.lease?.signal.reason))));
      return advance();
    });
    const result = await runner.run(request, { hostDeadlineAt: Date.now() + 5_000 + 100 });
    expect(result).toMatchObject({ kind: "retry", phase: "Started" });
    expect(String(stoppedBy)).toMatch(/LeaseDeadlineError/);
  });

  describe("a body whose last answer arrives just after its deadline (found by the chaos slow-body fault)", () => {
    // A margin wider than the clock skew (2 s), so the runner waits for the body after the stop.
    const lease = { leaseMs: 4_000, leaseMarginMs: 2_600 };
    const deadlineMs = lease.leaseMs - lease.leaseMarginMs;

    function runnerWith(started: PhaseBody): PhaseRunner {
      const bodies = Object.fromEntries(EXECUTABLE_PHASES.map((phase) => [phase, async () => advance()])) as unknown as Record<ExecutablePhaseName, PhaseBody>;
      bodies.Started = started;
      return new PhaseRunner({ store, ledger, clusters: resolver, bodies, ...lease, maxRetryDelayMs: 50 });
    }

    it("keeps the outcome of a body that was refused nothing: its work is done, it is not repeated", async () => {
      let entries = 0;
      const runner = runnerWith(async (ctx) => {
        entries++;
        await ctx.clusters.host.get({ ...KINDS.ConfigMap, namespace: "openshift-migration", name: "step" });
        // The answer to a call sent before the deadline, arriving after it.
        await sleep(deadlineMs + 200);
        return advance();
      });
      expect(await runner.run(request)).toMatchObject({ kind: "advanced", phase: "Started" });
      expect(await runner.run(request)).not.toMatchObject({ phase: "Started" });
      expect(entries).toBe(1);
      const [entry] = await ledger.history(request.uid);
      expect(entry).toMatchObject({ state: "COMPLETED", attempts: 1 });
    });

    it("retries a body that was refused a call after the deadline, even when it swallowed the refusal", async () => {
      let entries = 0;
      const runner = runnerWith(async (ctx) => {
        entries++;
        await sleep(deadlineMs + 200);
        await ctx.clusters.host.get({ ...KINDS.ConfigMap, namespace: "openshift-migration", name: "step" }).catch(() => undefined);
        return advance();
      });
      expect(await runner.run(request)).toMatchObject({ kind: "retry", phase: "Started" });
      const [entry] = await ledger.history(request.uid);
      expect(entry).toMatchObject({ state: "RETRYING" });
      expect(entries).toBe(1);
    });
  });
});
