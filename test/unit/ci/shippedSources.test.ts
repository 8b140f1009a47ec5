/**
 * The line between what ships and what runs only on a developer's machine, checked on the bundles
 * themselves: the Lambda functions, the relay image and the `dvm` command are bundled with the options
 * they are deployed with, and every file they take in must come from functions/, src/ or an npm
 * package or infra/deploy (the ledger table's definition, the bundler's shims), while every file of src/ must reach one of them.
 */
import { readdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join, relative } from "node:path";
import { build, transform } from "esbuild";
import { describe, expect, it } from "vitest";

const ROOT = join(import.meta.dirname, "..", "..", "..");
const require = createRequire(import.meta.url);
const { esbuildOptions } = require("../../../infra/deploy/serverless/esbuild.cjs") as { esbuildOptions: Parameters<typeof build>[0] };

/** Each deployable and its entry points (serverless.yml's handlers, the relay image's, the CLI's). */
const DEPLOYABLES = [
  { name: "Lambda", entries: ["functions/phase.ts", "functions/trigger.ts"], format: "cjs" },
  // Both are one ESM file (infra/deploy/relay/build.mjs bundleNodeProgram).
  { name: "relay image", entries: ["src/relay/main.ts"], format: "esm" },
  { name: "dvm command", entries: ["src/cli/main.ts"], format: "esm" },
] as const;

async function inputsOf({ entries, format }: (typeof DEPLOYABLES)[number]): Promise<string[]> {
  const result = await build({
    ...esbuildOptions,
    format,
    entryPoints: entries.map((entry) => join(ROOT, entry)),
    absWorkingDir: ROOT,
    outdir: join(ROOT, "dist", "shipped-sources-check"),
    write: false,
    metafile: true,
    logLevel: "error",
  });
  return Object.keys(result.metafile.inputs).map((input) => relative(ROOT, join(ROOT, input)));
}

/** Read when `osls package` builds the functions block (infra/deploy/serverless/functions.cjs), not bundled. */
const PACKAGING_ONLY = ["src/aws/functionLayout.ts"];

/** Types and re-exports only: nothing of it is left in a bundle, whoever imports it. */
async function declarationsOnly(file: string): Promise<boolean> {
  const { code } = await transform(readFileSync(join(ROOT, file), "utf8"), { loader: "ts" });
  return code.split("\n").every((line) => line.trim() === "" || /^export (\{[^}]*\}|\*) from /.test(line.trim()));
}

function sourceFiles(folder: string): string[] {
  return readdirSync(join(ROOT, folder), { recursive: true, encoding: "utf8" })
    .filter((file) => file.endsWith(".ts"))
    .map((file) => join(folder, file));
}

describe("what ships", { timeout: 120_000 }, () => {
  it("takes in nothing of infra/dev, test or bench, and every file of src/ ships in Lambda, the relay image or the dvm command", async () => {
    const shipped = new Set<string>();
    for (const deployable of DEPLOYABLES) {
      const inputs = (await inputsOf(deployable)).filter((input) => !input.split("/").includes("node_modules"));
      // package.json: the dvm command prints its version.
      expect(inputs.filter((input) => !/^(src|functions|infra\/deploy)\//.test(input) && input !== "package.json")).toEqual([]);
      for (const input of inputs) shipped.add(input);
    }
    const notShipped = sourceFiles("src").filter((file) => !shipped.has(file) && !PACKAGING_ONLY.includes(file));
    const withCode = [];
    for (const file of notShipped) if (!(await declarationsOnly(file))) withCode.push(file);
    expect(withCode).toEqual([]);
  });
});
