/**
 * Bundle benchmark: bundles every phase function with esbuild exactly as `osls package` does (the
 * options of infra/deploy/serverless/esbuild.cjs, the handlers of the generated functions block), then prints
 * per function the minified size, its gzip size, and the cold initialisation time: a fresh `node`
 * process that requires the bundle, median over N runs, next to a bare `node` start for reference.
 *
 *   npx tsx bench/bundle.ts [runs]
 */

import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { gzipSync } from "node:zlib";
import { build, type Metafile } from "esbuild";
import { parse } from "yaml";
import { FUNCTION_LAYOUTS, type FunctionLayout } from "../src/aws/functionLayout";

const ROOT = join(import.meta.dirname, "..");
const require = createRequire(import.meta.url);
const run = promisify(execFile);

interface EsbuildConfigModule {
  esbuildOptions: Parameters<typeof build>[0];
}
interface FunctionsModule {
  phaseFunctions(layout: FunctionLayout, common: Record<string, unknown>): Record<string, { handler: string }>;
}

export interface BundleBenchOptions {
  /** Cold starts per bundle; the median is reported. Default 10. */
  runs?: number;
  /** Default: every layout. */
  layouts?: readonly FunctionLayout[];
  /** Where the lines go; default console.log. */
  log?: (line: string) => void;
}

export interface InitFigures {
  /** Median time spent in require() of the bundle. */
  requireMs: number;
  /** Median time from process start until the bundle is loaded (Node bootstrap included). */
  processMs: number;
}

export interface FunctionBundleFigures {
  function: string;
  layout: FunctionLayout;
  handler: string;
  bytes: number;
  gzipBytes: number;
  init: InitFigures;
}

export interface BundleBenchResult {
  functions: FunctionBundleFigures[];
  /** `node -e ""` started the same way: what any bundle adds on top of. */
  bareNode: InitFigures;
  /** Packages by bytes in the bundle, largest first (per handler). */
  largestInputs: Record<string, { name: string; bytes: number }[]>;
  /** The same bundle with @aws-sdk/* left to the Lambda runtime's copy (not what we deploy). */
  withoutAwsSdkBytes: Record<string, number>;
}

export async function runBundleBench(options: BundleBenchOptions = {}): Promise<BundleBenchResult> {
  const runs = options.runs ?? 10;
  const layouts = options.layouts ?? FUNCTION_LAYOUTS;
  const log = options.log ?? ((line: string) => console.log(line));
  const { esbuildOptions } = require("../infra/deploy/serverless/esbuild.cjs") as EsbuildConfigModule;
  const { phaseFunctions } = require("../infra/deploy/serverless/functions.cjs") as FunctionsModule;
  const common = phaseFunctionSettings();

  const out = mkdtempSync(join(tmpdir(), "dvm-bundle-bench-"));
  try {
    const bundles = new Map<string, { file: string; bytes: number; gzipBytes: number; init: InitFigures }>();
    const largestInputs: BundleBenchResult["largestInputs"] = {};
    const withoutAwsSdkBytes: BundleBenchResult["withoutAwsSdkBytes"] = {};
    const functions: FunctionBundleFigures[] = [];
    const bareNode = await coldStarts(undefined, runs);

    for (const layout of layouts) {
      for (const [key, fn] of Object.entries(phaseFunctions(layout, common))) {
        let bundle = bundles.get(fn.handler);
        if (!bundle) {
          const entry = handlerEntry(fn.handler);
          const outdir = join(out, String(bundles.size));
          const result = await build({ ...esbuildOptions, entryPoints: [entry], outdir, absWorkingDir: ROOT, metafile: true, logLevel: "error" });
          const file = join(outdir, `${basename(entry, ".ts")}.cjs`);
          const code = readFileSync(file);
          bundle = { file, bytes: code.length, gzipBytes: gzipSync(code, { level: 9 }).length, init: await coldStarts(file, runs) };
          bundles.set(fn.handler, bundle);
          largestInputs[fn.handler] = byPackage(result.metafile);
          const lean = await build({
            ...esbuildOptions,
            entryPoints: [entry],
            outdir: join(out, `${bundles.size}-lean`),
            absWorkingDir: ROOT,
            external: ["@aws-sdk/*"],
            metafile: true,
            logLevel: "error",
          });
          withoutAwsSdkBytes[fn.handler] = Object.values(lean.metafile.outputs)[0]?.bytes ?? 0;
        }
        functions.push({ function: key, layout, handler: fn.handler, bytes: bundle.bytes, gzipBytes: bundle.gzipBytes, init: bundle.init });
      }
    }

    log(`cold init: median of ${runs} fresh node processes (node ${process.version}, ${process.platform}/${process.arch})`);
    log(row("function", "layout", "bytes (min)", "gzip", "require ms", "start→loaded ms"));
    log(row("(bare node)", "", "", "", "", fmt(bareNode.processMs)));
    for (const f of functions)
      log(row(f.function, f.layout, f.bytes.toLocaleString("en"), f.gzipBytes.toLocaleString("en"), fmt(f.init.requireMs), fmt(f.init.processMs)));
    for (const [handler, inputs] of Object.entries(largestInputs)) {
      log(
        `${handler}: largest inputs ${inputs
          .slice(0, 8)
          .map((i) => `${i.name} ${Math.round(i.bytes / 1024)}k`)
          .join(", ")}`,
      );
      log(`${handler}: ${withoutAwsSdkBytes[handler]?.toLocaleString("en")} bytes if @aws-sdk/* were left to the runtime's copy (not deployed that way)`);
    }
    return { functions, bareNode, largestInputs, withoutAwsSdkBytes };
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}

/** custom.phaseFunction of serverless.yml: the handler every generated function gets. */
function phaseFunctionSettings(): Record<string, unknown> {
  // CloudFormation tags (!GetAtt, !Ref) are irrelevant here; yaml keeps their plain values.
  const config = parse(readFileSync(join(ROOT, "serverless.yml"), "utf8"), { logLevel: "silent" }) as { custom?: { phaseFunction?: Record<string, unknown> } };
  const settings = config.custom?.phaseFunction;
  if (!settings || typeof settings.handler !== "string") throw new Error("serverless.yml has no custom.phaseFunction.handler");
  return settings;
}

/** "functions/phase.handler" → <root>/functions/phase.ts (as serverless-esbuild resolves it). */
function handlerEntry(handler: string): string {
  const file = handler.slice(0, handler.lastIndexOf("."));
  return join(ROOT, dirname(file), `${basename(file)}.ts`);
}

/** Starts `runs` fresh node processes that require `bundle` (none: an empty program). */
async function coldStarts(bundle: string | undefined, runs: number): Promise<InitFigures> {
  const program = [
    "const { performance } = require('node:perf_hooks');",
    "const t0 = performance.now();",
    bundle ? `require(${JSON.stringify(bundle)});` : "",
    "const t1 = performance.now();",
    "process.stdout.write(JSON.stringify({ requireMs: t1 - t0, processMs: t1 }));",
  ].join("\n");
  const samples: InitFigures[] = [];
  for (let i = 0; i < runs; i++) {
    // A bare environment: nothing from this shell (AWS settings, NODE_OPTIONS) changes what loads.
    const { stdout } = await run(process.execPath, ["-e", program], { env: { PATH: process.env.PATH ?? "" }, timeout: 60_000 });
    samples.push(JSON.parse(stdout) as InitFigures);
  }
  return { requireMs: median(samples.map((s) => s.requireMs)), processMs: median(samples.map((s) => s.processMs)) };
}

function byPackage(metafile: Metafile): { name: string; bytes: number }[] {
  const sizes = new Map<string, number>();
  for (const output of Object.values(metafile.outputs)) {
    for (const [input, { bytesInOutput }] of Object.entries(output.inputs)) {
      const name = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(input)?.[1] ?? input.split("/")[0] ?? input;
      sizes.set(name, (sizes.get(name) ?? 0) + bytesInOutput);
    }
  }
  return [...sizes].map(([name, bytes]) => ({ name, bytes })).sort((a, b) => b.bytes - a.bytes);
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

const fmt = (ms: number) => ms.toFixed(1);
const row = (...cells: string[]) => cells.map((c, i) => (i < 2 ? c.padEnd(i === 0 ? 44 : 10) : c.padStart(14))).join(" ");

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const runs = process.argv[2] ? Number(process.argv[2]) : undefined;
  await runBundleBench(runs ? { runs } : {});
}
