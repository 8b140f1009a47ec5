/**
 * One relay replica as a real process (src/relay/main.ts under tsx), for tests and benchmarks that
 * kill or partition it: its own kubeconfig (e.g. through a CuttableProxy), its own Lambda stand-in, its
 * JSON log lines, and its /readyz.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { KubeConfig } from "@kubernetes/client-node";
import { findFreePort } from "../../infra/dev/local/ports";
import type { ReplicaStats } from "../../src/relay/replica";
import { type LambdaStandIn, startLambdaStandIn } from "./lambdaStandIn";

const ROOT = join(import.meta.dirname, "..", "..");

export interface RelayLogLine {
  level: string;
  timestamp: string;
  message: string;
  [key: string]: unknown;
}

export interface ReadyzAnswer {
  status: number;
  role?: string;
  stats?: ReplicaStats;
}

export class RelayProcess {
  private output = "";
  readonly lines: RelayLogLine[] = [];
  private readonly exited: Promise<void>;

  private constructor(
    readonly name: string,
    private readonly child: ChildProcess,
    readonly lambda: LambdaStandIn,
    readonly healthPort: number,
    private readonly dir: string,
  ) {
    let partial = "";
    child.stdout!.on("data", (chunk: Buffer) => {
      this.output += chunk.toString();
      partial += chunk.toString();
      const complete = partial.split("\n");
      partial = complete.pop() ?? "";
      for (const line of complete) {
        try {
          this.lines.push(JSON.parse(line) as RelayLogLine);
        } catch {
          // not a log line
        }
      }
    });
    child.stderr!.on("data", (chunk: Buffer) => (this.output += chunk.toString()));
    this.exited = new Promise((resolve) => child.once("exit", () => resolve()));
  }

  /** Starts a replica named `name` (its POD_NAME, so its identity in the Lease) with `env` on top of the basics. */
  static async start(name: string, kubeConfig: KubeConfig, env: Record<string, string>): Promise<RelayProcess> {
    const lambda = await startLambdaStandIn();
    const dir = mkdtempSync(join(tmpdir(), `dvm-relay-${name}-`));
    const kubeconfigPath = join(dir, "kubeconfig");
    writeFileSync(kubeconfigPath, kubeConfig.exportConfig(), { mode: 0o600 });
    const healthPort = await findFreePort();
    const child = spawn(process.execPath, ["--import", "tsx", join(ROOT, "src", "relay", "main.ts")], {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH ?? "",
        KUBECONFIG: kubeconfigPath,
        POD_NAME: name,
        RELAY_FUNCTION_NAME: "dvm-phase",
        RELAY_HEALTH_PORT: String(healthPort),
        AWS_REGION: "us-east-1",
        AWS_ACCESS_KEY_ID: "test",
        AWS_SECRET_ACCESS_KEY: "test",
        AWS_ENDPOINT_URL_LAMBDA: lambda.url,
        LOG_LEVEL: "info",
        ...env,
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    return new RelayProcess(name, child, lambda, healthPort, dir);
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** What /readyz answers now; status 0 when nothing answers. */
  async readyz(): Promise<ReadyzAnswer> {
    try {
      const response = await fetch(`http://127.0.0.1:${this.healthPort}/readyz`);
      const body = (await response.json()) as { role?: string; stats?: ReplicaStats };
      return { ...(body.role !== undefined ? { role: body.role } : {}), ...(body.stats ? { stats: body.stats } : {}), status: response.status };
    } catch {
      return { status: 0 };
    }
  }

  /** The first log line with `message` at or after `since` (Date.now() time), if any. */
  logged(message: string, since = 0): RelayLogLine | undefined {
    return this.lines.find((line) => line.message === message && Date.parse(line.timestamp) >= since);
  }

  /** Everything the process printed, for failure messages. */
  transcript(): string {
    return `--- ${this.name} ---\n${this.output}`;
  }

  /** Ends it with `signal` and waits for the exit. */
  async kill(signal: NodeJS.Signals = "SIGKILL"): Promise<void> {
    if (this.running) this.child.kill(signal);
    await this.exited;
  }

  /** Kills it (if still running) and frees what it used. */
  async dispose(): Promise<void> {
    await this.kill("SIGKILL");
    await this.lambda.close();
    rmSync(this.dir, { recursive: true, force: true });
  }
}
