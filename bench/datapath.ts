/**
 * Data path benchmark: what the TLS tunnel costs. One generated server pod (rsync daemon + stunnel,
 * run as local processes exactly as the integration test runs them) receives the same data set twice
 * per round: through the generated stunnel client -> stunnel server -> daemon path, and with plain
 * rsync straight to the daemon's loopback port. Same rsync arguments (the generated ones), same
 * daemon, alternating order, page cache warmed first. Prints MB/s (10^6 bytes/s) of each and the ratio.
 *
 *   npx tsx bench/datapath.ts            # 1 GiB of mixed file sizes
 *   DVM_BENCH_DATAPATH_MIB=256 npx tsx bench/datapath.ts
 *   DVM_BENCH_DATAPATH_ROUNDS=3 ...      # rounds per path (default 2); the best and median are shown
 */
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { closeSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, writeSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { pathToFileURL } from "node:url";
import { findFreePort } from "../src/local/ports";
import { generateTransferPki } from "../src/transfer/certificates";
import { generateRsyncPassword, moduleCredential } from "../src/transfer/credentials";
import { transferPaths } from "../src/transfer/paths";
import { rsyncClientPod } from "../src/transfer/pods";
import { RSYNC_PASSWORD_ENV, rsyncClientArgs } from "../src/transfer/rsyncClient";
import { moduleNameFor } from "../src/transfer/rsyncd";
import { clientTransferSecretData } from "../src/transfer/secrets";
import { assertDataPathPrograms, LocalProcesses, startLocalServerPod, waitForPort, writeSecretVolume } from "../test/support/datapath";

export interface DatapathBenchOptions {
  /** Size of the generated data set. Default 1024 MiB, or DVM_BENCH_DATAPATH_MIB. */
  mib?: number;
  /** Transfers per path. Default 2, or DVM_BENCH_DATAPATH_ROUNDS. */
  rounds?: number;
  log?: (line: string) => void;
}

export interface DatapathBenchResult {
  bytes: number;
  files: number;
  /** MB/s (10^6 bytes per second of data set) per round. */
  plainMBps: number[];
  tunnelMBps: number[];
  /** Median tunnel / median plain. */
  ratio: number;
}

const MiB = 1024 * 1024;

export async function runDatapathBench(options: DatapathBenchOptions = {}): Promise<DatapathBenchResult> {
  const log = options.log ?? ((line: string) => console.log(line));
  const mib = options.mib ?? Number(process.env.DVM_BENCH_DATAPATH_MIB ?? 1024);
  const rounds = options.rounds ?? Number(process.env.DVM_BENCH_DATAPATH_ROUNDS ?? 2);
  if (!(mib > 0 && rounds > 0)) throw new Error("DVM_BENCH_DATAPATH_MIB and DVM_BENCH_DATAPATH_ROUNDS must be positive");
  assertDataPathPrograms();

  const root = mkdtempSync(join(tmpdir(), "dvm-bench-datapath-"));
  const processes = new LocalProcesses(join(root, "logs"));
  try {
    const source = join(root, "source");
    const { bytes, files } = generateDataSet(source, mib * MiB);
    log(`data set: ${(bytes / MiB).toFixed(0)} MiB in ${files} files (50% 64 MiB files, 30% 1 MiB files, 20% 4-64 KiB files)`);

    const runAsRoot = process.getuid?.() === 0;
    const pki = await generateTransferPki({ commonName: "dvm-bench", serverDnsNames: ["rsync-server.dvm.local"] });
    const password = generateRsyncPassword();
    const volume = { namespace: "bench", name: "data" };
    const server = await startLocalServerPod(processes, {
      root: join(root, "server"),
      namespace: "bench",
      pvcs: [volume],
      runAsRoot,
      rsyncSecret: password,
      pki,
    });
    const credential = moduleCredential(password, moduleNameFor(volume));

    // The client pod's stunnel sidecar, from the generated client Secret and pod.
    const clientPaths = transferPaths({ configDir: join(root, "client/config"), doneDir: join(root, "client/done"), scratchDir: join(root, "client/scratch") });
    const localPort = await findFreePort();
    const clientData = clientTransferSecretData({
      password: credential.password,
      pki,
      endpointHost: "127.0.0.1",
      endpointPort: server.stunnelPort,
      checkHost: "rsync-server.dvm.local",
      localPort,
      paths: clientPaths,
    });
    const clientPod = rsyncClientPod({
      name: "bench",
      namespace: "bench",
      configSecretName: "bench",
      sourcePvc: volume,
      destinationPvc: volume,
      user: credential.user,
      runAsRoot,
      localPort,
      paths: clientPaths,
    });
    writeSecretVolume(clientPod, clientData, clientPaths.configDir);
    const stunnel = processes.start("client stunnel", ["stunnel", join(clientPaths.configDir, "stunnel.conf")]);
    await waitForPort(localPort, "127.0.0.1", 10_000, stunnel);

    const argsVia = (port: number) =>
      rsyncClientArgs({ sourcePath: source, module: moduleNameFor(volume), user: credential.user, port, preserveOwnership: runAsRoot });
    const destination = server.volumePath(volume);
    const transfer = async (port: number): Promise<number> => {
      for (const name of readdirSync(destination)) rmSync(join(destination, name), { recursive: true, force: true });
      const start = performance.now();
      await runRsync(argsVia(port), credential.password);
      return bytes / 1e6 / ((performance.now() - start) / 1000);
    };

    warmPageCache(source);
    const plainMBps: number[] = [];
    const tunnelMBps: number[] = [];
    for (let round = 1; round <= rounds; round++) {
      // Alternate which goes first, so neither always gets the warmer cache.
      const order = round % 2 === 1 ? (["plain", "tunnel"] as const) : (["tunnel", "plain"] as const);
      for (const path of order) {
        const rate = await transfer(path === "plain" ? server.rsyncPort : localPort);
        (path === "plain" ? plainMBps : tunnelMBps).push(rate);
        log(`round ${round} ${path.padEnd(6)} ${rate.toFixed(1)} MB/s`);
      }
    }
    const ratio = median(tunnelMBps) / median(plainMBps);
    const cipher = /TLSv1\.3 ciphersuite: (\S+)/.exec(server.stunnel.output())?.[1] ?? "?";
    log(`plain rsync to the daemon:        median ${median(plainMBps).toFixed(1)} MB/s, best ${Math.max(...plainMBps).toFixed(1)} MB/s`);
    log(`rsync through stunnel (${cipher}): median ${median(tunnelMBps).toFixed(1)} MB/s, best ${Math.max(...tunnelMBps).toFixed(1)} MB/s`);
    log(`tunnel / plain: ${ratio.toFixed(2)}  (${cpus().length} CPUs, ${cpus()[0]?.model ?? "unknown CPU"})`);
    return { bytes, files, plainMBps, tunnelMBps, ratio };
  } finally {
    await processes.stopAll();
    rmSync(root, { recursive: true, force: true });
  }
}

/** Random (incompressible) content cut from one pool, so generating 1 GiB takes seconds. */
function generateDataSet(dir: string, total: number): { bytes: number; files: number } {
  const pool = randomBytes(80 * MiB);
  let bytes = 0;
  let files = 0;
  let cursor = 0;
  const writeFile = (path: string, size: number) => {
    const fd = openSync(path, "w");
    try {
      for (let written = 0; written < size; ) {
        const chunk = Math.min(size - written, 8 * MiB);
        const offset = (cursor = (cursor + 7919) % (pool.length - chunk));
        writeSync(fd, pool, offset, chunk);
        written += chunk;
      }
    } finally {
      closeSync(fd);
    }
    bytes += size;
    files += 1;
  };
  const fill = (sub: string, budget: number, size: () => number) => {
    mkdirSync(join(dir, sub), { recursive: true });
    for (let used = 0, i = 0; used < budget; i++) {
      const s = Math.min(size(), budget - used);
      // Small files go into directories of 500, as real trees do.
      const folder = join(dir, sub, String(Math.floor(i / 500)));
      if (i % 500 === 0) mkdirSync(folder, { recursive: true });
      writeFile(join(folder, `f${i}`), s);
      used += s;
    }
  };
  fill("large", Math.round(total * 0.5), () => 64 * MiB);
  fill("medium", Math.round(total * 0.3), () => MiB);
  fill("small", total - Math.round(total * 0.5) - Math.round(total * 0.3), () => 4096 + Math.floor(Math.random() * 60 * 1024));
  return { bytes, files };
}

function warmPageCache(dir: string): void {
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) readFileSync(join(entry.parentPath, entry.name));
  }
}

function runRsync(args: string[], password: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn("rsync", args, { env: { ...process.env, [RSYNC_PASSWORD_ENV]: password }, stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    child.on("exit", (code) => (code === 0 ? resolve() : reject(new Error(`rsync exited ${code}: ${stderr}`))));
  });
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? (sorted[mid] ?? 0) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  runDatapathBench().catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  });
}
