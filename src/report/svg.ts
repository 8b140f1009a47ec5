/**
 * A timeline picture of a timing report: one row per phase that ran, one bar per execution on a shared
 * time axis, repeated executions in a different colour. Plain SVG text with no dependencies.
 */
import type { PhaseExecution } from "./executions";
import type { TimingReport, TimingRow } from "./timing";

export const TIMELINE_COLOURS = {
  execution: "#4e79a7",
  repeated: "#e15759",
  running: "#f28e2b",
} as const;

const LABEL_WIDTH = 380;
const CHART_WIDTH = 720;
const ROW_HEIGHT = 22;
const BAR_HEIGHT = 14;
const TOP = 54;
const AXIS_HEIGHT = 34;
const LEGEND_HEIGHT = 28;
/** A bar is never thinner than this, so an execution of a few milliseconds is still visible. */
const MIN_BAR_WIDTH = 1.5;

export function escapeXml(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;").replace(/'/g, "&apos;");
}

const fixed = (n: number) => Number(n.toFixed(2)).toString();

/**
 * A tick step of 1, 2 or 5 times a power of ten giving at most ~8 ticks.
 * @internal exported for its tests
 */
export function tickStep(seconds: number): number {
  if (!(seconds > 0)) return 1;
  const rough = seconds / 8;
  const power = 10 ** Math.floor(Math.log10(rough));
  for (const m of [1, 2, 5, 10]) if (m * power >= rough) return m * power;
  return 10 * power;
}

function formatTick(seconds: number, step: number): string {
  const decimals = step >= 1 ? 0 : Math.min(3, Math.ceil(-Math.log10(step)));
  return `${seconds.toFixed(decimals)} s`;
}

function rowLabel(row: TimingRow): string {
  const step = row.step !== undefined ? `${row.step}/${row.totalSteps} ` : "";
  const generation = row.generation > 1 ? ` (gen ${row.generation})` : "";
  return `${step}${row.phase}${generation}`;
}

function barTitle(row: TimingRow, execution: PhaseExecution): string {
  const parts = [`${row.phase}${execution.attempt !== undefined ? ` attempt ${execution.attempt}` : ""}`, `${execution.seconds.toFixed(3)} s`, execution.ended];
  if (execution.repeated) parts.push("repeated");
  if (execution.takeover) parts.push("takeover");
  return parts.join(", ");
}

function colourOf(execution: PhaseExecution): string {
  if (execution.repeated) return TIMELINE_COLOURS.repeated;
  if (execution.ended === "running") return TIMELINE_COLOURS.running;
  return TIMELINE_COLOURS.execution;
}

export interface TimelineOptions {
  title?: string;
}

/** Bars carry class "execution" (plus "repeated" for repeated ones), so they can be counted. */
export function renderTimelineSvg(report: TimingReport, options: TimelineOptions = {}): string {
  const rows = report.rows.filter((r) => r.ran);
  const origin = report.startedAt ?? 0;
  const spanSeconds = Math.max(report.wallSeconds, 0.001);
  const x = (ms: number) => LABEL_WIDTH + ((ms - origin) / 1000 / spanSeconds) * CHART_WIDTH;
  const width = LABEL_WIDTH + CHART_WIDTH + 40;
  const chartBottom = TOP + rows.length * ROW_HEIGHT;
  const height = chartBottom + AXIS_HEIGHT + LEGEND_HEIGHT;
  const title = options.title ?? `Phase timeline${report.uid ? ` of ${report.uid}` : ""}`;
  const out: string[] = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="12">`,
    `<title>${escapeXml(title)}</title>`,
    `<rect x="0" y="0" width="${width}" height="${height}" fill="#ffffff"/>`,
    `<text x="10" y="20" font-size="14" font-weight="bold">${escapeXml(title)}</text>`,
    `<text x="10" y="38" fill="#555555">${escapeXml(
      `${report.itinerary}: ${report.totalSeconds.toFixed(3)} s in phases, ${report.wallSeconds.toFixed(3)} s wall clock, ` +
        `${report.executions} executions, ${report.repeated.count} repeated (${report.repeated.seconds.toFixed(3)} s)`,
    )}</text>`,
  );

  // Time axis with grid lines.
  const step = tickStep(spanSeconds);
  const ticks = Array.from({ length: Math.floor(spanSeconds / step + 1e-9) + 1 }, (_, k) => k * step);
  out.push(`<g class="axis" stroke="#dddddd">`);
  for (const t of ticks) {
    const tx = fixed(LABEL_WIDTH + (t / spanSeconds) * CHART_WIDTH);
    out.push(`<line x1="${tx}" y1="${TOP - 4}" x2="${tx}" y2="${chartBottom}"/>`);
  }
  out.push(`</g>`, `<g class="ticks" fill="#333333" text-anchor="middle">`);
  for (const t of ticks) {
    const tx = fixed(LABEL_WIDTH + (t / spanSeconds) * CHART_WIDTH);
    out.push(`<text x="${tx}" y="${chartBottom + 16}">${escapeXml(formatTick(t, step))}</text>`);
  }
  out.push(`</g>`);
  out.push(`<line x1="${LABEL_WIDTH}" y1="${chartBottom}" x2="${LABEL_WIDTH + CHART_WIDTH}" y2="${chartBottom}" stroke="#333333"/>`);

  // One row per phase that ran, one bar per execution.
  rows.forEach((row, i) => {
    const y = TOP + i * ROW_HEIGHT;
    out.push(`<g class="phase" data-phase="${escapeXml(row.phase)}" data-generation="${row.generation}">`);
    out.push(`<text x="${LABEL_WIDTH - 8}" y="${y + BAR_HEIGHT - 2}" text-anchor="end">${escapeXml(rowLabel(row))}</text>`);
    for (const execution of row.executions) {
      const bx = x(execution.start);
      const bw = Math.max(MIN_BAR_WIDTH, x(execution.end) - bx);
      const cls = execution.repeated ? "execution repeated" : "execution";
      out.push(
        `<rect class="${cls}" x="${fixed(bx)}" y="${y}" width="${fixed(bw)}" height="${BAR_HEIGHT}" fill="${colourOf(execution)}">` +
          `<title>${escapeXml(barTitle(row, execution))}</title></rect>`,
      );
    }
    out.push(`</g>`);
  });

  // Legend.
  const ly = chartBottom + AXIS_HEIGHT;
  const legend: [string, string][] = [
    ["execution", TIMELINE_COLOURS.execution],
    ["repeated execution", TIMELINE_COLOURS.repeated],
    ["still running", TIMELINE_COLOURS.running],
  ];
  out.push(`<g class="legend">`);
  legend.forEach(([label, colour], i) => {
    const lx = LABEL_WIDTH + i * 180;
    out.push(`<rect x="${lx}" y="${ly}" width="12" height="12" fill="${colour}"/>`);
    out.push(`<text x="${lx + 18}" y="${ly + 11}">${escapeXml(label)}</text>`);
  });
  out.push(`</g>`, `</svg>`);
  return `${out.join("\n")}\n`;
}
