/**
 * Throttling in bursts longer than any client's own quick retries (issue 24, item 5): DynamoDB
 * refusing every request for seconds, the API server answering 429 with Retry-After, Lambda refusing
 * Invokes with TooManyRequestsException. Our runner must complete every migration with no phase body
 * run twice: claims are given back, and the writes that end an attempt are carried through the burst.
 * The baselines' figures under the same faults come from bench/chaos.ts. Invariants only, no timings.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ChaosSuite, chaosSuite } from "./environment";
import { describeReport, runScenario, scenarioNamed, type TargetReport } from "./harness";

let suite: ChaosSuite;

beforeAll(async () => {
  suite = await chaosSuite();
});

afterAll(async () => {
  await suite?.stop();
});

async function ours(name: string): Promise<TargetReport> {
  const report = await runScenario({
    env: suite.env,
    observatory: suite.observatory,
    scenario: scenarioNamed(name),
    targets: ["ours"],
    dvms: 2,
    pvcs: 2,
    // A bound for "stuck", not a speed claim (a loaded 2-core machine stretches every body).
    timeoutMs: 180_000,
  });
  for (const line of describeReport(report)) console.log(line);
  return report.reports[0]!;
}

function expectExactlyOnce(r: TargetReport): void {
  expect(r.stuck, "every migration completes").toEqual([]);
  expect(r.repeats.details, "no phase body runs twice").toEqual([]);
  expect(r.repeats.repeats).toBe(0);
  expect(r.repeats.waitRepeats).toBe(0);
  expect(r.repeats.overlaps).toBe(0);
  expect(r.takeovers, "no claim was left to expire").toBe(0);
  expect(r.lostTransitions).toEqual([]);
  expect(r.regressions).toEqual([]);
  expect(r.createdTwice).toEqual([]);
  expect(r.withoutResults).toEqual([]);
}

describe("chaos: throttling bursts", () => {
  it("DynamoDB refusing every request for 1.5 s at a time (ProvisionedThroughputExceeded, Throttling)", async () => {
    const r = await ours("throttle-bursts");
    expect(r.dynamo!.burstThrottled, "requests were refused in bursts").toBeGreaterThan(0);
    expectExactlyOnce(r);
  });

  it("the API server answering 429 with Retry-After to everything but watches for 2 s at a time", async () => {
    const r = await ours("api-429");
    expect(r.injected.apiThrottled, "requests were answered 429").toBeGreaterThan(0);
    expectExactlyOnce(r);
  });

  it("Lambda refusing the relay's Invokes with TooManyRequestsException for 2 s at a time", async () => {
    const r = await ours("invoke-throttle");
    expect(r.injected.invokeThrottled, "Invokes were refused").toBeGreaterThan(0);
    expectExactlyOnce(r);
  });
});
