/**
 * Scale benchmark: many concurrent DVMs through the real watch relay and our runner (one process,
 * started as a child so its memory is its own, bundled with the deployment's esbuild options and run
 * by plain node, so no TypeScript loader sits in it), on two control planes with kwok and DynamoDB
 * Local started here. Real delays: nothing is compressed (wait phases are polled every 3 s, as in production).
 * Reports phase transitions per second, the relay+runner process's memory (sampled every second),
 * DynamoDB requests per phase transition (counted by client middleware in that process), and checks
 * that no phase ran twice and no object was created twice.
 *
 *   npx tsx bench/scale.ts
 *   DVM_BENCH_SCALE_DVMS=200 DVM_BENCH_SCALE_PVCS=10 DVM_BENCH_SCALE_CONCURRENCY=16 npx tsx bench/scale.ts
 */
import { fork } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { type BuildOptions, build } from "esbuild";
import { type ChaosEnvironment, createMigrations, distribution, Observatory, prepareMigrations } from "../test/chaos/harness";
import { BaselineController } from "../test/chaos/harness/baseline";
import type { DvmHistory } from "../test/chaos/harness/observatory";
import { seededRandom } from "../test/chaos/harness/random";
import type { FromRelayHost, RelayHostConfig, RelayHostFinal, RelayHostSample, ToRelayHost } from "../test/chaos/harness/relayHost";
import { type Distribution, summarizeRepeats, Tally, transitionOverhead } from "../test/chaos/harness/tally";
import { envNumber, externalDynamoEndpoint, startTwoPlanes } from "./env";

export interface ScaleBenchOptions {
  /** Concurrent DVMs. Default 200, or DVM_BENCH_SCALE_DVMS. */
  dvms?: number;
  /** PVCs per DVM. Default 10, or DVM_BENCH_SCALE_PVCS. */
  pvcs?: number;
  /** The relay's forwards in flight. Default the relay's (16), or DVM_BENCH_SCALE_CONCURRENCY. */
  concurrency?: number;
  /** Give up on migrations not Completed after this long. Default 30 min. */
  timeoutMs?: number;
  /** Run the cached baseline after ours. Default true (DVM_BENCH_SCALE_BASELINE=0: no). */
  baseline?: boolean;
  log?: (line: string) => void;
}

export interface ScaleBenchResult {
  dvms: number;
  pvcs: number;
  concurrency: number | undefined;
  completed: number;
  /** From the first DVM created to the last one Completed. */
  wallSeconds: number;
  /** Namespaces, PVCs and DVMs created before the clock starts. */
  setupSeconds: number;
  /** Phases completed (ledger completions, i.e. "advanced" invocations). */
  transitions: number;
  transitionsPerSecond: number;
  /** Best 10 s window, from the status.phase changes the DVM watch saw. */
  peakTransitionsPerSecond: number;
  timeToCompleteSeconds: Distribution;
  memory: { idleRssMiB: number; peakRssMiB: number; meanRssMiB: number; peakHeapUsedMiB: number; samples: number; peakLiveDvms: number };
  ledger: { writesPerTransition: number; requestsPerTransition: number; byCommand: Record<string, number> };
  invocations: Record<string, number>;
  invocationsPerTransition: number;
  /** Per-invocation overhead of advancing invocations (wall time minus phase body time), ms. */
  overheadMs: Distribution;
  repeats: number;
  createdObjects: number;
  createdTwice: number;
  /** Phases where the DVMs' status stayed longest (mean over DVMs), from the DVM watch. */
  slowestPhases: Array<{ phase: string; meanSeconds: number }>;
  /** The cached baseline on the same control planes, after ours (absent when DVM_BENCH_SCALE_BASELINE=0). */
  baseline?: BaselineScaleResult;
}

export interface BaselineScaleResult {
  completed: number;
  wallSeconds: number;
  transitions: number;
  transitionsPerSecond: number;
  peakTransitionsPerSecond: number;
  timeToCompleteSeconds: Distribution;
  repeats: number;
  staleReads: number;
  createdObjects: number;
  createdTwice: number;
  invocationsPerTransition: number;
  overheadMs: Distribution;
}

/** Phase changes the watch saw, as the best 10 s window's rate. */
function peakRate(history: DvmHistory, uids: readonly string[], started: number): number {
  const windows = new Map<number, number>();
  for (const uid of uids)
    for (const p of history.positions(uid).slice(1)) {
      const w = Math.floor((p.at - started) / 10_000);
      windows.set(w, (windows.get(w) ?? 0) + 1);
    }
  return Math.max(0, ...windows.values()) / 10;
}

/**
 * The cached baseline (test/chaos/harness/baseline.ts) on the same control planes: one replica, one
 * worker, real delays, DVMs in a namespace of its own.
 */
async function runBaselineScale(
  env: ChaosEnvironment,
  observatory: Observatory,
  options: { dvms: number; pvcs: number; timeoutMs: number; log: (line: string) => void },
): Promise<BaselineScaleResult> {
  const { dvms, pvcs, log } = options;
  const prepared = await prepareMigrations(env, { prefix: "scale-baseline", count: dvms, pvcs });
  const tally = new Tally();
  const baseline = new BaselineController("baseline", tally);
  const controller = baseline.controllers({
    kubeConfig: env.host.kubeConfig,
    namespace: prepared.namespace,
    replicas: 1,
    duplicates: false,
    random: seededRandom(5),
  });
  controller.start();
  const history = observatory.dvms;
  try {
    const started = Date.now();
    const migrations = await createMigrations(env, prepared, 16);
    const uids = migrations.map((m) => m.uid);
    const doneCount = () => uids.filter((u) => history.completedAt(u) !== undefined).length;
    const progress = setInterval(() => log(`  baseline +${((Date.now() - started) / 1000).toFixed(0)} s: ${doneCount()}/${dvms} completed`), 15_000);
    await history.waitUntil(() => doneCount() === uids.length, options.timeoutMs);
    clearInterval(progress);
    const completedAts = uids.map((u) => history.completedAt(u)).filter((t): t is number => t !== undefined);
    const wallSeconds = ((completedAts.length ? Math.max(...completedAts) : Date.now()) - started) / 1000;
    const { bodies, invocations } = tally.forDvms(new Set(uids));
    const repeats = summarizeRepeats(bodies);
    const transitions = new Set(bodies.filter((b) => b.outcome === "advance" || b.outcome === "fail").map((b) => `${b.uid}/${b.phase}`)).size;
    const creations = observatory.creations.forDvms(uids);
    return {
      completed: completedAts.length,
      wallSeconds,
      transitions,
      transitionsPerSecond: transitions / wallSeconds,
      peakTransitionsPerSecond: peakRate(history, uids, started),
      timeToCompleteSeconds: distribution(completedAts.map((t) => (t - started) / 1000)),
      repeats: repeats.repeats + repeats.waitRepeats,
      staleReads: invocations.filter((i) => i.stale).length,
      createdObjects: creations.created,
      createdTwice: creations.repeated.length,
      invocationsPerTransition: invocations.length / Math.max(1, transitions),
      overheadMs: transitionOverhead(invocations),
    };
  } finally {
    await controller.stop();
  }
}

const RELAY_HOST = fileURLToPath(new URL("../test/chaos/harness/relayHost.ts", import.meta.url));
const REPO_ROOT = fileURLToPath(new URL("../", import.meta.url));
const require = createRequire(import.meta.url);

/** relayHost.ts as one CommonJS file, built the way the functions are packaged (infra/deploy/serverless/esbuild.cjs). */
async function bundleRelayHost(outdir: string): Promise<string> {
  const { esbuildOptions } = require("../infra/deploy/serverless/esbuild.cjs") as { esbuildOptions: BuildOptions };
  await build({ ...esbuildOptions, entryPoints: [RELAY_HOST], outdir, absWorkingDir: REPO_ROOT, logLevel: "error" });
  return join(outdir, "relayHost.cjs");
}
const MiB = 1024 * 1024;
const WRITES = new Set(["UpdateItemCommand", "PutItemCommand", "DeleteItemCommand", "TransactWriteItemsCommand", "BatchWriteItemCommand"]);

export async function runScaleBench(options: ScaleBenchOptions = {}): Promise<ScaleBenchResult> {
  const log = options.log ?? ((line: string) => console.log(line));
  const dvms = options.dvms ?? envNumber("DVM_BENCH_SCALE_DVMS", 200);
  const pvcs = options.pvcs ?? envNumber("DVM_BENCH_SCALE_PVCS", 10);
  const concurrency = options.concurrency ?? (process.env.DVM_BENCH_SCALE_CONCURRENCY ? envNumber("DVM_BENCH_SCALE_CONCURRENCY", 16) : undefined);
  const timeoutMs = options.timeoutMs ?? 30 * 60_000;
  const external = externalDynamoEndpoint();
  log(
    `scale bench: ${dvms} DVMs of ${pvcs} PVCs, relay concurrency ${concurrency ?? "default (16)"}; starting two control planes and ${external ?? "DynamoDB Local"}`,
  );
  const env = await startTwoPlanes(log);
  const observatory = await new Observatory({ host: env.host.kubeConfig, destination: env.destination.kubeConfig }).start();
  const bundleDir = mkdtempSync(join(tmpdir(), "dvm-scale-relay-"));
  const child = fork(await bundleRelayHost(bundleDir), [], {
    cwd: REPO_ROOT,
    execArgv: [],
    env: { ...process.env, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true" },
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const samples: RelayHostSample[] = [];
  let final: RelayHostFinal | undefined;
  let onReady!: () => void;
  let onFinal!: () => void;
  const ready = new Promise<void>((resolve) => (onReady = resolve));
  const finished = new Promise<void>((resolve) => (onFinal = resolve));
  child.on("message", (message: FromRelayHost) => {
    if (message.type === "ready") onReady();
    else if (message.type === "sample") samples.push(message.sample);
    else if (message.type === "final") {
      final = message.final;
      onFinal();
    }
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  // A failed send (the process died) shows as its exit; nothing else to do with the error.
  child.on("error", () => undefined);
  try {
    const setupStart = Date.now();
    const prepared = await prepareMigrations(env, { prefix: "scale", count: dvms, pvcs });
    const config: RelayHostConfig = {
      hostKubeconfigPath: env.host.kubeconfigPath,
      destinationKubeconfigPath: env.destination.kubeconfigPath,
      namespace: prepared.namespace,
      dynamo: env.dynamo,
      tableName: env.tableName,
      ...(concurrency ? { concurrency } : {}),
      sampleMs: 1_000,
    };
    child.send({ type: "start", config } satisfies ToRelayHost, () => undefined);
    await Promise.race([ready, exited.then(() => Promise.reject(new Error("the relay host exited before it was ready")))]);
    const setupSeconds = (Date.now() - setupStart) / 1000;
    log(`  set up ${dvms} source namespaces and ${dvms * pvcs} PVCs in ${setupSeconds.toFixed(0)} s; creating the DVMs`);

    const started = Date.now();
    const migrations = await createMigrations(env, prepared, 16);
    const history = observatory.dvms;
    const doneCount = () => migrations.filter((m) => history.completedAt(m.uid) !== undefined).length;
    const progress = setInterval(() => {
      const last = samples.at(-1);
      log(
        `  +${((Date.now() - started) / 1000).toFixed(0)} s: ${doneCount()}/${dvms} completed, relay RSS ${last ? (last.rssBytes / MiB).toFixed(0) : "?"} MiB, ${last?.invocations.advanced ?? 0} transitions`,
      );
    }, 15_000);
    await history.waitUntil(() => doneCount() === migrations.length, timeoutMs);
    clearInterval(progress);
    const completedAts = migrations.map((m) => history.completedAt(m.uid)).filter((t): t is number => t !== undefined);
    const end = completedAts.length ? Math.max(...completedAts) : Date.now();

    child.send({ type: "stop" } satisfies ToRelayHost, () => undefined);
    await Promise.race([finished, exited]);
    if (!final) throw new Error("the relay host ended without its final report");

    const wallSeconds = (end - started) / 1000;
    const transitions = final.invocations.advanced ?? 0;
    // Phase changes the watch saw, in 10 s windows.
    const changes = migrations.flatMap((m) =>
      history
        .positions(m.uid)
        .slice(1)
        .map((p) => p.at),
    );
    const windows = new Map<number, number>();
    for (const at of changes) windows.set(Math.floor((at - started) / 10_000), (windows.get(Math.floor((at - started) / 10_000)) ?? 0) + 1);
    const during = samples.filter((s) => s.at >= started);
    const sent = final.dynamo.sent;
    const requests = Object.values(sent).reduce((a, b) => a + b, 0);
    const writes = Object.entries(sent).reduce((a, [name, n]) => a + (WRITES.has(name) ? n : 0), 0);
    const invocationCount = Object.values(final.invocations).reduce((a, b) => a + b, 0);
    const creations = observatory.creations.forDvms(migrations.map((m) => m.uid));
    const inPhase = new Map<string, number[]>();
    for (const m of migrations) {
      const positions = history.positions(m.uid);
      for (let i = 0; i + 1 < positions.length; i++) {
        const phase = positions[i]!.phase ?? "(no status)";
        inPhase.set(phase, [...(inPhase.get(phase) ?? []), (positions[i + 1]!.at - positions[i]!.at) / 1000]);
      }
    }
    const slowestPhases = [...inPhase]
      .map(([phase, seconds]) => ({ phase, meanSeconds: seconds.reduce((a, b) => a + b, 0) / seconds.length }))
      .sort((a, b) => b.meanSeconds - a.meanSeconds)
      .slice(0, 4);
    const result: ScaleBenchResult = {
      dvms,
      pvcs,
      concurrency,
      completed: completedAts.length,
      wallSeconds,
      setupSeconds,
      transitions,
      transitionsPerSecond: transitions / wallSeconds,
      peakTransitionsPerSecond: Math.max(0, ...windows.values()) / 10,
      timeToCompleteSeconds: distribution(
        migrations.flatMap((m) => (history.completedAt(m.uid) !== undefined ? [(history.completedAt(m.uid)! - started) / 1000] : [])),
      ),
      memory: {
        idleRssMiB: (samples[0]?.rssBytes ?? 0) / MiB,
        peakRssMiB: Math.max(0, ...during.map((s) => s.rssBytes)) / MiB,
        meanRssMiB: during.reduce((a, s) => a + s.rssBytes, 0) / Math.max(1, during.length) / MiB,
        peakHeapUsedMiB: Math.max(0, ...during.map((s) => s.heapUsedBytes)) / MiB,
        samples: during.length,
        peakLiveDvms: Math.max(0, ...during.map((s) => s.relay.liveDvms)),
      },
      ledger: { writesPerTransition: writes / Math.max(1, transitions), requestsPerTransition: requests / Math.max(1, transitions), byCommand: sent },
      invocations: final.invocations,
      invocationsPerTransition: invocationCount / Math.max(1, transitions),
      overheadMs: final.overheadMs,
      repeats: final.repeats.repeats + final.repeats.waitRepeats,
      createdObjects: creations.created,
      createdTwice: creations.repeated.length,
      slowestPhases,
    };
    for (const line of describeScale(result)) log(line);
    if (options.baseline ?? process.env.DVM_BENCH_SCALE_BASELINE !== "0") {
      log(`  the cached baseline: ${dvms} DVMs of ${pvcs} PVCs on the same control planes`);
      result.baseline = await runBaselineScale(env, observatory, { dvms, pvcs, timeoutMs, log });
      const b = result.baseline;
      log(
        `  baseline: ${b.completed}/${dvms} completed in ${b.wallSeconds.toFixed(0)} s, ${b.transitions} transitions, ${b.transitionsPerSecond.toFixed(1)}/s (best 10 s ${b.peakTransitionsPerSecond.toFixed(1)}/s), repeats ${b.repeats} (${b.staleReads} stale reads), created twice ${b.createdTwice}; ours/baseline throughput ${(result.transitionsPerSecond / Math.max(1e-9, b.transitionsPerSecond)).toFixed(2)}`,
      );
    }
    return result;
  } finally {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill("SIGTERM");
      await exited;
    }
    rmSync(bundleDir, { recursive: true, force: true });
    await observatory.stop();
    await env.stop();
  }
}

export function describeScale(r: ScaleBenchResult): string[] {
  const f = (n: number, d = 1) => n.toFixed(d);
  return [
    `scale: ${r.dvms} DVMs x ${r.pvcs} PVCs (${r.dvms * r.pvcs} volumes), relay concurrency ${r.concurrency ?? 16}: ${r.completed}/${r.dvms} completed in ${f(r.wallSeconds, 0)} s (setup ${f(r.setupSeconds, 0)} s not counted)`,
    `  phase transitions: ${r.transitions}, ${f(r.transitionsPerSecond)}/s over the run, best 10 s window ${f(r.peakTransitionsPerSecond)}/s; time to complete p50 ${f(r.timeToCompleteSeconds.p50, 0)} s, max ${f(r.timeToCompleteSeconds.max, 0)} s`,
    `  relay+runner process: RSS idle ${f(r.memory.idleRssMiB, 0)} MiB, mean ${f(r.memory.meanRssMiB, 0)} MiB, peak ${f(r.memory.peakRssMiB, 0)} MiB; peak heap used ${f(r.memory.peakHeapUsedMiB, 0)} MiB (${r.memory.samples} samples, up to ${r.memory.peakLiveDvms} live DVMs)`,
    `  DynamoDB per phase transition: ${f(r.ledger.writesPerTransition, 2)} writes, ${f(r.ledger.requestsPerTransition, 2)} requests ${JSON.stringify(r.ledger.byCommand)}`,
    `  invocations: ${f(r.invocationsPerTransition, 2)} per transition ${JSON.stringify(r.invocations)}; overhead per advancing invocation p50 ${f(r.overheadMs.p50)} ms, p99 ${f(r.overheadMs.p99)} ms`,
    `  repeats ${r.repeats}; objects created ${r.createdObjects}, created twice ${r.createdTwice}`,
    `  longest phases (mean time at the phase): ${r.slowestPhases.map((p) => `${p.phase} ${p.meanSeconds.toFixed(0)} s`).join(", ")}`,
  ];
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true";
  runScaleBench().then(
    () => process.exit(0),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}
