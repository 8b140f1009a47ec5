/**
 * moto's server (`moto_server`, a Python AWS API emulator installed with pip), started with stock settings
 * on a free loopback port, from a private temporary directory that is removed when it stops.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { findFreePort } from "../../infra/dev/local/ports";
import { type ManagedProcess, spawnLogged, stopProcess, tailFile } from "../../infra/dev/local/processes";
import { GiveUp, waitFor } from "../../infra/dev/local/wait";

export const MOTO_INSTALL = "pip install 'moto[server]' cfn-lint";

/** The region every deployed test uses; moto's default account is 123456789012. */
export const MOTO_REGION = "us-east-1";

/** Dummy credentials: moto accepts any while its IAM enforcement is off (INITIAL_NO_AUTH_ACTION_COUNT unset). */
export const MOTO_CREDENTIALS = { accessKeyId: "testing", secretAccessKey: "testing" };

export function motoInstalled(): boolean {
  const probe = spawnSync("moto_server", ["--help"], { stdio: "ignore" });
  return !probe.error && probe.status === 0;
}

export interface Moto {
  endpoint: string;
  logFile: string;
  stop(): Promise<void>;
}

export async function startMoto(startTimeoutMs = 60_000): Promise<Moto> {
  const dir = mkdtempSync(join(tmpdir(), "dvm-moto-"));
  const port = await findFreePort();
  const logFile = join(dir, "moto.log");
  // Its working directory is the temporary one: nothing it writes lands in the repository.
  const server: ManagedProcess = spawnLogged({
    name: "moto",
    command: "sh",
    args: ["-c", 'cd "$1" && shift && exec moto_server "$@"', "moto", dir, "-H", "127.0.0.1", "-p", String(port)],
    logFile,
  });
  const endpoint = `http://127.0.0.1:${port}`;
  const stop = async (): Promise<void> => {
    await stopProcess(server);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await waitFor(
      `moto_server on ${endpoint}`,
      async () => {
        if (!server.isRunning()) throw new GiveUp(`moto_server exited during startup:\n${tailFile(logFile)}`);
        const res = await fetch(`${endpoint}/moto-api/`, { signal: AbortSignal.timeout(1_000) });
        return res.ok;
      },
      startTimeoutMs,
      () => tailFile(logFile),
    );
  } catch (error) {
    await stop();
    throw error;
  }
  return { endpoint, logFile, stop };
}

/**
 * moto's IAM enforcement, switched at run time as its INITIAL_NO_AUTH_ACTION_COUNT setting would: on,
 * every request after this one is authenticated and authorized; off, none is. It is the whole server's.
 */
export async function setIamEnforcement(endpoint: string, on: boolean): Promise<void> {
  const res = await fetch(`${endpoint}/moto-api/reset-auth`, { method: "POST", body: on ? "0" : "inf" });
  if (!res.ok) throw new Error(`moto reset-auth: HTTP ${res.status}`);
}
