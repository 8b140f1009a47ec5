/** Plain-text and Markdown renderings of chaos reports. */
import type { ScenarioReport, TargetReport } from "./scenarios";

const ms = (n: number) => (n >= 100 ? n.toFixed(0) : n.toFixed(1));

/** One line per target, for test logs. */
export function describeReport(report: ScenarioReport): string[] {
  const lines = report.reports.map((r) => {
    const faults = injectedSummary(r);
    return (
      `${report.scenario.name.padEnd(18)} ${r.target.padEnd(8)} completed ${r.completed}/${r.migrations}` +
      ` executions ${r.repeats.executions} repeats ${r.repeats.repeats} (waits ${r.repeats.waitRepeats}, overlaps ${r.repeats.overlaps}, crashed ${r.repeats.crashed})` +
      ` lost ${r.lostTransitions.length} regressions ${r.regressions.length} created ${r.created} twice ${r.createdTwice.length}` +
      ` invocations/phase ${r.invocationsPerPhase.toFixed(2)} overhead p50 ${ms(r.overheadMs.p50)} p99 ${ms(r.overheadMs.p99)} ms` +
      ` done in ${ms(r.timeToCompleteMs.max / 1000)} s${faults ? ` | ${faults}` : ""}`
    );
  });
  for (const r of report.reports)
    for (const detail of [...r.repeats.details, ...r.lostTransitions, ...r.regressions, ...r.stuck, ...r.createdTwice, ...r.failed, ...r.withoutResults].slice(
      0,
      8,
    ))
      lines.push(`    ${r.target}: ${detail}`);
  return lines;
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
  return parts.join(", ");
}

function byTarget(report: ScenarioReport, target: "ours" | "baseline"): TargetReport | undefined {
  return report.reports.find((r) => r.target === target);
}

/** The comparison table: one row per scenario. */
export function comparisonTable(reports: readonly ScenarioReport[]): string[] {
  const header = [
    "scenario",
    "baseline repeats",
    "our repeats",
    "our overhead p50 / p99 (ms)",
    "baseline overhead p50 / p99 (ms)",
    "invocations per phase (ours / baseline)",
    "our checks",
    "faults injected (ours)",
  ];
  const rows = reports.map((report) => {
    const ours = byTarget(report, "ours");
    const base = byTarget(report, "baseline");
    const repeats = (r: TargetReport | undefined) =>
      r ? `${r.repeats.repeats}${r.repeats.waitRepeats ? ` (+${r.repeats.waitRepeats} wait polls)` : ""} of ${r.repeats.executions}` : "-";
    const checks = ours
      ? [
          `${ours.completed}/${ours.migrations} completed`,
          `${ours.lostTransitions.length} lost`,
          `${ours.regressions.length} regressions`,
          `${ours.createdTwice.length} created twice`,
          ...(ours.withoutResults.length ? [`${ours.withoutResults.length} without per-PVC results`] : []),
        ].join(", ")
      : "-";
    return [
      report.scenario.name,
      repeats(base),
      repeats(ours) +
        (ours?.repeats.crashed || ours?.timeouts ? ` (${ours.repeats.crashed} crashes${ours.timeouts ? `, ${ours.timeouts} timeouts` : ""})` : ""),
      ours ? `${ms(ours.overheadMs.p50)} / ${ms(ours.overheadMs.p99)}` : "-",
      base ? `${ms(base.overheadMs.p50)} / ${ms(base.overheadMs.p99)}` : "-",
      `${ours ? ours.invocationsPerPhase.toFixed(2) : "-"} / ${base ? base.invocationsPerPhase.toFixed(2) : "-"}`,
      checks,
      ours ? injectedSummary(ours) || "-" : "-",
    ];
  });
  return [`| ${header.join(" | ")} |`, `|${header.map(() => "---").join("|")}|`, ...rows.map((r) => `| ${r.join(" | ")} |`)];
}
