/** Text and machine-readable renderings of DVM summaries, shared by get, list and watch. */

import { Option } from "commander";
import { stringify as toYaml } from "yaml";
import type { DvmSummary } from "./summary";
import { volumesSummary } from "./summary";
import { renderTable } from "./table";

export type OutputFormat = "text" | "json" | "yaml";

export function outputOption(): Option {
  return new Option("-o, --output <format>", "output format").choices(["text", "json", "yaml"]).default("text");
}

export function serialize(value: unknown, format: Exclude<OutputFormat, "text">): string {
  return format === "json" ? `${JSON.stringify(value, null, 2)}\n` : toYaml(value);
}

const indent = (text: string, by = "  ") =>
  text
    .split("\n")
    .map((l) => by + l)
    .join("\n");

export function renderSummary(s: DvmSummary): string {
  const field = (label: string, value: string | undefined) => (value ? `${`${label}:`.padEnd(13)}${value}` : undefined);
  const lines = [
    field("Name", s.name),
    field("Namespace", s.namespace),
    field("UID", s.uid),
    field("Itinerary", s.itinerary ?? "(not started)"),
    field("Phase", s.phase ? `${s.phase}${s.stepLabel ? `  (${s.stepLabel})` : ""}` : "(not started)"),
    field("Description", s.description),
    field("Result", s.result),
    field("Age", s.age ? `${s.age}${s.createdAt ? `  (created ${s.createdAt})` : ""}` : undefined),
    field("Started", s.startedAt),
  ].filter((l): l is string => l !== undefined);
  if (s.conditions.length > 0) {
    lines.push("Conditions:");
    lines.push(
      indent(
        renderTable(
          ["TYPE", "CATEGORY", "REASON", "MESSAGE"],
          s.conditions.map((c) => [c.type, c.category, c.reason ?? "", c.message ?? ""]),
        ),
      ),
    );
  }
  if (s.volumes.length > 0) {
    lines.push(`Volumes:     ${volumesSummary(s.volumes)}`);
    lines.push(
      indent(
        renderTable(
          ["PVC", "TARGET", "ATTEMPT", "STATE", "PROGRESS", "RATE"],
          s.volumes.map((v) => [v.pvc, v.target, v.attempt === undefined ? "" : String(v.attempt), v.state, v.progress ?? "", v.rate ?? ""]),
        ),
      ),
    );
  }
  if (s.errors.length > 0) {
    lines.push("Errors:");
    for (const error of s.errors) lines.push(`  - ${error}`);
  }
  return `${lines.join("\n")}\n`;
}

export function renderSummaryTable(summaries: readonly DvmSummary[], withNamespace: boolean): string {
  const headers = [...(withNamespace ? ["NAMESPACE"] : []), "NAME", "PHASE", "STEP", "ITINERARY", "RESULT", "VOLUMES", "CONDITIONS", "AGE"];
  const rows = summaries.map((s) => [
    ...(withNamespace ? [s.namespace] : []),
    s.name,
    s.phase ?? "",
    s.step !== undefined ? `${s.step}/${s.totalSteps}` : "",
    s.itinerary ?? "",
    s.result,
    volumesSummary(s.volumes),
    s.conditionsSummary,
    s.age,
  ]);
  return `${renderTable(headers, rows)}\n`;
}
