/**
 * Faults that need a host control plane of the suite's own (the shared ones cannot be restarted from a
 * test worker): an API server restart, a relay restart followed by a watch that resumes into 410 Gone,
 * and every fault at once. The destination stays the shared one.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { missing } from "../support/requirements";
import { type ChaosSuite, chaosSuite, HAVE_CONTROL_PLANE_BINARIES } from "./environment";
import { describeReport, runScenario, scenarioNamed, type TargetReport } from "./harness";

let suite: ChaosSuite;

beforeAll(async () => {
  if (HAVE_CONTROL_PLANE_BINARIES) suite = await chaosSuite({ ownHost: true });
});

afterAll(async () => {
  await suite?.stop();
});

async function run(name: string, options: { targets?: Array<"ours" | "baseline">; dvms?: number; pvcs?: number } = {}) {
  const report = await runScenario({
    env: suite.env,
    observatory: suite.observatory,
    scenario: scenarioNamed(name),
    targets: options.targets ?? ["ours", "baseline"],
    dvms: options.dvms ?? 2,
    pvcs: options.pvcs ?? 2,
    timeoutMs: 150_000,
  });
  for (const line of describeReport(report)) console.log(line);
  return { report, ours: report.reports.find((r) => r.target === "ours")!, baseline: report.reports.find((r) => r.target === "baseline")! };
}

function expectInvariants(ours: TargetReport, allowedRepeats = 0): void {
  expect(ours.stuck, "every migration completes").toEqual([]);
  expect(ours.repeats.repeats).toBeLessThanOrEqual(allowedRepeats);
  if (allowedRepeats === 0) expect(ours.repeats.details).toEqual([]);
  expect(ours.repeats.waitRepeats).toBe(0);
  expect(ours.repeats.overlaps).toBe(0);
  expect(ours.lostTransitions).toEqual([]);
  expect(ours.regressions).toEqual([]);
  expect(ours.createdTwice).toEqual([]);
}

describe.skipIf(missing("the control-plane binaries (etcd, kube-apiserver, kwok)", HAVE_CONTROL_PLANE_BINARIES, "bash infra/dev/controlplane/build.sh"))(
  "chaos: restarts",
  () => {
    it("the host API server restarts mid-migration", async () => {
      const { report, ours } = await run("apiserver-restart");
      expect(report.injected.apiserverRestarts).toBe(1);
      expectInvariants(ours);
    });

    it("the relay restarts mid-migration, and its watch resumes into 410 Gone", async () => {
      const { report, ours } = await run("relay-restart-410");
      expect(report.injected.relayRestarts).toBe(1);
      expect(report.injected.relayGaps).toBe(1);
      expect(report.injected.relayRelists, "the relays listed again after 410 Gone").toBeGreaterThan(0);
      expectInvariants(ours);
    });

    // Ours only: under every fault at once the baseline livelocks on 409s until the bound (see BENCHMARKS.md).
    it("every fault at once: repeats only where a crash interrupted a phase", async () => {
      const { report, ours } = await run("all", { targets: ["ours"], dvms: 2, pvcs: 1 });
      expect(ours.repeats.crashed).toBeGreaterThan(0);
      expect(ours.delivery.staleReads + ours.delivery.duplicates).toBeGreaterThan(0);
      expect(report.injected.apiserverRestarts).toBeGreaterThan(0);
      expect(report.injected.relayRestarts).toBe(1);
      expect(ours.dynamo!.throttled + ours.dynamo!.serverErrors).toBeGreaterThan(0);
      expect(ours.dynamo!.lostReplies).toBeGreaterThan(0);
      expect(report.injected.conflictPatches).toBeGreaterThan(0);
      expectInvariants(ours, ours.repeats.crashed + ours.timeouts);
    });
  },
);
