/**
 * The AWS bill per 1,000 migrations of the seed's shape, from what one such migration measured here
 * (bench/seed.ts): invocations, their durations, the phase function's memory size and architecture
 * (serverless.yml), and the DynamoDB requests and the capacity units DynamoDB reported for them (counted
 * by client middleware); next to the same workload's state transitions on Step Functions Standard. Pure
 * arithmetic: the inputs and prices are printed with the result.
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
  /** Per GB-second of duration, by architecture (the first pricing tier). */
  lambdaPerGbSecond: { x86_64: 0.0000166667, arm64: 0.0000133334 },
  dynamoPerMillionWriteUnits: 0.625,
  dynamoPerMillionReadUnits: 0.125,
  stepFunctionsStandardPerThousandTransitions: 0.025,
} as const;

export type LambdaArchitecture = keyof typeof PRICES.lambdaPerGbSecond;

function serverlessYml(): string {
  return readFileSync(fileURLToPath(new URL("../serverless.yml", import.meta.url)), "utf8");
}

/** The phase functions' memorySize (custom.phaseFunction in serverless.yml): the one source of it. */
export function phaseFunctionMemoryMb(): number {
  const match = /phaseFunction:[\s\S]*?memorySize:\s*(\d+)/.exec(serverlessYml());
  if (!match) throw new Error("serverless.yml: custom.phaseFunction.memorySize not found");
  return Number(match[1]);
}

/** provider.architecture in serverless.yml (Lambda's default, x86_64, when it is not set). */
export function phaseFunctionArchitecture(): LambdaArchitecture {
  const match = /^provider:[\s\S]*?^\s+architecture:\s*(\S+)/m.exec(serverlessYml());
  const value = match?.[1] ?? "x86_64";
  if (!Object.hasOwn(PRICES.lambdaPerGbSecond, value)) throw new Error(`serverless.yml: provider.architecture ${value} has no price here`);
  return value as LambdaArchitecture;
}

export interface MigrationMeasurement {
  invocations: number;
  /** Invocations that only found a wait phase not done yet (each a poll). */
  waitingInvocations: number;
  /** Sum of the invocations' wall times, ms. */
  invocationMs: number;
  dynamoRequests: Record<string, number>;
  /** Capacity units those requests consumed, as DynamoDB reported them (ReturnConsumedCapacity). */
  dynamoCapacityUnits: { write: number; read: number };
}

export interface CostEstimate {
  lines: string[];
  perThousand: { lambda: number; dynamo: number; total: number; stepFunctionsTransitions: number };
}

const round = (n: number) => Math.round(n).toString();
const usd = (n: number) => `$${n < 0.01 ? n.toFixed(4) : n.toFixed(2)}`;

export function costPerThousand(
  m: MigrationMeasurement,
  memoryMb = phaseFunctionMemoryMb(),
  architecture: LambdaArchitecture = phaseFunctionArchitecture(),
): CostEstimate {
  const { write: writes, read: reads } = m.dynamoCapacityUnits;
  const requests = Object.values(m.dynamoRequests).reduce((a, b) => a + b, 0);
  const gbSeconds = (m.invocationMs / 1000) * (memoryMb / 1024);
  const n = 1000;
  const perGbSecond = PRICES.lambdaPerGbSecond[architecture];
  const lambdaRequests = (n * m.invocations * PRICES.lambdaPerMillionRequests) / 1e6;
  const lambdaCompute = n * gbSeconds * perGbSecond;
  const dynamo = (n * writes * PRICES.dynamoPerMillionWriteUnits + n * reads * PRICES.dynamoPerMillionReadUnits) / 1e6;
  // Step Functions Standard driving the same phases: per invocation a Task state and a Choice on its
  // result, plus a Wait state for each poll, and the start and end of the execution.
  const transitions = 2 * m.invocations + m.waitingInvocations + 2;
  const stepFunctions = (n * transitions * PRICES.stepFunctionsStandardPerThousandTransitions) / 1000;
  const lambda = lambdaRequests + lambdaCompute;
  const lines = [
    `Measured for one migration (ours): ${m.invocations} invocations (${m.waitingInvocations} of them polls of a wait phase), ${(m.invocationMs / 1000).toFixed(2)} s of invocation time in all, ${requests} DynamoDB requests (${Object.entries(
      m.dynamoRequests,
    )
      .map(([k, v]) => `${k} ${v}`)
      .join(
        ", ",
      )}) that consumed ${writes} write and ${reads} read capacity units as DynamoDB reported them; phase function memory ${memoryMb} MB on ${architecture} (serverless.yml), so ${gbSeconds.toFixed(3)} GB-s.`,
    "",
    "| per 1,000 migrations | quantity | price | cost |",
    "|---|---|---|---|",
    `| Lambda requests | ${n * m.invocations} | $${PRICES.lambdaPerMillionRequests} per million | ${usd(lambdaRequests)} |`,
    `| Lambda compute (${architecture}) | ${(n * gbSeconds).toFixed(1)} GB-s | $${perGbSecond} per GB-s | ${usd(lambdaCompute)} |`,
    `| DynamoDB on-demand write request units (as consumed) | ${round(n * writes)} | $${PRICES.dynamoPerMillionWriteUnits} per million WRU | ${usd((n * writes * PRICES.dynamoPerMillionWriteUnits) / 1e6)} |`,
    `| DynamoDB on-demand read request units (as consumed; strongly consistent queries) | ${round(n * reads)} | $${PRICES.dynamoPerMillionReadUnits} per million RRU | ${usd((n * reads * PRICES.dynamoPerMillionReadUnits) / 1e6)} |`,
    `| **ours, total** | | | **${usd(lambda + dynamo)}** |`,
    `| Step Functions Standard, state transitions alone for the same phases (Task + Choice per invocation, Wait per poll) | ${n * transitions} | $${PRICES.stepFunctionsStandardPerThousandTransitions} per 1,000 | ${usd(stepFunctions)} (plus the same Lambda compute) |`,
    "",
    `Prices: public on-demand list prices for us-east-1, ${PRICES.asOf}; free tiers left out. Invocation times are this machine's on loopback; on Lambda against a remote API server they are longer, so the compute line scales with that latency. The relay runs in the cluster and is not billed here.`,
  ];
  return { lines, perThousand: { lambda, dynamo, total: lambda + dynamo, stepFunctionsTransitions: stepFunctions } };
}
