/**
 * etcd for a local control plane, plus the one etcd operation tests need directly: compaction.
 *
 * etcd serves a JSON gateway of its v3 API on the client URL (POST /v3/kv/range, /v3/kv/compaction),
 * so no etcdctl or gRPC client is needed. Byte fields are base64 and int64 fields are strings there.
 */
import { join } from "node:path";
import { findFreePort } from "./ports";
import { type ManagedProcess, spawnLogged, tailFile } from "./processes";
import { GiveUp, waitFor } from "./wait";

export interface EtcdHandle {
  url: string;
  process: ManagedProcess;
}

export async function startEtcd(opts: { binDir: string; dataDir: string; logDir: string; pidFile: string }): Promise<EtcdHandle> {
  const clientPort = await findFreePort();
  const peerPort = await findFreePort();
  const url = `http://127.0.0.1:${clientPort}`;
  const peer = `http://127.0.0.1:${peerPort}`;
  const logFile = join(opts.logDir, "etcd.log");
  const proc = spawnLogged({
    name: "etcd",
    command: join(opts.binDir, "etcd"),
    args: [
      "--name=default",
      `--data-dir=${opts.dataDir}`,
      `--listen-client-urls=${url}`,
      `--advertise-client-urls=${url}`,
      `--listen-peer-urls=${peer}`,
      `--initial-advertise-peer-urls=${peer}`,
      `--initial-cluster=default=${peer}`,
      // Tests throw the data away: skipping fsync makes every write several times faster.
      "--unsafe-no-fsync=true",
      "--log-level=warn",
    ],
    logFile,
    pidFile: opts.pidFile,
  });
  await waitFor(
    "etcd /health",
    async () => {
      if (!proc.isRunning()) throw new GiveUp(`etcd exited early:\n${tailFile(logFile)}`);
      const res = await fetch(`${url}/health`).catch(() => undefined);
      return res?.ok === true && ((await res.json()) as { health?: string }).health === "true";
    },
    30_000,
    () => tailFile(logFile),
  );
  return { url, process: proc };
}

/** The current revision of the etcd at `etcdUrl`. */
export async function etcdRevision(etcdUrl: string): Promise<number> {
  const res = await etcdPost(etcdUrl, "/v3/kv/range", { key: Buffer.from("\0").toString("base64"), limit: "1" });
  return Number((res as { header: { revision: string } }).header.revision);
}

/**
 * Compacts etcd's history up to its current revision (physically, so it is done when this returns).
 * Every resourceVersion older than the returned revision is then gone from etcd: reads at such a
 * resourceVersion that reach etcd (lists with resourceVersionMatch=Exact, continue tokens, watches
 * not served by the apiserver's watch cache) answer 410 Gone.
 */
export async function compactEtcd(etcdUrl: string): Promise<number> {
  const revision = await etcdRevision(etcdUrl);
  await etcdPost(etcdUrl, "/v3/kv/compaction", { revision: String(revision), physical: true });
  return revision;
}

async function etcdPost(etcdUrl: string, path: string, body: unknown): Promise<unknown> {
  const res = await fetch(`${etcdUrl}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`etcd ${path}: HTTP ${res.status}: ${text}`);
  return JSON.parse(text) as unknown;
}
