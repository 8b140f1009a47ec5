import { type ChaosEnvironment, type EnvironmentOptions, startEnvironment } from "../test/chaos/harness/environment";

/** Bench sizes from the environment: a positive integer, or the default when unset; anything else is an error. */
export function envNumber(name: string, fallback: number): number {
  const value = process.env[name];
  if (value === undefined || value === "") return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n <= 0) throw new Error(`${name} must be a positive integer (got "${value}")`);
  return n;
}

/**
 * startEnvironment, tried twice: on a loaded machine DynamoDB Local (full JIT, as benchmarks want) can
 * miss its 30 s start-up bound once; a second start usually makes it.
 */
export async function startBenchEnvironment(options: EnvironmentOptions, log: (line: string) => void): Promise<ChaosEnvironment> {
  try {
    return await startEnvironment(options);
  } catch (error) {
    log(`  environment did not start (${error instanceof Error ? error.message.split("\n")[0] : String(error)}); trying once more`);
    return startEnvironment(options);
  }
}

/** The DynamoDB endpoint the environment names (LocalStack, say), or undefined: the bench starts DynamoDB Local. */
export function externalDynamoEndpoint(): string | undefined {
  return process.env.AWS_ENDPOINT_URL_DYNAMODB ?? process.env.AWS_ENDPOINT_URL;
}

/** Two control planes started here, and DynamoDB: the external endpoint when one is named, else DynamoDB Local. */
export function startTwoPlanes(log: (line: string) => void): Promise<ChaosEnvironment> {
  const external = externalDynamoEndpoint();
  return startBenchEnvironment(
    {
      host: "start",
      destination: "start",
      dynamo: external ? { endpoint: external, region: process.env.AWS_REGION ?? "us-east-1" } : "start",
      dynamoJvmArgs: [],
    },
    log,
  );
}
