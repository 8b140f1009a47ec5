/**
 * `npm run bench`: every benchmark, one after another, then BENCHMARKS.md with the figures, the machine
 * and the exact command. Each benchmark starts what it needs (control planes, DynamoDB Local, rsync and
 * stunnel) and stops it; one that fails is reported as failed and the others still run.
 *
 *   npm run bench
 *   DVM_BENCH_ONLY=chaos,scale npm run bench           # a subset: ledger, datapath, nodes, bundle, chaos, scale
 *   DVM_BENCH_SCALE_DVMS=20 DVM_BENCH_SCALE_PVCS=3 npm run bench
 *
 * Sizes (defaults): DVM_BENCH_LEDGER_PHASES (1000), DVM_BENCH_DATAPATH_MIB (256 here; 1024 when
 * bench/datapath.ts runs alone), DVM_BENCH_NODES_MIB (1024; node mode, needs root), DVM_BENCH_CHAOS_DVMS (3) and DVM_BENCH_CHAOS_PVCS (2) per target and
 * scenario, DVM_BENCH_CHAOS_SCENARIOS (all), DVM_BENCH_SCALE_DVMS (200), DVM_BENCH_SCALE_PVCS (10),
 * DVM_BENCH_SCALE_CONCURRENCY (the relay's default, 16). DVM_BENCH_OUTPUT: where to write (BENCHMARKS.md).
 */
import { execFileSync } from "node:child_process";
import { existsSync, writeFileSync } from "node:fs";
import { cpus, freemem, totalmem } from "node:os";
import { fileURLToPath } from "node:url";
import { type ChaosBenchResult, runChaosBench } from "./chaos";
import { runDatapathBench } from "./datapath";
import { envNumber } from "./env";
import { runLedgerBench } from "./ledger";
import { runNodesBench } from "./nodes";
import { describeScale, runScaleBench, type ScaleBenchResult } from "./scale";

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true";

const SECTIONS = ["ledger", "datapath", "nodes", "bundle", "chaos", "scale"] as const;
type Section = (typeof SECTIONS)[number];

interface Outcome {
  section: Section;
  title: string;
  seconds: number;
  lines: string[];
  error?: string;
}

const ROOT = fileURLToPath(new URL("../", import.meta.url));
const BUNDLE_BENCH = fileURLToPath(new URL("./bundle.ts", import.meta.url));

/** The command that reproduces this run: the bench variables that were set, then npm run bench. */
function commandLine(): string {
  const vars = Object.entries(process.env)
    .filter(([name]) => name.startsWith("DVM_BENCH_") && name !== "DVM_BENCH_OUTPUT")
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([name, value]) => `${name}=${value}`);
  return [...vars, "npm run bench"].join(" ");
}

function wanted(): Section[] {
  const only = process.env.DVM_BENCH_ONLY?.split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  if (!only) return [...SECTIONS];
  for (const name of only)
    if (!(SECTIONS as readonly string[]).includes(name)) throw new Error(`DVM_BENCH_ONLY: unknown benchmark "${name}" (known: ${SECTIONS.join(", ")})`);
  return SECTIONS.filter((s) => only.includes(s));
}

interface BundleModule {
  runBundleBench(options: { log?: (line: string) => void }): Promise<unknown>;
}

async function main(): Promise<void> {
  const started = new Date();
  const outcomes: Outcome[] = [];
  let chaos: ChaosBenchResult | undefined;
  let scale: ScaleBenchResult | undefined;

  const section = async (name: Section, title: string, body: (log: (line: string) => void) => Promise<void>) => {
    console.log(`\n== ${title}`);
    const lines: string[] = [];
    const log = (line: string) => {
      lines.push(line);
      console.log(line);
    };
    const t0 = Date.now();
    const outcome: Outcome = { section: name, title, seconds: 0, lines };
    try {
      await body(log);
    } catch (error) {
      outcome.error = error instanceof Error ? (error.stack ?? error.message) : String(error);
      console.error(`${title} failed:`, error);
    }
    outcome.seconds = (Date.now() - t0) / 1000;
    outcomes.push(outcome);
  };

  for (const name of wanted()) {
    switch (name) {
      case "ledger":
        await section(name, "Ledger: claim + complete against DynamoDB Local", async (log) => {
          await runLedgerBench({ phases: envNumber("DVM_BENCH_LEDGER_PHASES", 1_000), log });
        });
        break;
      case "datapath":
        await section(name, "Data path: rsync through stunnel vs plain rsync", async (log) => {
          await runDatapathBench({ mib: envNumber("DVM_BENCH_DATAPATH_MIB", 256), log });
        });
        break;
      case "nodes":
        await section(name, "Data phase on real pods vs plain rsync between the same network namespaces", async (log) => {
          await runNodesBench({ mib: envNumber("DVM_BENCH_NODES_MIB", 1024), log });
        });
        break;
      case "bundle":
        if (!existsSync(BUNDLE_BENCH)) break;
        await section(name, "Function bundles: size and cold initialisation", async (log) => {
          const bundle = (await import(BUNDLE_BENCH)) as BundleModule;
          await bundle.runBundleBench({ log });
        });
        break;
      case "chaos":
        await section(name, "Chaos: phase repeats under injected faults, our runner vs the baseline", async (log) => {
          chaos = await runChaosBench({ log });
        });
        break;
      case "scale":
        await section(name, "Scale: concurrent DVMs through the relay and the runner", async (log) => {
          scale = await runScaleBench({ log });
        });
        break;
    }
  }

  const finished = new Date();
  console.log("\n== Summary");
  if (chaos) for (const line of chaos.table) console.log(line);
  if (scale) for (const line of describeScale(scale)) console.log(line);
  for (const o of outcomes) console.log(`${o.section}: ${o.error ? "FAILED" : "ok"} in ${o.seconds.toFixed(0)} s`);

  const output = process.env.DVM_BENCH_OUTPUT ?? `${ROOT}BENCHMARKS.md`;
  writeFileSync(output, markdown({ started, finished, outcomes, chaos, scale }));
  console.log(`\nwrote ${output}`);
  if (outcomes.some((o) => o.error)) process.exitCode = 1;
}

/** The commit the run measured (with "+ uncommitted changes" when the tree differs from it). */
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

function markdown(run: {
  started: Date;
  finished: Date;
  outcomes: Outcome[];
  chaos: ChaosBenchResult | undefined;
  scale: ScaleBenchResult | undefined;
}): string {
  const out: string[] = [];
  const minutes = ((run.finished.getTime() - run.started.getTime()) / 60_000).toFixed(1);
  out.push("# Benchmarks", "");
  out.push(`Generated by \`bench/run.ts\` at commit ${commit()} on ${run.started.toISOString()} (${minutes} min). The command that produced this file:`, "");
  out.push("```sh", commandLine(), "```", "");
  out.push(
    `Machine: ${machine()}. Every service is local: two kube-apiserver + etcd control planes with kwok as the kubelet, DynamoDB Local, rsync and stunnel, all on these CPUs, and the machine is shared with other work: latencies and throughput vary from run to run (by a factor of 2 to 5 under load), the repeat counts do not. The figures are one run's; nothing here is asserted by a test. The chaos tests (\`npx vitest run --project chaos\`) assert the invariants on smaller runs: no repeat in any scenario without a crash, at most one per crash or function timeout, no lost transition, no regression, every migration completed, and repeats for the baseline under stale replay.`,
    "",
  );

  const byName = new Map(run.outcomes.map((o) => [o.section, o]));
  const failed = (o: Outcome | undefined) => (o?.error ? ["**This benchmark failed:**", "", "```", o.error, "```", ""] : []);

  const chaosOutcome = byName.get("chaos");
  if (chaosOutcome) {
    out.push("## Chaos: does a phase run twice?", "");
    out.push(...failed(chaosOutcome));
    if (run.chaos) {
      const c = run.chaos;
      out.push(
        `Each scenario runs ${c.dvms} DVMs of ${c.pvcs} PVCs for our runner, then ${c.dvms} for the baseline, each alone, on the same control planes and under the same injected faults (\`bench/chaos.ts\`, harness in \`test/chaos/harness/\`).`,
        "",
        '- **Repeats**: executions of a non-waiting phase body beyond the first for the same (DVM uid, phase, generation), counted by a wrapper around each real body (reported before the body runs, so a killed process still counts). A body that threw is a retry, not a repeat. "+N wait polls" are polls of a waiting phase after it had already advanced. `of N`: all bodies entered.',
        "- **Overhead**: for every invocation that moved a DVM to its next phase, its wall time minus the time spent in the phase body. Ours: fresh read of the DVM, ledger claim, resolving the clusters (a read of the destination kubeconfig Secret), ledger completion and the guarded status write, with re-reads after 409s and DynamoDB retries. Baseline: informer-cache read, resolving the clusters and the guarded status write.",
        "- **Invocations per phase**: every invocation the target received (duplicates and replays included) divided by the phase transitions it made.",
        "- **Our checks**: migrations Completed within the bound; lost transitions (a completion recorded in the ledger whose phase the status never moved past); status regressions (status.phase moving backwards on a real watch of the DVM); objects (pods, secrets, services, config maps, PVCs, namespaces, progress records) created twice, from the API servers' watch events.",
        "- **Baseline**: a controller-runtime style reconciler (`test/chaos/harness/baseline.ts`) reading the DVM from an informer cache (the harness's watch) and running whatever phase it shows with the same phase bodies, writing the status with a resourceVersion-guarded update; a 409 requeues after 100 ms, as upstream. It has no ledger, so throttling DynamoDB does nothing to it. Unfinished baseline migrations are cut off after 60 s.",
        "",
      );
      out.push(...c.table, "");
      out.push("What each fault injects:", "");
      for (const [fault, description] of Object.entries(c.faults)) out.push(`- \`${fault}\`: ${description}`);
      out.push("");
      const notes: string[] = [];
      for (const report of c.reports) {
        for (const r of report.reports) {
          if (r.stuck.length)
            notes.push(`- ${report.scenario.name}, ${r.target}: ${r.completed}/${r.migrations} completed within the bound; stuck: ${r.stuck.join(", ")}`);
          if (r.target === "ours" && (r.repeats.repeats || r.repeats.waitRepeats)) {
            const phases = Object.entries(r.repeats.byPhase)
              .map(([phase, n]) => `${phase} ${n}`)
              .join(", ");
            notes.push(
              `- ${report.scenario.name}, ours: ${r.repeats.repeats + r.repeats.waitRepeats} repeats (${phases}) for ${r.repeats.crashed} crashes right after a body returned and ${r.timeouts} kills at the function timeout; ${r.takeovers} lease takeovers`,
            );
          }
        }
        const ours = report.reports.find((r) => r.target === "ours");
        const base = report.reports.find((r) => r.target === "baseline");
        if (ours && base)
          notes.push(
            `- ${report.scenario.name}: time to complete (max) ours ${(ours.timeToCompleteMs.max / 1000).toFixed(1)} s, baseline ${base.completed === base.migrations ? `${(base.timeToCompleteMs.max / 1000).toFixed(1)} s` : "did not finish"}; objects created ours ${ours.created}, baseline ${base.created}`,
          );
      }
      if (notes.length) out.push("Per scenario:", "", ...notes, "");
    }
  }

  const scaleOutcome = byName.get("scale");
  if (scaleOutcome) {
    out.push("## Scale", "");
    out.push(...failed(scaleOutcome));
    if (run.scale) {
      const s = run.scale;
      out.push(
        `${s.dvms} DVMs of ${s.pvcs} PVCs created at once, driven by the real watch relay forwarding to our runner in one process (an InProcessTransport, as \`npm start\` does), with real delays (wait phases polled every 3 s). Memory is that process's, sampled every second. DynamoDB requests are counted by client middleware in that process. (\`bench/scale.ts\`)`,
        "",
        "| figure | value |",
        "|---|---|",
        `| migrations completed | ${s.completed}/${s.dvms} in ${s.wallSeconds.toFixed(0)} s (setup of ${s.dvms} namespaces and ${s.dvms * s.pvcs} PVCs, ${s.setupSeconds.toFixed(0)} s, not counted) |`,
        `| phase transitions | ${s.transitions} |`,
        `| phase transitions per second | ${s.transitionsPerSecond.toFixed(1)} over the run; ${s.peakTransitionsPerSecond.toFixed(1)} in the best 10 s window |`,
        `| time to complete a DVM | p50 ${s.timeToCompleteSeconds.p50.toFixed(0)} s, max ${s.timeToCompleteSeconds.max.toFixed(0)} s |`,
        `| relay+runner RSS | idle ${s.memory.idleRssMiB.toFixed(0)} MiB, mean ${s.memory.meanRssMiB.toFixed(0)} MiB, peak ${s.memory.peakRssMiB.toFixed(0)} MiB (${s.memory.samples} samples, up to ${s.memory.peakLiveDvms} live DVMs) |`,
        `| relay+runner heap used | peak ${s.memory.peakHeapUsedMiB.toFixed(0)} MiB |`,
        `| ledger writes per phase transition | ${s.ledger.writesPerTransition.toFixed(2)} (all DynamoDB requests: ${s.ledger.requestsPerTransition.toFixed(2)}; ${Object.entries(
          s.ledger.byCommand,
        )
          .map(([k, v]) => `${k} ${v}`)
          .join(", ")}) |`,
        `| invocations per phase transition | ${s.invocationsPerTransition.toFixed(2)} (${Object.entries(s.invocations)
          .map(([k, v]) => `${k} ${v}`)
          .join(", ")}) |`,
        `| overhead per advancing invocation | p50 ${s.overheadMs.p50.toFixed(1)} ms, p99 ${s.overheadMs.p99.toFixed(1)} ms |`,
        `| repeated phase executions | ${s.repeats} |`,
        `| objects created / created twice | ${s.createdObjects} / ${s.createdTwice} |`,
        "",
        `Where the time went (mean time a DVM's status stayed at a phase, from the DVM watch): ${s.slowestPhases.map((p) => `${p.phase} ${p.meanSeconds.toFixed(0)} s`).join(", ")}. The relay serves the DVMs from one queue with ${s.concurrency ?? 16} forwards in flight, so they advance side by side and finish together; wait phases are polled every 3 s.`,
        "",
        "Ledger writes per transition include the claim and release of every poll of a waiting phase, so they exceed the 2 writes (claim + complete) of a phase that runs once.",
        "",
      );
    }
  }

  const verbatim: Array<[Section, string]> = [
    ["ledger", "## Ledger"],
    ["datapath", "## Data path"],
    ["nodes", "## Data phase on real pods"],
    ["bundle", "## Function bundles"],
  ];
  for (const [name, heading] of verbatim) {
    const o = byName.get(name);
    if (!o) continue;
    out.push(heading, "", ...failed(o), `Output of \`bench/${name}.ts\` (${o.seconds.toFixed(0)} s):`, "", "```", ...o.lines, "```", "");
  }
  return `${out.join("\n").trimEnd()}\n`;
}

main().then(
  () => process.exit(process.exitCode ?? 0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
