/**
 * DynamoDB Local (the official Java emulator) for tests, benchmarks and local runs. It is fetched on
 * first use by infra/dev/dynamodb/fetch.sh into a cache outside the repo, so no manual step is needed.
 */
import { execFile, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { localTools } from "./config";
import { findFreePort } from "./ports";
import { type ManagedProcess, spawnLogged, startReaper, stopProcess, tailFile } from "./processes";
import { GiveUp, waitFor } from "./wait";

export interface DynamoLocal {
  /** http://127.0.0.1:<port>, for the SDK's `endpoint` or AWS_ENDPOINT_URL_DYNAMODB. */
  endpoint: string;
  port: number;
  logFile: string;
  stop(): Promise<void>;
}

export interface DynamoLocalOptions {
  /** Fixed port; default a free one (and a retry on another if it is taken before Java binds it). */
  port?: number;
  /** Where the log file goes (dynamodb-local-<port>.log); default <tmp>/dvm-dynamodb-local. */
  logDir?: string;
  startTimeoutMs?: number;
  /**
   * JVM flags. The default trades peak speed for start-up (C1 only: about 3 s instead of 6 s on a
   * 2-CPU machine), which is what tests want; benchmarks can pass [] for a fully optimising JIT.
   */
  jvmArgs?: string[];
}

export const FAST_START_JVM_ARGS = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"];

export function dynamoLocalEmulatorDir(): string {
  const { dynamoLocalCache, dynamoSimulatorVersion } = localTools();
  return join(dynamoLocalCache, dynamoSimulatorVersion, "emulator");
}

/** Returns the emulator folder, running fetch.sh first when the cache does not have it yet. */
export async function ensureDynamoLocalEmulator(): Promise<string> {
  const dir = dynamoLocalEmulatorDir();
  if (existsSync(join(dir, "DynamoDBLocal.jar"))) return dir;
  const script = fileURLToPath(new URL("../dynamodb/fetch.sh", import.meta.url));
  const fetched = await new Promise<string>((resolve, reject) => {
    execFile("bash", [script], { maxBuffer: 1 << 20 }, (error, stdout, stderr) => {
      if (error) reject(new Error(`fetching DynamoDB Local failed (${script}):\n${stderr || error.message}`));
      else resolve(stdout.trim().split("\n").pop() ?? dir);
    });
  });
  if (!existsSync(join(fetched, "DynamoDBLocal.jar"))) {
    throw new Error(`fetch.sh reported ${fetched}, but it has no DynamoDBLocal.jar`);
  }
  return fetched;
}

function requireJava(): void {
  const probe = spawnSync("java", ["-version"], { stdio: "ignore" });
  if (probe.error || probe.status !== 0) {
    throw new Error(
      "DynamoDB Local needs Java 11 or newer on PATH (`java` " +
        (probe.error ? `could not be run: ${probe.error.message}` : `exited with ${probe.status}`) +
        "). Install a JRE (e.g. apt-get install openjdk-17-jre-headless), or set AWS_ENDPOINT_URL_DYNAMODB " +
        "to a DynamoDB that is already running.",
    );
  }
}

export async function startDynamoLocal(options: DynamoLocalOptions = {}): Promise<DynamoLocal> {
  requireJava();
  const emulator = await ensureDynamoLocalEmulator();
  const logDir = options.logDir ?? join(tmpdir(), "dvm-dynamodb-local");
  mkdirSync(logDir, { recursive: true });
  // A free port can be taken between our probe and Java's bind: try a few when we chose it.
  const tries = options.port === undefined ? 3 : 1;
  let lastError: unknown;
  for (let i = 0; i < tries; i++) {
    const port = options.port ?? (await findFreePort());
    try {
      return await launch(emulator, port, logDir, options.jvmArgs ?? FAST_START_JVM_ARGS, options.startTimeoutMs ?? 30_000);
    } catch (error) {
      lastError = error;
    }
  }
  throw lastError;
}

async function launch(emulator: string, port: number, logDir: string, jvmArgs: string[], timeoutMs: number): Promise<DynamoLocal> {
  const logFile = join(logDir, `dynamodb-local-${port}.log`);
  const pidFile = join(logDir, `dynamodb-local-${port}.pids`);
  const reaperLog = join(logDir, `reaper-${port}.log`);
  // The reaper kills every pid in this file: never let it see a pid from an earlier run.
  writeFileSync(pidFile, "");
  writeFileSync(logFile, "");
  const java = spawnLogged({
    name: "dynamodb-local",
    // DynamoDB Local writes dynamodb-local-metadata.json into its working directory even in memory:
    // start it from the log directory (exec keeps the pid, so stopping still hits Java).
    command: "sh",
    args: [
      "-c",
      'cd "$1" && shift && exec java "$@"',
      "dynamodb-local",
      logDir,
      ...jvmArgs,
      `-Djava.library.path=${join(emulator, "DynamoDBLocal_lib")}`,
      "-jar",
      join(emulator, "DynamoDBLocal.jar"),
      "-inMemory",
      // One database for every access key and region, so the test's dummy credentials see the tables.
      "-sharedDb",
      // It would otherwise phone home from every test run.
      "-disableTelemetry",
      "-port",
      String(port),
    ],
    logFile,
    pidFile,
  });
  // Covers a SIGKILLed parent, which no exit handler sees.
  const reaper: ManagedProcess = startReaper("dynamodb-local", pidFile, [], reaperLog);
  const endpoint = `http://127.0.0.1:${port}`;
  const stop = async (): Promise<void> => {
    // The children are unref'd; without a ref'd handle Node could exit before their exit events.
    const keepAlive = setInterval(() => {}, 1_000);
    try {
      await stopProcess(java);
      await stopProcess(reaper);
      rmSync(pidFile, { force: true });
      rmSync(reaperLog, { force: true });
    } finally {
      clearInterval(keepAlive);
    }
  };
  try {
    await waitFor(
      `DynamoDB Local on ${endpoint}`,
      async () => {
        if (!java.isRunning()) throw new GiveUp(`DynamoDB Local exited during startup:\n${tailFile(logFile)}`);
        // Any HTTP answer (it is a 400 without a signed request) means the server is serving.
        await fetch(endpoint, { signal: AbortSignal.timeout(1_000) });
        return true;
      },
      timeoutMs,
      () => tailFile(logFile),
    );
  } catch (error) {
    await stop();
    throw error;
  }
  return { endpoint, port, logFile, stop };
}
