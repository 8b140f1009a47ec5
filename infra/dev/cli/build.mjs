#!/usr/bin/env node
/**
 * Bundles the `dvm` command (src/cli/main.ts) into the one file the package's `bin` points at:
 *
 *   node infra/dev/cli/build.mjs       -> dist/dvm.mjs (run by `npm pack` through the prepack script)
 *
 * Built, not committed: `npm pack` always ships a bundle of the code it packs. Everything is bundled, so
 * the installed command needs Node and nothing else (no tsx, no devDependencies); the same options as the
 * relay's bundle (infra/deploy/relay/build.mjs).
 */
import { chmodSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { bundleNodeProgram } from "../../deploy/relay/build.mjs";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
export const CLI_ENTRY = join(ROOT, "src", "cli", "main.ts");
export const CLI_BUNDLE = join(ROOT, "dist", "dvm.mjs");

export async function buildCli({ outfile = CLI_BUNDLE } = {}) {
  const built = await bundleNodeProgram({ entry: CLI_ENTRY, outfile });
  chmodSync(outfile, 0o755);
  return built;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const { outfile, bytes } = await buildCli();
  process.stdout.write(`dvm bundle: ${relative(process.cwd(), outfile)} (${(bytes / 1024).toFixed(0)} kB)\n`);
}
