/** The timing report as a table, for people; `--json` prints the TimingReport itself. */
import { formatBytes, type TimingReport } from "../report";
import { formatSeconds, renderTable } from "./table";

export function renderTimingReport(report: TimingReport, heading: string): string {
  const generations = new Set(report.rows.map((r) => r.generation));
  const withGeneration = generations.size > 1;
  const headers = ["STEP", ...(withGeneration ? ["GEN"] : []), "PHASE", "ELAPSED", "SHARE", "BYTES", "ATTEMPTS", "FLAGS"];
  const rows = report.rows.map((r) => [
    r.step !== undefined ? `${r.step}/${r.totalSteps}` : "-",
    ...(withGeneration ? [String(r.generation)] : []),
    r.phase,
    formatSeconds(r.elapsedSeconds),
    r.percent !== undefined ? `${r.percent.toFixed(1)}%` : "",
    r.bytesTransferred !== undefined ? formatBytes(r.bytesTransferred) : "",
    r.ran ? String(r.attempts) : "",
    r.flags.join(", "),
  ]);
  const align = ["left", ...(withGeneration ? ["right" as const] : []), "left", "right", "right", "right", "right", "left"] as const;
  const between = Math.max(0, report.wallSeconds - report.totalSeconds);
  const repeated = report.repeated;
  const lines = [
    heading,
    `Itinerary ${report.itinerary}${report.running ? " (still running)" : ""}`,
    "",
    renderTable(headers, rows, [...align]),
    "",
    `Phases: ${formatSeconds(report.totalSeconds)}   wall clock: ${formatSeconds(report.wallSeconds)} (${formatSeconds(between)} between phases)`,
    ...(report.bytesTransferred > 0 ? [`Bytes moved: ${formatBytes(report.bytesTransferred)} (rsync's own count)`] : []),
    `Executions: ${report.executions}   repeated executions: ${repeated.count} costing ${formatSeconds(repeated.seconds)}` +
      (repeated.unplaced > 0 ? ` (+${repeated.unplaced} without a timing record)` : ""),
  ];
  const failures = report.rows.filter((r) => r.lastError);
  if (failures.length > 0) {
    lines.push("", "Last errors of retried phases:");
    for (const r of failures) lines.push(`  ${r.phase}: ${r.lastError}`);
  }
  return `${lines.join("\n")}\n`;
}
