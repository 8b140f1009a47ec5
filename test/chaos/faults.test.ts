/**
 * Each fault on its own, on the shared control planes: our runner and the baseline side by side, the
 * same bodies, the same faults. Invariants only, never timings.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ChaosSuite, chaosSuite } from "./environment";
import { describeReport, runScenario, type ScenarioReport, scenarioNamed, type TargetReport } from "./harness";
import type { TargetKind } from "./harness/targets";

let suite: ChaosSuite;

beforeAll(async () => {
  suite = await chaosSuite();
});

afterAll(async () => {
  await suite?.stop();
});

async function run(
  name: string,
  options: { dvms?: number; pvcs?: number; leaseMs?: number; targets?: TargetKind[] } = {},
): Promise<{ report: ScenarioReport; ours: TargetReport; baseline: TargetReport }> {
  const report = await runScenario({
    env: suite.env,
    observatory: suite.observatory,
    scenario: scenarioNamed(name),
    dvms: options.dvms ?? 2,
    pvcs: options.pvcs ?? 2,
    // A bound for "stuck", not a speed claim: crash takeovers wait out leases, and a loaded 2-core CI
    // machine stretches every body (a crash-twice run needed more than 90 s there).
    timeoutMs: 180_000,
    ...(options.targets ? { targets: options.targets } : {}),
    ...(options.leaseMs ? { leaseMs: options.leaseMs } : {}),
  });
  for (const line of describeReport(report)) console.log(line);
  return { report, ours: report.reports.find((r) => r.target === "ours")!, baseline: report.reports.find((r) => r.target !== "ours")! };
}

/** What must hold for our runner in every scenario without crashes. */
function expectExactlyOnce(ours: TargetReport): void {
  expect(ours.stuck, "every migration completes").toEqual([]);
  expect(ours.repeats.details, "no phase body runs twice").toEqual([]);
  expect(ours.repeats.repeats).toBe(0);
  expect(ours.repeats.waitRepeats).toBe(0);
  expect(ours.repeats.overlaps).toBe(0);
  expect(ours.lostTransitions).toEqual([]);
  expect(ours.regressions).toEqual([]);
  expect(ours.createdTwice).toEqual([]);
  expect(ours.withoutResults, "every succeeded migration keeps its per-PVC results").toEqual([]);
}

describe("chaos: one fault at a time", () => {
  it("no fault: the control run", async () => {
    const { ours } = await run("none", { targets: ["ours"] });
    expectExactlyOnce(ours);
  });

  it("no fault, one DVM as in the seed: the cached baseline repeats phases from its own stale reads", async () => {
    // One DVM: with several, the one worker serves the others first and the cache catches up meanwhile.
    const { baseline } = await run("none", { targets: ["baseline"], dvms: 1, pvcs: 3 });
    // Nothing injected: the upstream bug from the real mechanism. A progress-record event during a
    // reconcile requeues the DVM at once, and that reconcile reads the cache before the status write's
    // watch event arrived. The stale reads are counted against the controller's own last write.
    expect(baseline.staleReads, "the informer cache served reads older than the controller's own write").toBeGreaterThan(0);
    expect(baseline.repeats.repeats, "a stale read re-ran the previous phase").toBeGreaterThan(0);
    expect(baseline.stuck).toEqual([]);
    // The guarded status write refuses the stale reconcile's write: the status never moves back.
    expect(baseline.regressions).toEqual([]);
  });

  it("stale replay: ours runs each phase once whatever the read", async () => {
    const { ours } = await run("stale-replay", { targets: ["ours"] });
    expect(ours.delivery.staleReads).toBeGreaterThan(0);
    expectExactlyOnce(ours);
  });

  it("the same loop with a fresh GET and no ledger: no stale reads, but two replicas repeat phases", async () => {
    const { baseline: fresh } = await run("concurrent", { targets: ["fresh-get"] });
    expect(fresh.staleReads).toBe(0);
    expect(fresh.stuck).toEqual([]);
    expect(fresh.repeats.repeats, "two replicas ran the same phase").toBeGreaterThan(0);
  });

  it("duplicate and reordered deliveries", async () => {
    const { ours } = await run("duplicates");
    expect(ours.delivery.duplicates).toBeGreaterThan(0);
    expect(ours.delivery.reordered).toBeGreaterThan(0);
    expectExactlyOnce(ours);
  });

  it("concurrent invocations for the same DVM", async () => {
    const { ours } = await run("concurrent");
    expectExactlyOnce(ours);
  });

  it("409 conflicts from a concurrent writer", async () => {
    const { report, ours } = await run("conflicts");
    expect(report.injected.conflictPatches).toBeGreaterThan(0);
    expect(ours.statusConflicts, "the guarded status write met conflicts and re-read").toBeGreaterThan(0);
    expectExactlyOnce(ours);
  });

  it("DynamoDB throttling and 500s", async () => {
    const { ours } = await run("throttle");
    expect(ours.dynamo!.throttled + ours.dynamo!.serverErrors).toBeGreaterThan(0);
    expectExactlyOnce(ours);
  });

  it("DynamoDB writes applied but their answers lost: the ledger recognises its own writes", async () => {
    const { ours } = await run("lost-replies");
    expect(ours.dynamo!.lostReplies, "answers were lost after the write").toBeGreaterThan(0);
    expectExactlyOnce(ours);
  });

  it("a crash after a phase's side effects and before its completion repeats at most that phase", async () => {
    // A 3 s lease (2 s function timeout): each takeover waits it out.
    const { ours, baseline } = await run("crash", { leaseMs: 3_000 });
    expect(ours.repeats.crashed, "crashes were injected").toBeGreaterThan(0);
    // Each crashed claim is taken over once its lease expired; a kill at the function timeout may add one.
    expect(ours.takeovers).toBeGreaterThanOrEqual(ours.repeats.crashed);
    expect(ours.takeovers).toBeLessThanOrEqual(ours.repeats.crashed + ours.timeouts);
    expect(ours.stuck).toEqual([]);
    expect(ours.repeats.repeats, "at most the interrupted phases ran again").toBeLessThanOrEqual(ours.repeats.crashed + ours.timeouts);
    expect(ours.repeats.waitRepeats).toBe(0);
    expect(ours.repeats.overlaps).toBe(0);
    expect(ours.lostTransitions).toEqual([]);
    expect(ours.regressions).toEqual([]);
    // Create-or-adopt: the repeated body found what the crashed one had created.
    expect(ours.createdTwice).toEqual([]);
    // The baseline's controller died after the same bodies and, restarted, ran them again.
    expect(baseline.repeats.crashed).toBeGreaterThan(0);
    expect(baseline.repeats.repeats).toBeGreaterThanOrEqual(baseline.repeats.crashed);
  });

  it("a crash on the second attempt too: the takeover's body is killed, the third attempt completes", async () => {
    // The default 6 s lease (5 s function timeout): each takeover waits it out, twice per crash phase.
    const { ours } = await run("crash-twice");
    // Each crash phase dies on attempts 1 and 2, once per DVM: 2 phases x 2 attempts x 2 DVMs.
    expect(ours.repeats.crashed, "both attempts of each crash phase were killed").toBeGreaterThanOrEqual(2 * 2 * 2);
    const crashedSecond = ours.repeats.details.filter((d) => /attempt 2 crashed/.test(d)).length;
    expect(crashedSecond, "second attempts died too").toBeGreaterThan(0);
    // The second attempt's takeover dies with its process before it can report; the third one's is
    // reported: one reported takeover per crash pair (a kill at the function timeout may add one).
    expect(ours.takeovers).toBeGreaterThanOrEqual(ours.repeats.crashed / 2);
    expect(ours.takeovers).toBeLessThanOrEqual(ours.repeats.crashed / 2 + ours.timeouts);
    expect(ours.stuck).toEqual([]);
    // A crash pair allows two repeats: one per interrupted execution, never more.
    expect(ours.repeats.repeats).toBeLessThanOrEqual(ours.repeats.crashed + ours.timeouts);
    expect(ours.repeats.waitRepeats).toBe(0);
    expect(ours.repeats.overlaps).toBe(0);
    expect(ours.lostTransitions).toEqual([]);
    expect(ours.regressions).toEqual([]);
    expect(ours.createdTwice).toEqual([]);
  });

  it("a body that outlives its lease in process is stopped at its deadline and never overlaps a second execution; a renewing body is never taken over", async () => {
    const { ours } = await run("slow-body");
    const overrun = ours.repeats.retries;
    // The overrun stopped by the runner's deadline ended as a retry (LeaseDeadlineError), once per DVM.
    expect(overrun, "each overrunning body was stopped at its deadline").toBeGreaterThanOrEqual(2);
    expect(ours.repeats.overlaps, "no two executions of one phase at once").toBe(0);
    // The heartbeat kept its lease for two lease durations: no takeover anywhere.
    expect(ours.takeovers).toBe(0);
    expectExactlyOnce(ours);
  });

  it("an API server that answers slowly (seconds per request)", async () => {
    const { report, ours } = await run("slow-apiserver");
    expect(report.injected.slowAnswers, "answers were held back").toBeGreaterThan(0);
    expectExactlyOnce(ours);
  });

  it("the relay leader killed, then the next one partitioned, mid-migration: a standby takes over each time", async () => {
    const { report, ours } = await run("relay-failover");
    const failovers = report.injected.relayFailovers;
    // Per target (ours and the baseline each have their 3 replicas): one kill, one partition.
    expect(failovers.filter((f) => f.kind === "killed").length).toBeGreaterThan(0);
    expect(failovers.filter((f) => f.kind === "partitioned").length).toBeGreaterThan(0);
    expect(
      failovers.every((f) => f.ms !== undefined),
      "a standby forwarded after every failover",
    ).toBe(true);
    expect(report.injected.relayOverlappingForwards, "never two leaders forwarding").toBe(0);
    expectExactlyOnce(ours);
  });

  it("a crash between the ledger completion and the status write: the repair keeps the per-PVC results", async () => {
    const { ours } = await run("crash-before-status");
    expect(ours.statusCrashes, "one crash per DVM after RunRsyncOperations completed").toBe(2);
    // Nothing ran twice: the ledger had the completion, the next invocation only repaired the status.
    expectExactlyOnce(ours);
  });

  it("quiesce: a crash after the scale-down and after the restore, duplicates and stale reads, then a failure: every application restored once, to what it had", async () => {
    // A 10 s lease (9 s function timeout): each of the two takeovers per DVM waits it out, and a body
    // stretched by a loaded 2-core machine is not killed at the function timeout again and again.
    const { ours, baseline } = await run("quiesce", { leaseMs: 10_000 });
    expect(ours.repeats.crashed, "crashes after the scale-down and after the restore").toBeGreaterThanOrEqual(2 * ours.migrations);
    expect(ours.delivery.duplicates).toBeGreaterThan(0);
    expect(ours.delivery.staleReads).toBeGreaterThan(0);
    expect(ours.stuck).toEqual([]);
    expect(ours.failed.length, "every migration failed where the failure was injected").toBe(ours.migrations);
    expect(ours.failed.every((f) => f.includes("RunRsyncOperations: failure injected"))).toBe(true);
    // At most the interrupted phases ran again; nothing overlapped, nothing moved backwards.
    expect(ours.repeats.repeats).toBeLessThanOrEqual(ours.repeats.crashed + ours.timeouts);
    expect(ours.repeats.waitRepeats).toBe(0);
    expect(ours.repeats.overlaps).toBe(0);
    expect(ours.lostTransitions).toEqual([]);
    expect(ours.regressions).toEqual([]);
    const q = ours.quiesce!;
    expect(q.workloads).toBe(4 * ours.migrations);
    expect(q.wrongRecords, "every count recorded (object, status) is the one before the first scale-down").toEqual([]);
    expect(q.wrongRestores, "every application back to what it had, restored once").toEqual([]);
    expect(q.quiesced).toBe(q.workloads);
    expect(q.restores, "each application's record removed exactly once").toBe(q.workloads);

    // The cached baseline runs MTC's quiesce: the same crashes made it re-run its scale-down...
    expect(baseline.stuck).toEqual([]);
    expect(baseline.repeats.crashed).toBeGreaterThan(0);
    expect(baseline.repeats.byPhase.QuiesceApplications ?? 0, "the restarted controller ran the scale-down again").toBeGreaterThan(0);
    // ...and it records no 0 either: the record is on the object, written once (QUIESCE_BASELINE_NOTE).
    const b = baseline.quiesce!;
    expect(b.wrongRecords).toEqual([]);
    expect(b.restores, "each application's record removed exactly once").toBe(b.workloads);
    // What MTC gets wrong regardless of the faults: the CronJob suspended before is left unsuspended.
    expect(b.wrongRestores).toEqual(baseline.uids.map((_, i) => expect.stringMatching(new RegExp(`^CronJob .*-s${i}/paused-report: left unsuspended`))));
  });
});
