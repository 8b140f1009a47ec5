/**
 * The AWS bill per 1,000 migrations of the seed's shape, from what one such migration measured here
 * (bench/seed.ts): invocations, their durations, the phase function's memory size (serverless.yml) and
 * the DynamoDB requests counted by client middleware; next to the same workload's state transitions on
 * Step Functions Standard. Pure arithmetic: the inputs and prices are printed with the result.
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

/**
 * Public on-demand list prices for us-east-1 as known to this file's author (AWS's pricing pages for
 * Lambda, DynamoDB on-demand and Step Functions, as of 2025; DynamoDB's after its November 2024 cut).
 * Not fetched: this machine has no route to the internet. Free tiers are left out.
 */
export const PRICES = {
  asOf: "2025 (AWS pricing pages, us-east-1, on-demand; not re-checked from this machine)",
  lambdaPerMillionRequests: 0.2,
  lambdaPerGbSecondX86: 0.0000166667,
  dynamoPerMillionWriteUnits: 0.625,
  dynamoPerMillionReadUnits: 0.125,
  stepFunctionsStandardPerThousandTransitions: 0.025,
} as const;

const WRITE_COMMANDS = new Set(["UpdateItemCommand", "PutItemCommand", "DeleteItemCommand"]);

/** The phase functions' memorySize (custom.phaseFunction in serverless.yml): the one source of it. */
export function phaseFunctionMemoryMb(): number {
  const yml = readFileSync(fileURLToPath(new URL("../serverless.yml", import.meta.url)), "utf8");
  const match = /phaseFunction:[\s\S]*?memorySize:\s*(\d+)/.exec(yml);
  if (!match) throw new Error("serverless.yml: custom.phaseFunction.memorySize not found");
  return Number(match[1]);
}

export interface MigrationMeasurement {
  invocations: number;
  /** Invocations that only found a wait phase not done yet (each a poll). */
  waitingInvocations: number;
  /** Sum of the invocations' wall times, ms. */
  invocationMs: number;
  dynamoRequests: Record<string, number>;
}

export interface CostEstimate {
  lines: string[];
  perThousand: { lambda: number; dynamo: number; total: number; stepFunctionsTransitions: number };
}

const usd = (n: number) => `$${n < 0.01 ? n.toFixed(4) : n.toFixed(2)}`;

export function costPerThousand(m: MigrationMeasurement, memoryMb = phaseFunctionMemoryMb()): CostEstimate {
  const writes = Object.entries(m.dynamoRequests).reduce((s, [k, v]) => s + (WRITE_COMMANDS.has(k) ? v : 0), 0);
  const reads = Object.entries(m.dynamoRequests).reduce((s, [k, v]) => s + (WRITE_COMMANDS.has(k) ? 0 : v), 0);
  const gbSeconds = (m.invocationMs / 1000) * (memoryMb / 1024);
  const n = 1000;
  const lambdaRequests = (n * m.invocations * PRICES.lambdaPerMillionRequests) / 1e6;
  const lambdaCompute = n * gbSeconds * PRICES.lambdaPerGbSecondX86;
  const dynamo = (n * writes * PRICES.dynamoPerMillionWriteUnits + n * reads * PRICES.dynamoPerMillionReadUnits) / 1e6;
  // Step Functions Standard driving the same phases: per invocation a Task state and a Choice on its
  // result, plus a Wait state for each poll, and the start and end of the execution.
  const transitions = 2 * m.invocations + m.waitingInvocations + 2;
  const stepFunctions = (n * transitions * PRICES.stepFunctionsStandardPerThousandTransitions) / 1000;
  const lambda = lambdaRequests + lambdaCompute;
  const lines = [
    `Measured for one migration (ours): ${m.invocations} invocations (${m.waitingInvocations} of them polls of a wait phase), ${(m.invocationMs / 1000).toFixed(2)} s of invocation time in all, ${writes} DynamoDB writes and ${reads} reads (${Object.entries(
      m.dynamoRequests,
    )
      .map(([k, v]) => `${k} ${v}`)
      .join(", ")}); phase function memory ${memoryMb} MB (serverless.yml), so ${gbSeconds.toFixed(3)} GB-s.`,
    "",
    "| per 1,000 migrations | quantity | price | cost |",
    "|---|---|---|---|",
    `| Lambda requests | ${n * m.invocations} | $${PRICES.lambdaPerMillionRequests} per million | ${usd(lambdaRequests)} |`,
    `| Lambda compute (x86) | ${(n * gbSeconds).toFixed(1)} GB-s | $${PRICES.lambdaPerGbSecondX86} per GB-s | ${usd(lambdaCompute)} |`,
    `| DynamoDB on-demand writes (1 WRU each: ledger items under 1 KB assumed) | ${n * writes} | $${PRICES.dynamoPerMillionWriteUnits} per million WRU | ${usd((n * writes * PRICES.dynamoPerMillionWriteUnits) / 1e6)} |`,
    `| DynamoDB on-demand reads (1 RRU each assumed) | ${n * reads} | $${PRICES.dynamoPerMillionReadUnits} per million RRU | ${usd((n * reads * PRICES.dynamoPerMillionReadUnits) / 1e6)} |`,
    `| **ours, total** | | | **${usd(lambda + dynamo)}** |`,
    `| Step Functions Standard, state transitions alone for the same phases (Task + Choice per invocation, Wait per poll) | ${n * transitions} | $${PRICES.stepFunctionsStandardPerThousandTransitions} per 1,000 | ${usd(stepFunctions)} (plus the same Lambda compute) |`,
    "",
    `Prices: public on-demand list prices for us-east-1, ${PRICES.asOf}; free tiers left out. Invocation times are this machine's on loopback; on Lambda against a remote API server they are longer, so the compute line scales with that latency. The relay runs in the cluster and is not billed here.`,
  ];
  return { lines, perThousand: { lambda, dynamo, total: lambda + dynamo, stepFunctionsTransitions: stepFunctions } };
}
