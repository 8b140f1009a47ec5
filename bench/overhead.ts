/**
 * Transition overhead against its floor, side by side in one run. Ours: the real phase runner in this
 * process (real store, ledger, cluster resolver and bodies) driving migrations of the quiet scenario (no
 * faults, one delivery loop per DVM, requeue delays capped at 200 ms as in the chaos harness), one DVM at
 * a time; the overhead of an invocation that advanced a DVM is its wall time minus the time spent in the
 * phase body. The floor (bench/floor.ts): the four requests a transition needs, in a row, with no logic,
 * against the same API server and DynamoDB, on a DVM whose status is a finished migration's (so both
 * sides read and write objects of one size), one sample right after each of our advancing invocations
 * (paired: both see the machine as the migration left it, the API server still busy with what the body
 * created, not the idle machine after the migration). It also counts the requests each advancing
 * invocation made outside its body.
 *
 *   npx tsx bench/overhead.ts                                   # 200 transitions
 *   DVM_BENCH_OVERHEAD_TRANSITIONS=60 npx tsx bench/overhead.ts
 */

import { AsyncLocalStorage } from "node:async_hooks";
import { subscribe, unsubscribe } from "node:diagnostics_channel";
import type { ClientRequest } from "node:http";
import { performance } from "node:perf_hooks";
import { pathToFileURL } from "node:url";
import type { ReconcileRequest } from "../src/contracts/request";
import { ITINERARIES } from "../src/dvm/itinerary";
import { KubeDvmStore } from "../src/kube/dvmStore";
import { distribution, prepareMigrations, startEnvironment } from "../test/chaos/harness";
import { createMigrations, type StartedMigration } from "../test/chaos/harness/fixture";
import { buildOurRunner, type OurRunner } from "../test/chaos/harness/ourRunner";
import { sleep } from "../test/chaos/harness/random";
import { envNumber, externalDynamoEndpoint } from "./env";
import { Floor, type FloorSample } from "./floor";

export interface OverheadBenchOptions {
  log?: (line: string) => void;
  /** Advancing invocations of ours to measure (and as many floor samples). Default 200, or DVM_BENCH_OVERHEAD_TRANSITIONS. */
  transitions?: number;
}

export interface Percentiles {
  p50: number;
  p99: number;
  max: number;
  count: number;
}

export interface OverheadResult {
  /** Advancing invocations measured. */
  transitions: number;
  migrations: number;
  pvcsPerMigration: number;
  /** Our overhead per advancing invocation: wall time minus phase body time, ms. */
  oursMs: Percentiles;
  /** The four requests in a row, ms. */
  floorMs: Percentiles;
  /** p50 of each of the floor's requests, ms. */
  floorRequestsP50Ms: { get: number; claim: number; complete: number; patch: number };
  /** ours p50 / floor p50, ours p99 / floor p99. */
  ratioP50: number;
  ratioP99: number;
  /** Requests per advancing invocation made outside the phase body, by kind ("GET dvm", "DynamoDB UpdateItem", ...). */
  requestsPerTransition: Record<string, number>;
}

const PVCS = 2;
const REQUEUE_CAP_MS = 200;
/** Advancing invocations one migration of the quiet scenario makes (every phase but Completed). */
const TRANSITIONS_PER_MIGRATION = ITINERARIES.VolumeMigration.length - 1;

interface Scope {
  inBody: boolean;
  requests: string[];
}

/** Which invocation a request belongs to, and whether its phase body made it. */
const scopes = new AsyncLocalStorage<Scope>();

function requestKind(request: ClientRequest): string {
  const target = request.getHeader("x-amz-target");
  if (typeof target === "string") return `DynamoDB ${target.split(".").pop()}`;
  const path = request.path.split("?")[0] ?? "";
  const resource = path.includes("/directvolumemigrations/") ? (path.endsWith("/status") ? "dvm status" : "dvm") : (path.split("/").at(-2) ?? path);
  return `${request.method} ${resource}`;
}

const onRequest = (message: unknown) => {
  const scope = scopes.getStore();
  if (scope && !scope.inBody) scope.requests.push(requestKind((message as { request: ClientRequest }).request));
};

interface Driven {
  overheadMs: number[];
  requests: string[][];
  /** Taken right after each advancing invocation (none during the warm-up). */
  afterEach?: () => Promise<void>;
}

/** Drives one migration to Completed, as the relay would: each request names the phase the last result reported. */
async function drive(runner: OurRunner, migration: StartedMigration, deadline: number, into: Driven): Promise<void> {
  let request: ReconcileRequest = migration.request;
  while (Date.now() < deadline) {
    const scope: Scope = { inBody: false, requests: [] };
    const started = performance.now();
    const { result, bodyMs } = await scopes.run(scope, () => runner.invoke(request));
    const wallMs = performance.now() - started;
    // The next request names the phase the result reported, as the relay's does.
    if (result.kind === "advanced" || result.kind === "duplicate") request = { ...request, phase: result.next };
    switch (result.kind) {
      case "advanced":
        into.overheadMs.push(Math.max(0, wallMs - bodyMs));
        into.requests.push(scope.requests);
        await into.afterEach?.();
        break;
      case "duplicate":
        break;
      case "finished":
      case "gone":
      case "stopped":
        return;
      case "waiting":
        await sleep(Math.min(result.requeueAfterMs, REQUEUE_CAP_MS));
        break;
      case "busy":
      case "retry":
        await sleep(Math.min(result.retryAfterMs, REQUEUE_CAP_MS));
        break;
    }
  }
  throw new Error(`overhead bench: ${migration.namespace}/${migration.name} did not complete in time`);
}

function percentiles(values: readonly number[]): Percentiles {
  return distribution(values);
}

export async function runOverheadBench(options: OverheadBenchOptions = {}): Promise<OverheadResult> {
  const log = options.log ?? ((line: string) => console.log(line));
  const wanted = options.transitions ?? envNumber("DVM_BENCH_OVERHEAD_TRANSITIONS", 200);
  const migrations = Math.max(1, Math.ceil(wanted / TRANSITIONS_PER_MIGRATION));
  const external = externalDynamoEndpoint();
  log(
    `overhead bench: ${migrations} migrations of ${PVCS} PVCs one after another (${TRANSITIONS_PER_MIGRATION} transitions each), with a floor sample right after each advancing invocation; starting two control planes and ${external ?? "DynamoDB Local"}`,
  );
  const env = await startEnvironment({
    host: "start",
    destination: "start",
    dynamo: external ? { endpoint: external, region: process.env.AWS_REGION ?? "us-east-1" } : "start",
    dynamoJvmArgs: [],
  });
  const dynamo = env.dynamoClient();
  const floorDynamo = env.dynamoClient();
  let floor: Floor | undefined;
  subscribe("http.client.request.start", onRequest);
  try {
    // One migration more than measured (the warm-up), and one DVM nobody drives: the floor's.
    const prepared = await prepareMigrations(env, { prefix: `cx-overhead-${Date.now().toString(36)}`, count: migrations + 2, pvcs: PVCS });
    const started = await createMigrations(env, prepared);
    const floorDvm = started.pop()!;
    floor = await Floor.start({
      kubeConfig: env.host.kubeConfig,
      namespace: floorDvm.namespace,
      name: floorDvm.name,
      dynamo: floorDynamo,
      tableName: env.tableName,
    });
    const runner = buildOurRunner({
      hostKubeConfig: env.host.kubeConfig,
      dynamo,
      tableName: env.tableName,
      leaseMs: 30_000,
      hooks: {
        enter: () => {
          const scope = scopes.getStore();
          if (scope) scope.inBody = true;
          return "";
        },
        exit: () => {
          const scope = scopes.getStore();
          if (scope) scope.inBody = false;
        },
      },
    });
    const deadline = Date.now() + 60_000 * (migrations + 1);

    // Unmeasured: JIT, connections and the API servers' caches warm up.
    await drive(runner, started[0]!, deadline, { overheadMs: [], requests: [] });
    // The floor's DVM gets the status the warm-up migration ended with: both sides move objects of one size.
    const warmed = await new KubeDvmStore(env.host.kubeConfig).get(started[0]!.namespace, started[0]!.name);
    await floor.useStatus(warmed?.status ?? {});
    for (let i = 0; i < 30; i++) await floor.sample();

    const floorSamples: FloorSample[] = [];
    const measuredFloor = floor;
    const ours: Driven = { overheadMs: [], requests: [], afterEach: async () => void floorSamples.push(await measuredFloor.sample()) };
    for (const [index, migration] of started.slice(1).entries()) {
      await drive(runner, migration, deadline, ours);
      log(`  migration ${index + 1}/${migrations}: ${ours.overheadMs.length} transitions measured`);
    }

    const oursMs = percentiles(ours.overheadMs);
    const floorMs = percentiles(floorSamples.map((s) => s.totalMs));
    const p50 = (pick: (s: FloorSample) => number) => percentiles(floorSamples.map(pick)).p50;
    const counts: Record<string, number> = {};
    for (const kinds of ours.requests) for (const kind of kinds) counts[kind] = (counts[kind] ?? 0) + 1;
    const requestsPerTransition = Object.fromEntries(
      Object.entries(counts)
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([kind, count]) => [kind, count / Math.max(1, ours.requests.length)]),
    );
    const result: OverheadResult = {
      transitions: ours.overheadMs.length,
      migrations,
      pvcsPerMigration: PVCS,
      oursMs,
      floorMs,
      floorRequestsP50Ms: { get: p50((s) => s.getMs), claim: p50((s) => s.claimMs), complete: p50((s) => s.completeMs), patch: p50((s) => s.patchMs) },
      ratioP50: oursMs.p50 / floorMs.p50,
      ratioP99: oursMs.p99 / floorMs.p99,
      requestsPerTransition,
    };
    for (const line of describeOverhead(result)) log(line);
    return result;
  } finally {
    unsubscribe("http.client.request.start", onRequest);
    floor?.close();
    dynamo.destroy();
    floorDynamo.destroy();
    await env.stop();
  }
}

export function describeOverhead(r: OverheadResult): string[] {
  const f = (n: number) => n.toFixed(1);
  const fr = r.floorRequestsP50Ms;
  return [
    `transition overhead, quiet scenario, ${r.transitions} advancing invocations (${r.migrations} migrations of ${r.pvcsPerMigration} PVCs, one at a time):`,
    `  ours:  p50 ${f(r.oursMs.p50)} ms, p99 ${f(r.oursMs.p99)} ms, max ${f(r.oursMs.max)} ms`,
    `  floor: p50 ${f(r.floorMs.p50)} ms, p99 ${f(r.floorMs.p99)} ms, max ${f(r.floorMs.max)} ms (GET ${f(fr.get)}, claim ${f(fr.claim)}, complete ${f(fr.complete)}, PATCH ${f(fr.patch)} ms p50)`,
    `  ours/floor: p50 ${r.ratioP50.toFixed(2)}x, p99 ${r.ratioP99.toFixed(2)}x`,
    `  requests per advancing invocation outside the body: ${Object.entries(r.requestsPerTransition)
      .map(([kind, n]) => `${kind} ${n.toFixed(2)}`)
      .join(", ")}`,
  ];
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true";
  runOverheadBench().then(
    () => process.exit(0),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}
