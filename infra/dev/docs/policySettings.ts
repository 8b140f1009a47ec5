/**
 * The migration policy's settings table (POLICY_SETTINGS, src/dvm/policyConfig.ts, with each setting's
 * default, values and meaning as POLICY_DOCS, policyDocs.ts, states them) rendered into what is not code: the docs table in
 * docs/operations.md, and serverless.yml's params and the phase functions' environment, each between its
 * two marker lines. Run it after changing the table:
 *
 *   npx tsx infra/dev/docs/policySettings.ts
 *
 * test/unit/dvm/policySettings.test.ts fails when the committed text differs from the rendering.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { POLICY_SETTINGS } from "../../../src/dvm/policyConfig";
import { POLICY_DOCS } from "./policyDocs";

const ROOT = join(import.meta.dirname, "..", "..", "..");
const SOURCE = "generated from POLICY_SETTINGS, src/dvm/policyConfig.ts: npx tsx infra/dev/docs/policySettings.ts";
type PolicyParam = keyof typeof POLICY_SETTINGS;
const rows = Object.entries(POLICY_SETTINGS) as [PolicyParam, (typeof POLICY_SETTINGS)[PolicyParam]][];

/** A generated part of a file: the lines between `begin` and `end`. */
export interface RenderedBlock {
  file: string;
  begin: string;
  end: string;
  render(): string[];
}

export const BLOCKS: RenderedBlock[] = [
  {
    file: "docs/operations.md",
    begin: `<!-- policy settings: begin (${SOURCE}) -->`,
    end: "<!-- policy settings: end -->",
    render: () => [
      "| serverless.yml param | Environment | Default | Values | Meaning |",
      "|---|---|---|---|---|",
      ...rows.map(
        ([param, row]) => `| \`${param}\` | \`${row.env}\` | ${POLICY_DOCS[param].default} | ${POLICY_DOCS[param].values} | ${POLICY_DOCS[param].meaning} |`,
      ),
    ],
  },
  {
    file: "serverless.yml",
    begin: `    # The migration policy's params: begin (${SOURCE})`,
    end: "    # The migration policy's params: end",
    // Blank is the built-in default, except where blank means "none" (paramDefault).
    render: () => rows.map(([param, row]) => `    ${param}: ${JSON.stringify(("paramDefault" in row && row.paramDefault) || "")}`),
  },
  {
    file: "serverless.yml",
    begin: `      # The migration policy (docs/security.md): begin (${SOURCE})`,
    end: "      # The migration policy: end",
    render: () => rows.map(([param, row]) => `      ${row.env}: \${param:${param}}`),
  },
];

/** `text` with `block`'s lines rendered anew; throws when a marker is missing. */
export function withRendered(text: string, block: RenderedBlock): string {
  const lines = text.split("\n");
  const begin = lines.indexOf(block.begin);
  const end = lines.indexOf(block.end, begin + 1);
  if (begin < 0 || end < 0) throw new Error(`${block.file}: the marker lines "${block.begin}" and "${block.end}" are missing`);
  return [...lines.slice(0, begin + 1), ...block.render(), ...lines.slice(end)].join("\n");
}

/** The file as the table renders it. */
export function renderedFile(file: string, text = readFileSync(join(ROOT, file), "utf8")): string {
  return BLOCKS.filter((block) => block.file === file).reduce(withRendered, text);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  for (const file of new Set(BLOCKS.map((block) => block.file))) {
    writeFileSync(join(ROOT, file), renderedFile(file));
    console.log(`${file}: the migration policy's settings written`);
  }
}
