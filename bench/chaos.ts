/**
 * Chaos benchmark: every scenario of test/chaos (each fault alone, then all at once), our runner then
 * the baseline, each alone under the same faults, on control planes and DynamoDB Local started here.
 * Prints one comparison table. The figures are counted from the side effects (phase bodies entered,
 * objects created as the API servers' watches saw them, the DVMs' status.phase sequence), not from logs.
 *
 *   npx tsx bench/chaos.ts
 *   DVM_BENCH_CHAOS_SCENARIOS=stale-replay,crash  DVM_BENCH_CHAOS_DVMS=3  DVM_BENCH_CHAOS_PVCS=2  npx tsx bench/chaos.ts
 *   DVM_BENCH_CHAOS_SCENARIOS=throttle-bursts,api-429,invoke-throttle  npx tsx bench/chaos.ts   (the throttling bursts)
 *   DVM_BENCH_CHAOS_SCENARIOS=quiesce  npx tsx bench/chaos.ts   (spec.quiesce under crashes, duplicates, stale reads; the baselines run MTC's quiesce)
 */
import { pathToFileURL } from "node:url";
import {
  compareScenario,
  comparisonTable,
  describeReport,
  FAULT_DESCRIPTIONS,
  Observatory,
  runScenario,
  SCENARIOS,
  type ScenarioReport,
  scenarioNamed,
} from "../test/chaos/harness";
import { envNumber, externalDynamoEndpoint, startTwoPlanes } from "./env";

export interface ChaosBenchOptions {
  /** Scenario names; default every scenario, or DVM_BENCH_CHAOS_SCENARIOS (comma-separated). */
  scenarios?: string[];
  /** DVMs per target and scenario. Default 3, or DVM_BENCH_CHAOS_DVMS. */
  dvms?: number;
  /** PVCs per DVM. Default 2, or DVM_BENCH_CHAOS_PVCS. */
  pvcs?: number;
  /** Bound after which an unfinished migration of ours counts as stuck. Default 180 s. */
  timeoutMs?: number;
  /** The same for the baseline, which livelocks under some faults. Default 60 s. */
  baselineTimeoutMs?: number;
  log?: (line: string) => void;
}

export interface ChaosBenchResult {
  dvms: number;
  pvcs: number;
  reports: ScenarioReport[];
  /** The comparison table, Markdown. */
  table: string[];
  /** What each fault injects. */
  faults: Record<string, string>;
}

export async function runChaosBench(options: ChaosBenchOptions = {}): Promise<ChaosBenchResult> {
  const log = options.log ?? ((line: string) => console.log(line));
  const names =
    options.scenarios ??
    process.env.DVM_BENCH_CHAOS_SCENARIOS?.split(",")
      .map((s) => s.trim())
      .filter(Boolean) ??
    SCENARIOS.map((s) => s.name);
  const scenarios = names.map(scenarioNamed);
  const dvms = options.dvms ?? envNumber("DVM_BENCH_CHAOS_DVMS", 3);
  const pvcs = options.pvcs ?? envNumber("DVM_BENCH_CHAOS_PVCS", 2);
  const external = externalDynamoEndpoint();
  log(
    `chaos bench: ${scenarios.length} scenarios, ${dvms} DVMs of ${pvcs} PVCs per target; starting two control planes and ${external ? external : "DynamoDB Local"}`,
  );
  const env = await startTwoPlanes(log);
  const observatory = await new Observatory({ host: env.host.kubeConfig, destination: env.destination.kubeConfig }).start();
  const reports: ScenarioReport[] = [];
  try {
    // Unmeasured: JIT, connections and the API servers' caches warm up on one small migration each.
    await runScenario({ env, observatory, scenario: scenarioNamed("none"), dvms: 1, pvcs: 1 });
    for (const scenario of scenarios) {
      const report = await compareScenario({
        env,
        observatory,
        scenario,
        dvms,
        pvcs,
        seed: 1,
        timeoutMs: options.timeoutMs ?? 180_000,
        baselineTimeoutMs: options.baselineTimeoutMs ?? 60_000,
        log: (line) => log(`  ${line}`),
      });
      reports.push(report);
      for (const line of describeReport(report)) log(`  ${line}`);
    }
  } finally {
    await observatory.stop();
    await env.stop();
  }
  const table = comparisonTable(reports);
  log("");
  for (const line of table) log(line);
  const faults = Object.fromEntries(scenarios.flatMap((s) => s.faults).map((f) => [f, FAULT_DESCRIPTIONS[f]]));
  return { dvms, pvcs, reports, table, faults };
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true";
  runChaosBench().then(
    () => process.exit(0),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}
