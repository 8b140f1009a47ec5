/** Plain-text and Markdown renderings of chaos reports. */
import { QUIESCE_BASELINE_NOTE, type QuiesceTally } from "./quiesceWorkloads";
import type { ScenarioReport, TargetReport } from "./scenarios";
import type { TargetKind } from "./targets";

const ms = (n: number) => (n >= 100 ? n.toFixed(0) : n.toFixed(1));

/** One line per target, for test logs. */
export function describeReport(report: ScenarioReport): string[] {
  const lines = report.reports.map((r) => {
    const faults = injectedSummary(r);
    return (
      `${report.scenario.name.padEnd(18)} ${r.target.padEnd(9)} completed ${r.completed}/${r.migrations}` +
      ` executions ${r.repeats.executions} repeats ${r.repeats.repeats} (waits ${r.repeats.waitRepeats}, overlaps ${r.repeats.overlaps}, crashed ${r.repeats.crashed})` +
      ` stale reads ${r.staleReads} wasted ${(r.repeats.wastedMs / 1000).toFixed(2)} s lost ${r.lostTransitions.length} regressions ${r.regressions.length} created ${r.created} twice ${r.createdTwice.length}` +
      ` invocations/phase ${r.invocationsPerPhase.toFixed(2)} overhead p50 ${ms(r.overheadMs.p50)} p99 ${ms(r.overheadMs.p99)} ms` +
      ` done in ${ms(r.timeToCompleteMs.max / 1000)} s${faults ? ` | ${faults}` : ""}`
    );
  });
  for (const r of report.reports) {
    if (!r.quiesce) continue;
    lines.push(`${report.scenario.name.padEnd(18)} ${r.target.padEnd(9)} ${quiesceSummary(r.quiesce)}`);
    if (r.target !== "ours") lines.push(`    ${r.target}: note: ${QUIESCE_BASELINE_NOTE}`);
  }
  for (const r of report.reports)
    for (const detail of [
      ...(r.quiesce?.wrongRecords ?? []),
      ...(r.quiesce?.wrongRestores ?? []),
      ...r.repeats.details,
      ...r.lostTransitions,
      ...r.regressions,
      ...r.stuck,
      ...r.createdTwice,
      ...r.failed,
      ...r.withoutResults,
    ].slice(0, 8))
      lines.push(`    ${r.target}: ${detail}`);
  return lines;
}

/** What became of the quiesced applications, in one line. */
export function quiesceSummary(q: QuiesceTally): string {
  return (
    `applications ${q.workloads}: quiesced ${q.quiesced}, restores ${q.restores}, wrong records ${q.wrongRecords.length}, wrong restores ${q.wrongRestores.length}` +
    (q.refusedWrites !== undefined ? `, quiesce writes refused (409, stale copy) ${q.refusedWrites}` : "")
  );
}

/** The faults that actually happened to this target's run. */
export function injectedSummary(r: TargetReport): string {
  const parts: string[] = [];
  const d = r.delivery;
  if (d.duplicates) parts.push(`${d.duplicates} duplicate deliveries (${d.reordered} reordered)`);
  if (d.staleReplays) parts.push(`${d.staleReplays} stale replays (${d.staleReads} stale reads)`);
  if (r.repeats.crashed) parts.push(`${r.repeats.crashed} crashes`);
  if (r.statusCrashes) parts.push(`${r.statusCrashes} crashes between completion and status write`);
  if (r.timeouts) parts.push(`${r.timeouts} function timeouts`);
  if (r.takeovers) parts.push(`${r.takeovers} takeovers`);
  if (r.statusConflicts) parts.push(`${r.statusConflicts} status 409s`);
  if (r.dynamo && (r.dynamo.throttled || r.dynamo.serverErrors))
    parts.push(
      `${r.dynamo.throttled} throttled + ${r.dynamo.serverErrors} 500s of ${r.dynamo.throttled + r.dynamo.serverErrors + Object.values(r.dynamo.sent).reduce((a, b) => a + b, 0)} DynamoDB calls`,
    );
  if (r.dynamo?.lostReplies) parts.push(`${r.dynamo.lostReplies} DynamoDB answers lost after the write`);
  if (r.dynamo?.burstThrottled) parts.push(`${r.dynamo.burstThrottled} DynamoDB calls refused in throttling bursts`);
  const i = r.injected;
  if (i.conflictPatches) parts.push(`${i.conflictPatches} concurrent patches`);
  if (i.relayRestarts) parts.push(`${i.relayRestarts} relay restart(s), ${i.relayRelists} re-list(s) after 410`);
  if (i.apiserverRestarts) parts.push(`${i.apiserverRestarts} API server restart(s)`);
  if (i.specEditsRefused || i.specEditsForced.length)
    parts.push(
      `${i.specEditsRefused} spec edits refused (422), ${i.specEditsAcceptedWithRule} accepted, ${i.specEditsForced.length} pushed through (${r.failed.length} failed)`,
    );
  if (i.relayFailovers.length)
    parts.push(
      `relay failovers ${i.relayFailovers.map((f) => `${f.kind} ${f.ms === undefined ? "never" : `${(f.ms / 1000).toFixed(1)} s`}`).join(", ")}, ${i.relayOverlappingForwards} overlapping forwards`,
    );
  if (i.slowAnswers) parts.push(`${i.slowAnswers} API answers held back`);
  if (i.apiThrottled) parts.push(`${i.apiThrottled} API requests answered 429 (Retry-After)`);
  if (i.invokeThrottled) parts.push(`${i.invokeThrottled} Lambda Invokes refused (TooManyRequestsException)`);
  return parts.join(", ");
}

/** How each target is named in tables. */
export const TARGET_LABELS: Record<TargetKind, string> = {
  ours: "ours",
  baseline: "baseline (informer cache)",
  "fresh-get": "baseline (fresh GET)",
};

/**
 * The comparison table: one row per scenario and target, in the reports' order, so any scenario list
 * and any set of targets fit.
 */
export function comparisonTable(reports: readonly ScenarioReport[]): string[] {
  const header = [
    "scenario",
    "target",
    "repeats (of bodies run)",
    "stale reads",
    "objects created twice",
    "wasted s",
    "time to complete (max) s",
    "invocations per transition",
    "overhead p50 / p99 (ms)",
    "checks",
    "faults that happened",
  ];
  const rows = reports.flatMap((report) =>
    report.reports.map((r) => [
      report.scenario.name,
      TARGET_LABELS[r.target],
      `${r.repeats.repeats}${r.repeats.waitRepeats ? ` (+${r.repeats.waitRepeats} wait polls)` : ""} of ${r.repeats.executions}` +
        (r.repeats.crashed || r.timeouts ? ` (${r.repeats.crashed} crashes${r.timeouts ? `, ${r.timeouts} timeouts` : ""})` : ""),
      String(r.staleReads),
      String(r.createdTwice.length),
      (r.repeats.wastedMs / 1000).toFixed(2),
      r.completed === r.migrations ? (r.timeToCompleteMs.max / 1000).toFixed(1) : `${r.completed}/${r.migrations} done`,
      r.invocationsPerPhase.toFixed(2),
      `${ms(r.overheadMs.p50)} / ${ms(r.overheadMs.p99)}`,
      [
        `${r.completed}/${r.migrations} completed`,
        `${r.lostTransitions.length} lost`,
        `${r.regressions.length} regressions`,
        ...(r.withoutResults.length ? [`${r.withoutResults.length} without per-PVC results`] : []),
        ...(r.quiesce
          ? [`${r.quiesce.wrongRecords.length} wrong quiesce records, ${r.quiesce.wrongRestores.length} wrong restores of ${r.quiesce.workloads} applications`]
          : []),
      ].join(", "),
      injectedSummary(r) || "-",
    ]),
  );
  return [`| ${header.join(" | ")} |`, `|${header.map(() => "---").join("|")}|`, ...rows.map((r) => `| ${r.join(" | ")} |`)];
}
