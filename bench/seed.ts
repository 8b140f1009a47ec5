/**
 * The seed's table, reproduced: one migration of the seed's shape, for our runner and for each
 * baseline, alone, on control planes and DynamoDB Local started here, with upstream's real requeue
 * delays (nothing compressed: waits polled every 3 s) and no fault injected. Per phase: how long the
 * DVM's status stayed there (from the API server's watch), its share of the total, and how many times
 * its body ran; then the repeated phases and the seconds they wasted, as the seed reported them
 * (upstream's own run: 5 of about 60 phase executions repeated, 10.22 s of 272 s wasted).
 *
 * The seed's shape, as far as the repository records it: one DVM through the VolumeMigration itinerary,
 * its waits polled at PollReQ. kwok runs the pods, so no data moves; the rsync client pods stay Running
 * for DVM_BENCH_SEED_TRANSFER_S seconds (kwok's dvm.test/run-seconds) so the transfer phase is polled
 * as a real one is.
 *
 *   npx tsx bench/seed.ts
 *   DVM_BENCH_SEED_PVCS=3 DVM_BENCH_SEED_TRANSFER_S=30 npx tsx bench/seed.ts
 */
import { pathToFileURL } from "node:url";
import { POLL_REQUEUE_MS } from "../src/dvm/itinerary";
import { Observatory, runScenario, scenarioNamed, type TargetReport } from "../test/chaos/harness";
import type { DvmHistory } from "../test/chaos/harness/observatory";
import { TARGET_LABELS } from "../test/chaos/harness/report";
import type { TargetKind } from "../test/chaos/harness/targets";
import { envNumber, startBenchEnvironment } from "./env";

export interface SeedBenchOptions {
  /** PVCs of the one DVM. Default 3, or DVM_BENCH_SEED_PVCS. */
  pvcs?: number;
  /** How long each rsync client pod runs on kwok, s. Default 30, or DVM_BENCH_SEED_TRANSFER_S. */
  transferSeconds?: number;
  targets?: readonly TargetKind[];
  log?: (line: string) => void;
}

export interface SeedPhaseRow {
  phase: string;
  seconds: number;
  executions: number;
  repeats: number;
}

export interface SeedTargetResult {
  target: TargetKind;
  completed: boolean;
  totalSeconds: number;
  rows: SeedPhaseRow[];
  executions: number;
  repeatedPhases: number;
  repeats: number;
  wastedSeconds: number;
  staleReads: number;
  createdTwice: string[];
  report: TargetReport;
}

export interface SeedBenchResult {
  pvcs: number;
  transferSeconds: number;
  targets: SeedTargetResult[];
  /** Markdown: one per-phase table per target, then the summary table. */
  lines: string[];
}

/** Time the DVM's status stayed at each phase, from the watch's phase sequence, in order. */
function phaseTimes(history: DvmHistory, uid: string, createdAt: number): Array<{ phase: string; seconds: number }> {
  const positions = history.positions(uid);
  const out: Array<{ phase: string; seconds: number }> = [];
  const first = positions[0];
  if (first && first.at > createdAt) out.push({ phase: "(created, no status yet)", seconds: (first.at - createdAt) / 1000 });
  for (let i = 0; i < positions.length; i++) {
    const p = positions[i]!;
    if (p.phase === "Completed") break;
    const next = positions[i + 1];
    out.push({ phase: p.phase || "(created)", seconds: ((next?.at ?? p.at) - p.at) / 1000 });
  }
  return out;
}

export async function runSeedBench(options: SeedBenchOptions = {}): Promise<SeedBenchResult> {
  const log = options.log ?? ((line: string) => console.log(line));
  const pvcs = options.pvcs ?? envNumber("DVM_BENCH_SEED_PVCS", 3);
  const transferSeconds = options.transferSeconds ?? envNumber("DVM_BENCH_SEED_TRANSFER_S", 30);
  const targets = options.targets ?? (["ours", "baseline", "fresh-get"] as const);
  log(
    `seed bench: 1 DVM of ${pvcs} PVCs per target (${targets.join(", ")}), client pods run ${transferSeconds} s, waits polled every ${POLL_REQUEUE_MS / 1000} s`,
  );
  const env = await startBenchEnvironment({ host: "start", destination: "start", dynamo: "start", dynamoJvmArgs: [] }, log);
  const observatory = await new Observatory({ host: env.host.kubeConfig, destination: env.destination.kubeConfig }).start();
  const results: SeedTargetResult[] = [];
  try {
    for (const target of targets) {
      const startedAt = Date.now();
      const report = await runScenario({
        env,
        observatory,
        scenario: scenarioNamed("none"),
        targets: [target],
        dvms: 1,
        pvcs,
        spec: { transferPodAnnotations: { "dvm.test/run-seconds": String(transferSeconds) } },
        // Upstream's delays as they are: the harness's loop waits what the runner asks (PollReQ 3 s).
        capMs: POLL_REQUEUE_MS,
        timeoutMs: 10 * 60_000,
        log: (line) => log(`  ${line}`),
      });
      const r = report.reports[0]!;
      const uid = r.uids[0]!;
      const created = observatory.dvms.positions(uid)[0]?.at ?? startedAt;
      const times = phaseTimes(observatory.dvms, uid, created);
      const rows: SeedPhaseRow[] = times.map((t) => ({
        phase: t.phase,
        seconds: t.seconds,
        executions: r.executionsByPhase[t.phase] ?? 0,
        repeats: r.repeats.byPhase[t.phase] ?? 0,
      }));
      const completedAt = observatory.dvms.completedAt(uid);
      const result: SeedTargetResult = {
        target,
        completed: completedAt !== undefined,
        totalSeconds: ((completedAt ?? Date.now()) - created) / 1000,
        rows,
        executions: r.repeats.executions,
        repeatedPhases: Object.keys(r.repeats.byPhase).length,
        repeats: r.repeats.repeats + r.repeats.waitRepeats,
        wastedSeconds: r.repeats.wastedMs / 1000,
        staleReads: r.staleReads,
        createdTwice: r.createdTwice,
        report: r,
      };
      results.push(result);
      log(
        `  ${target}: ${result.completed ? "completed" : "NOT completed"} in ${result.totalSeconds.toFixed(1)} s, ${result.executions} executions, ${result.repeats} repeated (${result.repeatedPhases} phases), ${result.wastedSeconds.toFixed(2)} s wasted, ${result.staleReads} stale reads, ${result.createdTwice.length} objects created twice`,
      );
    }
  } finally {
    await observatory.stop();
    await env.stop();
  }
  const lines = seedTables(results);
  for (const line of lines) log(line);
  return { pvcs, transferSeconds, targets: results, lines };
}

export function seedTables(results: readonly SeedTargetResult[]): string[] {
  const out: string[] = [];
  for (const r of results) {
    out.push(`**${TARGET_LABELS[r.target]}**: ${r.completed ? "" : "did not complete; "}${r.totalSeconds.toFixed(1)} s in all`, "");
    out.push("| phase | elapsed s | % of total | executions |", "|---|---|---|---|");
    for (const row of r.rows) {
      const share = r.totalSeconds > 0 ? (100 * row.seconds) / r.totalSeconds : 0;
      out.push(`| ${row.phase} | ${row.seconds.toFixed(2)} | ${share.toFixed(1)} | ${row.executions}${row.repeats ? ` (${row.repeats} repeated)` : ""} |`);
    }
    out.push("");
  }
  out.push(
    "| target | total s | phase executions | repeated executions (phases) | wasted s | stale reads | objects created twice |",
    "|---|---|---|---|---|---|---|",
    "| upstream's seed run (reported) | 272 | about 60 | 5 | 10.22 | - | - |",
  );
  for (const r of results)
    out.push(
      `| ${TARGET_LABELS[r.target]} | ${r.totalSeconds.toFixed(1)} | ${r.executions} | ${r.repeats} (${r.repeatedPhases}) | ${r.wastedSeconds.toFixed(2)} | ${r.staleReads} | ${r.createdTwice.length ? r.createdTwice.join(", ") : 0} |`,
    );
  return out;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true";
  runSeedBench().then(
    () => process.exit(0),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}
