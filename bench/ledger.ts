/**
 * Ledger benchmark: claim + complete for N phases, one after another, against DynamoDB Local (started
 * here unless AWS_ENDPOINT_URL_DYNAMODB / AWS_ENDPOINT_URL points at a DynamoDB). Prints p50/p99 of
 * claim, complete and the pair, and counts DynamoDB requests per phase (the design says 2 writes).
 *
 *   npx tsx bench/ledger.ts [phases]
 */

import { execFileSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { pathToFileURL } from "node:url";
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { type DynamoLocal, dynamoLocalEmulatorDir, startDynamoLocal } from "../infra/dev/local/dynamoLocal";
import { ensureLedgerTable } from "../infra/dev/local/ledgerTable";
import { createLedgerClient, DynamoPhaseLedger } from "../src/aws/ledger";
import { EXECUTABLE_PHASES } from "../src/dvm/itinerary";
import { externalDynamoEndpoint } from "./env";

export interface LedgerBenchOptions {
  /** Measured phases. Default 1,000. */
  phases?: number;
  /** Unmeasured phases first, so the JIT and connections are warm. Default 100. */
  warmupPhases?: number;
  /** Where the lines go; default console.log. */
  log?: (line: string) => void;
}

export interface LatencySummary {
  p50: number;
  p99: number;
  mean: number;
  max: number;
}

export interface LedgerBenchResult {
  backend: string;
  phases: number;
  claimMs: LatencySummary;
  completeMs: LatencySummary;
  pairMs: LatencySummary;
  /** DynamoDB write requests (UpdateItem/PutItem/...) per phase, over the measured phases. */
  writesPerPhase: number;
  /** All DynamoDB requests per phase (reads included: there should be none). */
  requestsPerPhase: number;
  requestsByCommand: Record<string, number>;
}

const WRITE_COMMANDS = new Set(["UpdateItemCommand", "PutItemCommand", "DeleteItemCommand", "TransactWriteItemsCommand", "BatchWriteItemCommand"]);

export async function runLedgerBench(options: LedgerBenchOptions = {}): Promise<LedgerBenchResult> {
  const phases = options.phases ?? 1_000;
  const warmupPhases = options.warmupPhases ?? 100;
  const log = options.log ?? ((line: string) => console.log(line));
  const external = externalDynamoEndpoint();
  // A benchmark wants the optimising JIT, not the fast start-up the tests use.
  const local: DynamoLocal | undefined = external ? undefined : await startDynamoLocal({ jvmArgs: [] });
  try {
    const endpoint = external ?? local!.endpoint;
    const client = createLedgerClient({
      endpoint,
      region: process.env.AWS_REGION ?? "us-east-1",
      ...(local ? { credentials: { accessKeyId: "dvmbench", secretAccessKey: "dvmbench" } } : {}),
    });
    const requests = countRequests(client);
    const tableName = `dvm-ledger-bench-${randomUUID().slice(0, 8)}`;
    await ensureLedgerTable(client, tableName);
    const ledger = new DynamoPhaseLedger({ client, tableName });
    const run = randomUUID().slice(0, 8);

    const runPhase = async (i: number) => {
      // One DVM walks the whole phase list, then the next DVM starts: realistic keys and partitions.
      const key = {
        uid: `bench-${run}-${Math.floor(i / EXECUTABLE_PHASES.length)}`,
        phase: EXECUTABLE_PHASES[i % EXECUTABLE_PHASES.length]!,
        generation: 1,
      };
      const t0 = performance.now();
      const result = await ledger.claim(key, { leaseMs: 60_000 });
      const t1 = performance.now();
      if (result.kind !== "claimed") throw new Error(`bench: ${key.uid}/${key.phase} was ${result.kind}`);
      await ledger.complete(result.claim, { result: "advanced", nextPhase: "Completed" });
      const t2 = performance.now();
      return { claim: t1 - t0, complete: t2 - t1, pair: t2 - t0 };
    };

    for (let i = 0; i < warmupPhases; i++) await runPhase(phases + i);
    requests.reset();
    const samples = [];
    for (let i = 0; i < phases; i++) samples.push(await runPhase(i));
    const byCommand = requests.snapshot();

    const total = Object.values(byCommand).reduce((a, b) => a + b, 0);
    const writes = Object.entries(byCommand).reduce((a, [name, count]) => a + (WRITE_COMMANDS.has(name) ? count : 0), 0);
    const result: LedgerBenchResult = {
      backend: local ? `DynamoDB Local ${dynamoLocalVersion()} (in-memory)` : endpoint,
      phases,
      claimMs: summarize(samples.map((s) => s.claim)),
      completeMs: summarize(samples.map((s) => s.complete)),
      pairMs: summarize(samples.map((s) => s.pair)),
      writesPerPhase: writes / phases,
      requestsPerPhase: total / phases,
      requestsByCommand: byCommand,
    };
    log(`ledger bench: ${phases} phases (claim + complete, sequential) on ${result.backend}`);
    for (const [name, s] of [
      ["claim", result.claimMs],
      ["complete", result.completeMs],
      ["claim+complete", result.pairMs],
    ] as const) {
      log(`  ${name.padEnd(15)} p50 ${s.p50.toFixed(2)} ms   p99 ${s.p99.toFixed(2)} ms   mean ${s.mean.toFixed(2)} ms   max ${s.max.toFixed(2)} ms`);
    }
    log(`  DynamoDB requests per phase: ${result.requestsPerPhase} (writes ${result.writesPerPhase}) ${JSON.stringify(byCommand)}`);
    client.destroy();
    return result;
  } finally {
    await local?.stop();
  }
}

/** Counts every request the client sends, by command, with a middleware (so nothing is estimated). */
function countRequests(client: DynamoDBClient) {
  let counts: Record<string, number> = {};
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const name = context.commandName ?? "unknown";
      counts[name] = (counts[name] ?? 0) + 1;
      return next(args);
    },
    { step: "initialize", name: "dvmBenchRequestCounter" },
  );
  return { reset: () => void (counts = {}), snapshot: () => ({ ...counts }) };
}

/** Nearest-rank percentiles. */
/**
 * The version of the DynamoDB Local that ran: the one its jar records (Maven's pom.properties inside
 * it; the jar is a zip, unzip reads the one entry).
 */
function dynamoLocalVersion(): string {
  const jar = join(dynamoLocalEmulatorDir(), "DynamoDBLocal.jar");
  try {
    const properties = execFileSync("unzip", ["-p", jar, "META-INF/maven/com/amazonaws/DynamoDBLocal/pom.properties"], { encoding: "utf8" });
    const version = /^version=\s*(\S+)/m.exec(properties)?.[1];
    return version ?? `(no version in ${jar}'s pom.properties)`;
  } catch (error) {
    return `(version unreadable from ${jar}: ${error instanceof Error ? error.message.split("\n")[0] : String(error)})`;
  }
}

export function summarize(values: number[]): LatencySummary {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (p: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))] ?? 0;
  return {
    p50: at(0.5),
    p99: at(0.99),
    mean: sorted.reduce((a, b) => a + b, 0) / Math.max(1, sorted.length),
    max: sorted[sorted.length - 1] ?? 0,
  };
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const phases = process.argv[2] ? Number(process.argv[2]) : undefined;
  runLedgerBench(phases ? { phases } : {}).catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  });
}
