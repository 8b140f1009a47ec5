/**
 * `npm run bench`: every benchmark, one after another, then BENCHMARKS.md (bench/markdown.ts) with the
 * figures, the commit (read when the run starts), the machine and the exact command. Each benchmark
 * starts what it needs (control planes, DynamoDB Local, rsync and stunnel) and stops it; one that fails
 * is reported as failed and the others still run. Every section of bench/sections.ts is written on
 * every run; one left out by DVM_BENCH_ONLY says so.
 *
 *   npm run bench
 *   DVM_BENCH_ONLY=seed,chaos npm run bench   # a subset of: seed, chaos, overhead, scale, relay, ledger, datapath, nodes, bundle
 *   DVM_BENCH_SCALE_DVMS=20 DVM_BENCH_SCALE_PVCS=3 npm run bench
 *
 * Sizes (defaults): DVM_BENCH_SEED_PVCS (3) and DVM_BENCH_SEED_TRANSFER_S (30); DVM_BENCH_CHAOS_DVMS (3)
 * and DVM_BENCH_CHAOS_PVCS (2) per target and scenario, DVM_BENCH_CHAOS_SCENARIOS (all);
 * DVM_BENCH_SCALE_DVMS (200), DVM_BENCH_SCALE_PVCS (10), DVM_BENCH_SCALE_CONCURRENCY (the relay's, 16),
 * DVM_BENCH_SCALE_BASELINE (1; 0 leaves the baseline out); DVM_BENCH_RELAY_MEMORY_DVMS (50,200,1000);
 * DVM_BENCH_LEDGER_PHASES (1000), DVM_BENCH_DATAPATH_MIB (1024), DVM_BENCH_DATAPATH_ROUNDS (3) and
 * DVM_BENCH_DATAPATH_PATHS (plain,ours,volsync,pv-migrate; the data path bench needs root), DVM_BENCH_NODES_MIB (1024; node mode, needs root)
 * and DVM_BENCH_SMALL_FILES (100000: the nodes section's many-small-files run, files of 4 KiB). DVM_BENCH_OUTPUT: where to write
 * (BENCHMARKS.md).
 */
import { execFileSync } from "node:child_process";
import { existsSync, writeFileSync } from "node:fs";
import { cpus, freemem, totalmem } from "node:os";
import { fileURLToPath } from "node:url";
import { type ChaosBenchResult, runChaosBench } from "./chaos";
import { type CostEstimate, costPerThousand } from "./cost";
import { runDatapathBench } from "./datapath";
import { envNumber } from "./env";
import { runLedgerBench } from "./ledger";
import { type BenchRun, type Outcome, renderBenchmarks } from "./markdown";
import { runNodesBench } from "./nodes";
import { runRelayBench } from "./relay";
import { runRelayMemoryBench } from "./relayMemory";
import { describeScale, runScaleBench, type ScaleBenchResult } from "./scale";
import { headingOf, SECTION_NAMES, type SectionName } from "./sections";
import { runSeedBench, type SeedBenchResult } from "./seed";

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true";

/** Sections with a benchmark of their own; cost is computed from the seed's migration. */
const RUNNABLE = SECTION_NAMES.filter((name) => name !== "cost");

const ROOT = fileURLToPath(new URL("../", import.meta.url));
/** Benchmarks that may be absent from a tree: loaded when their file exists. */
const BUNDLE_BENCH = fileURLToPath(new URL("./bundle.ts", import.meta.url));
const OVERHEAD_BENCH = fileURLToPath(new URL("./overhead.ts", import.meta.url));

interface OptionalBench {
  runBundleBench?(options: { log?: (line: string) => void }): Promise<unknown>;
  runOverheadBench?(options: { log?: (line: string) => void }): Promise<unknown>;
}

/** The command that reproduces this run: the bench variables that were set, then npm run bench. */
function commandLine(): string {
  const vars = Object.entries(process.env)
    .filter(([name]) => name.startsWith("DVM_BENCH_") && name !== "DVM_BENCH_OUTPUT")
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([name, value]) => `${name}=${value}`);
  return [...vars, "npm run bench"].join(" ");
}

function wanted(): SectionName[] {
  const only = process.env.DVM_BENCH_ONLY?.split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  if (!only) return [...RUNNABLE];
  for (const name of only)
    if (!(RUNNABLE as readonly string[]).includes(name)) throw new Error(`DVM_BENCH_ONLY: unknown benchmark "${name}" (known: ${RUNNABLE.join(", ")})`);
  return RUNNABLE.filter((s) => only.includes(s));
}

/** The commit the run measures (with "+ uncommitted changes" when the tree differs from it). */
function commit(): string {
  const git = (...args: string[]) => execFileSync("git", args, { cwd: ROOT, encoding: "utf8" }).trim();
  try {
    return `${git("rev-parse", "--short=12", "HEAD")}${git("status", "--porcelain", "--untracked-files=no") ? " (+ uncommitted changes)" : ""}`;
  } catch {
    return "(not a git checkout)";
  }
}

function machine(): string {
  const cpu = cpus();
  const gib = (n: number) => (n / 1024 ** 3).toFixed(1);
  return `${cpu.length} x ${cpu[0]?.model ?? "unknown CPU"}, ${gib(totalmem())} GiB RAM (${gib(freemem())} GiB free at the end), ${process.platform}/${process.arch}, Node ${process.version}`;
}

async function optional(path: string, what: string): Promise<OptionalBench | string> {
  if (!existsSync(path)) return `${what} is not in this tree`;
  return (await import(path)) as OptionalBench;
}

async function main(): Promise<void> {
  // Read before anything runs: the tree may change while a long run goes on.
  const measured = commit();
  const started = new Date();
  const selected = wanted();
  const outcomes: Partial<Record<SectionName, Outcome>> = {};
  let seed: SeedBenchResult | undefined;
  let chaos: ChaosBenchResult | undefined;
  let scale: ScaleBenchResult | undefined;
  let cost: CostEstimate | undefined;

  const section = async (name: SectionName, body: (log: (line: string) => void) => Promise<string | undefined>) => {
    console.log(`\n${headingOf(name)}`);
    const lines: string[] = [];
    const log = (line: string) => {
      lines.push(line);
      console.log(line);
    };
    const t0 = Date.now();
    const outcome: Outcome = { section: name, seconds: 0, lines };
    try {
      const skipped = await body(log);
      if (skipped) outcome.skipped = skipped;
    } catch (error) {
      outcome.error = error instanceof Error ? (error.stack ?? error.message) : String(error);
      console.error(`${name} failed:`, error);
    }
    outcome.seconds = (Date.now() - t0) / 1000;
    outcomes[name] = outcome;
  };

  for (const name of RUNNABLE) {
    if (!selected.includes(name)) {
      outcomes[name] = { section: name, seconds: 0, lines: [], skipped: `left out by DVM_BENCH_ONLY=${process.env.DVM_BENCH_ONLY}` };
      continue;
    }
    switch (name) {
      case "seed":
        await section(name, async (log) => {
          seed = await runSeedBench({ log });
          const ours = seed.targets.find((t) => t.target === "ours")?.report;
          if (ours)
            cost = costPerThousand({
              invocations: ours.invocations,
              waitingInvocations: ours.invocationsByKind.waiting ?? 0,
              invocationMs: ours.invocationMs,
              dynamoRequests: ours.dynamo?.sent ?? {},
              dynamoCapacityUnits: measuredCapacity(ours.dynamo?.capacity),
            });
          return undefined;
        });
        break;
      case "chaos":
        await section(name, async (log) => {
          chaos = await runChaosBench({ log });
          return undefined;
        });
        break;
      case "overhead":
        await section(name, async (log) => {
          const bench = await optional(OVERHEAD_BENCH, "bench/overhead.ts");
          if (typeof bench === "string") return bench;
          await bench.runOverheadBench!({ log });
          return undefined;
        });
        break;
      case "scale":
        await section(name, async (log) => {
          scale = await runScaleBench({ log });
          return undefined;
        });
        break;
      case "relay":
        await section(name, async (log) => {
          await runRelayBench({ log });
          log("");
          await runRelayMemoryBench({ log });
          return undefined;
        });
        break;
      case "ledger":
        await section(name, async (log) => {
          await runLedgerBench({ phases: envNumber("DVM_BENCH_LEDGER_PHASES", 1_000), log });
          return undefined;
        });
        break;
      case "datapath":
        await section(name, async (log) => {
          await runDatapathBench({ mib: envNumber("DVM_BENCH_DATAPATH_MIB", 1024), log });
          return undefined;
        });
        break;
      case "nodes":
        await section(name, async (log) => {
          await runNodesBench({ mib: envNumber("DVM_BENCH_NODES_MIB", 1024), smallFiles: envNumber("DVM_BENCH_SMALL_FILES", 100_000), log });
          return undefined;
        });
        break;
      case "bundle":
        await section(name, async (log) => {
          const bench = await optional(BUNDLE_BENCH, "bench/bundle.ts");
          if (typeof bench === "string") return bench;
          await bench.runBundleBench!({ log });
          return undefined;
        });
        break;
    }
  }

  const finished = new Date();
  console.log("\n== Summary");
  if (seed) for (const line of seed.lines.slice(-2 - seed.targets.length)) console.log(line);
  if (chaos) for (const line of chaos.table) console.log(line);
  if (scale) for (const line of describeScale(scale)) console.log(line);
  for (const o of Object.values(outcomes)) console.log(`${o.section}: ${o.skipped ? "not run" : o.error ? "FAILED" : "ok"} in ${o.seconds.toFixed(0)} s`);

  const run: BenchRun = {
    commit: measured,
    started,
    finished,
    command: commandLine(),
    machine: machine(),
    outcomes,
    ...(seed ? { seed } : {}),
    ...(chaos ? { chaos } : {}),
    ...(scale ? { scale } : {}),
    ...(cost ? { cost } : {}),
  };
  const output = process.env.DVM_BENCH_OUTPUT ?? `${ROOT}BENCHMARKS.md`;
  writeFileSync(output, renderBenchmarks(run));
  console.log(`\nwrote ${output}`);
  if (Object.values(outcomes).some((o) => o.error)) process.exitCode = 1;
}

main().then(
  () => process.exit(process.exitCode ?? 0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);

/** The seed's measured DynamoDB capacity units; a bill without them would silently price DynamoDB at 0. */
function measuredCapacity(capacity: { write: number; read: number } | undefined): { write: number; read: number } {
  if (!capacity || capacity.write <= 0) throw new Error("seed: DynamoDB reported no consumed capacity for ours, so the cost cannot be computed");
  return capacity;
}
