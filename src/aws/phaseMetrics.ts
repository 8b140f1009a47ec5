/**
 * CloudWatch metrics of the phase function (namespace DvmServerless, one Phase dimension), written in
 * the embedded metric format by Powertools Metrics and flushed once per invocation by its middleware.
 * Counters are also written as 0 so sums and rates per phase are right without gaps.
 */

import { MetricUnit } from "@aws-lambda-powertools/metrics";
import type { RunResult, RunStats } from "../contracts/request";

export const METRICS_NAMESPACE = "DvmServerless";

/** The part of Powertools Metrics used here (a Metrics instance is one); tests pass a recorder. */
export interface MetricsWriter {
  addDimension(name: string, value: string): unknown;
  addMetric(name: string, unit: (typeof MetricUnit)[keyof typeof MetricUnit], value: number): unknown;
}

/** Phase dimension value when the invocation never reached a phase (invalid request, DVM gone). */
export const NO_PHASE = "None";

export function recordRun(metrics: MetricsWriter, result: RunResult, stats: RunStats): void {
  metrics.addDimension("Phase", "phase" in result ? result.phase : NO_PHASE);
  metrics.addMetric("PhaseDuration", MetricUnit.Milliseconds, stats.durationMs);
  metrics.addMetric("DuplicatesSuppressed", MetricUnit.Count, result.kind === "duplicate" ? 1 : 0);
  metrics.addMetric("StatusConflicts", MetricUnit.Count, stats.statusConflicts);
  metrics.addMetric("LeaseTakeovers", MetricUnit.Count, stats.takeover ? 1 : 0);
  metrics.addMetric("Retries", MetricUnit.Count, result.kind === "retry" ? 1 : 0);
}

/** A request that can never run (invalid input, or refused by the ledger). */
export function recordRejected(metrics: MetricsWriter): void {
  metrics.addDimension("Phase", NO_PHASE);
  metrics.addMetric("RejectedRequests", MetricUnit.Count, 1);
}

/** An error thrown back to Lambda, which retries the event and finally sends it to the dead-letter queue. */
export function recordThrown(metrics: MetricsWriter): void {
  metrics.addDimension("Phase", NO_PHASE);
  metrics.addMetric("InvocationErrors", MetricUnit.Count, 1);
}
