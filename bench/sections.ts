/**
 * The sections of BENCHMARKS.md, in the order bench/run.ts writes them. Every section's heading is
 * written on every run (a section that did not run says so), so the file's structure is this list and
 * test/unit/bench/benchmarksStructure.test.ts can hold the committed file to it without running a bench.
 */
export const SECTIONS = [
  { name: "seed", heading: "## The seed's table: one migration, phase by phase" },
  { name: "chaos", heading: "## Chaos: does a phase run twice?" },
  { name: "overhead", heading: "## Overhead: our transition against the floor" },
  { name: "scale", heading: "## Scale: ours and the baseline side by side" },
  { name: "relay", heading: "## Relay: latency, coalescing, failover and memory" },
  { name: "cost", heading: "## Cost per 1,000 migrations" },
  { name: "ledger", heading: "## Ledger" },
  { name: "datapath", heading: "## Data path" },
  { name: "nodes", heading: "## Data phase on real pods" },
  { name: "bundle", heading: "## Function bundles" },
] as const;

export type SectionName = (typeof SECTIONS)[number]["name"];

export const SECTION_NAMES: readonly SectionName[] = SECTIONS.map((s) => s.name);

export const TITLE = "# Benchmarks";

export function headingOf(name: SectionName): string {
  return SECTIONS.find((s) => s.name === name)!.heading;
}

/** The headings (lines starting with "# " or "## ", outside code blocks) of a Markdown text, in order. */
export function headingsIn(markdown: string): string[] {
  const out: string[] = [];
  let fenced = false;
  for (const line of markdown.split("\n")) {
    if (line.startsWith("```")) fenced = !fenced;
    else if (!fenced && /^##? /.test(line)) out.push(line);
  }
  return out;
}
