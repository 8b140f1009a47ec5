/**
 * The project's rules that Biome enforces (biome.json, the layer table in infra/dev/lint/layers.mjs):
 * imports go down the layers only, the AWS SDK stays in src/aws, process.env is read only by the
 * configuration modules, and no function of src/runner is longer than 60 lines. Each rule is shown to
 * bite: a probe file that breaks it, linted with the project's biome.json in a scratch copy of the tree's
 * shape, fails; its lawful twin passes.
 */
import { spawnSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
// @ts-expect-error: a plain ES module of the development tooling, without type declarations
import { LAYERS, layerOverrides } from "../../../infra/dev/lint/layers.mjs";

const ROOT = join(import.meta.dirname, "..", "..", "..");
const BIOME = join(ROOT, "node_modules", ".bin", "biome");
const scratch = mkdtempSync(join(tmpdir(), "dvm-lint-"));
cpSync(join(ROOT, "biome.json"), join(scratch, "biome.json"));

afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** The lint rules Biome reports for `source` at `path` (relative to the project root). */
function lint(path: string, source: string): string[] {
  const file = join(scratch, path);
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, source);
  try {
    const result = spawnSync(BIOME, ["lint", "--vcs-enabled=false", "--max-diagnostics=50", path], { cwd: scratch, encoding: "utf8" });
    return [...`${result.stdout}${result.stderr}`.matchAll(/lint\/[a-zA-Z]+\/[a-zA-Z]+/g)].map((m) => m[0]);
  } finally {
    rmSync(file);
  }
}

describe("the layer rule", { timeout: 60_000 }, () => {
  it("biome.json carries exactly the layer table's overrides (node infra/dev/lint/layers.mjs writes them)", () => {
    const config = JSON.parse(readFileSync(join(ROOT, "biome.json"), "utf8")) as { overrides: unknown[] };
    const expected = layerOverrides() as unknown[];
    expect(config.overrides.slice(-expected.length)).toEqual(expected);
  });

  it("names every folder of src/ (a new folder gets a layer before it gets code)", () => {
    const folders = readdirSync(join(ROOT, "src")).filter((entry) => statSync(join(ROOT, "src", entry)).isDirectory());
    expect(folders.sort()).toEqual(Object.keys(LAYERS).sort());
    expect(readdirSync(join(ROOT, "src")).filter((entry) => entry.endsWith(".ts"))).toEqual([]);
  });

  it("fails a wrong-way import and passes the same import downward", () => {
    expect(lint("src/kube/probe.ts", 'import { MigrationInputError } from "../phases/types";\nexport const e = MigrationInputError;\n')).toContain(
      "lint/style/noRestrictedImports",
    );
    expect(lint("src/relay/probe.ts", 'import type { ReconcileRequest } from "../runner/runner";\nexport type R = ReconcileRequest;\n')).toContain(
      "lint/style/noRestrictedImports",
    );
    expect(lint("src/contracts/probe.ts", 'import type { Logger } from "../lib/log";\nexport type L = Logger;\n')).toContain("lint/style/noRestrictedImports");
    expect(lint("src/phases/probe.ts", 'import type { Cluster } from "../kube/cluster";\nexport type C = Cluster;\n')).toEqual([]);
  });

  it("keeps what ships apart from what runs only on a developer's machine", () => {
    const fromDev = (depth: string) => `import { findFreePort } from "${depth}infra/dev/local/ports";\nexport const p = findFreePort;\n`;
    expect(lint("src/cli/probe.ts", fromDev("../../"))).toContain("lint/style/noRestrictedImports");
    expect(lint("src/aws/ledger/probe.ts", fromDev("../../../"))).toContain("lint/style/noRestrictedImports");
    expect(lint("functions/probe.ts", fromDev("../"))).toContain("lint/style/noRestrictedImports");
    expect(lint("src/relay/probe.ts", 'import { RelayProcess } from "../../test/support/relayProcess";\nexport const s = RelayProcess;\n')).toContain(
      "lint/style/noRestrictedImports",
    );
    // The deployed table definition is a deployable's fact, not development code.
    expect(lint("src/aws/probe.ts", 'import table from "../../infra/deploy/ledger-table.json" with { type: "json" };\nexport const t = table;\n')).toEqual([]);
  });

  it("keeps the AWS SDK in src/aws", () => {
    const probe = 'import { DynamoDBClient } from "@aws-sdk/client-dynamodb";\nexport const c = DynamoDBClient;\n';
    expect(lint("src/ledger/probe.ts", probe)).toContain("lint/style/noRestrictedImports");
    expect(lint("src/aws/ledger/probe.ts", probe)).toEqual([]);
  });
});

describe("the other project rules", { timeout: 60_000 }, () => {
  it("lets only the configuration modules read process.env", () => {
    const probe = "export const home = process.env.HOME;\n";
    expect(lint("src/phases/probe.ts", probe)).toContain("lint/style/noProcessEnv");
    expect(lint("functions/probe.ts", probe)).toContain("lint/style/noProcessEnv");
    expect(lint("infra/dev/local/probe.ts", probe)).toContain("lint/style/noProcessEnv");
    expect(lint("infra/dev/local/config.ts", probe)).toEqual([]);
    expect(lint("src/relay/config.ts", probe)).toEqual([]);
  });

  it("keeps functions of src/runner under 60 lines", () => {
    const long = `export function long(): number {\n  let n = 0;\n${"  n++;\n".repeat(60)}  return n;\n}\n`;
    expect(lint("src/runner/probe.ts", long)).toContain("lint/complexity/noExcessiveLinesPerFunction");
    expect(lint("src/phases/probe.ts", long)).toEqual([]);
  });
});
