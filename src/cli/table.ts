/** Plain-text tables as kubectl prints them: upper-case headers, columns padded, no borders. */
export type Align = "left" | "right";

export function renderTable(headers: readonly string[], rows: readonly (readonly string[])[], align: readonly Align[] = []): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((cell, i) => (align[i] === "right" ? cell.padStart(widths[i]!) : i === cells.length - 1 ? cell : cell.padEnd(widths[i]!)))
      .join("  ")
      .trimEnd();
  return [line(headers), ...rows.map(line)].join("\n");
}

export function formatSeconds(seconds: number | undefined): string {
  return seconds === undefined ? "" : `${seconds.toFixed(3)} s`;
}

/** ISO time without milliseconds, for tables. */
export function formatTime(ms: number | undefined): string {
  return ms === undefined ? "" : new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");
}
