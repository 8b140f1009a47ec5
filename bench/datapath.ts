/**
 * Data path benchmark: what moving the data costs, ours beside plain rsync and the peers' paths. One
 * run, one data set (mixed file sizes, random content), two network namespaces joined by a veth pair
 * (bench/isolation.ts), and four paths between them (bench/dataPaths.ts): plain rsync daemon, ours
 * (the generated transfer pods' stunnel and rsync configuration, mutually verified TLS 1.3), VolSync's
 * rsync-tls mover (stunnel with a pre-shared key) and pv-migrate's rsync over OpenSSH. Each round
 * moves the data set once per path into an empty destination, the order rotating from round to round,
 * page cache warmed first. Per path: MB/s (10^6 bytes of data set per second of the whole transfer) and
 * CPU seconds per GiB moved, from the path's own cgroup v2: every process of both ends (rsyncs,
 * stunnels, sshd and ssh, and what they start). Medians over the rounds. Needs root.
 *
 *   npx tsx bench/datapath.ts            # 1 GiB of mixed file sizes
 *   DVM_BENCH_DATAPATH_MIB=256 npx tsx bench/datapath.ts
 *   DVM_BENCH_DATAPATH_ROUNDS=5 ...      # rounds (default 3)
 *   DVM_BENCH_DATAPATH_PATHS=plain,ours  # a subset of: plain, ours, volsync, pv-migrate
 *   DVM_BENCH_DATAPATH_SMALL_FILES=0     # leave out the many-small-files run (default 100,000 files)
 *
 * Then many small files: 100,000 files of 4 KiB, plain and ours (same namespaces, not real pods),
 * files per second and the peak memory (VmHWM) of the rsync processes, sampled every 100 ms.
 */
import { randomBytes, randomFillSync } from "node:crypto";
import { closeSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync, writeSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { pathToFileURL } from "node:url";
import { generateTransferPki } from "../src/transfer/certificates";
import { generateRsyncPassword } from "../src/transfer/credentials";
import { assertDataPathPrograms } from "../test/support/datapath";
import { type DataPath, oursPath, type PathContext, type PathName, plainPath, pvMigratePath, volsyncPath } from "./dataPaths";
import { createCgroups, createNamespacePair, peakMemoryKiB } from "./isolation";

export interface DatapathBenchOptions {
  /** Size of the generated data set. Default 1024 MiB, or DVM_BENCH_DATAPATH_MIB. */
  mib?: number;
  /** Transfers per path. Default 3, or DVM_BENCH_DATAPATH_ROUNDS. */
  rounds?: number;
  /** Default all four, or DVM_BENCH_DATAPATH_PATHS. */
  paths?: PathName[];
  /** Files of 4 KiB in the many-small-files run; 0 leaves it out. Default 100,000, or DVM_BENCH_DATAPATH_SMALL_FILES. */
  smallFiles?: number;
  log?: (line: string) => void;
}

export interface PathFigures {
  name: PathName;
  description: string;
  /** Per round: MB/s (10^6 bytes of data set per second). */
  mbps: number[];
  /** Per round: CPU seconds (user + system, all the path's processes) per GiB of data set. */
  cpuSecondsPerGiB: number[];
}

export interface SmallFilesFigures {
  name: PathName;
  filesPerSecond: number[];
  /** The largest VmHWM of one rsync process, and the sum of all the transfer's rsync processes' VmHWM. */
  largestRsyncMiB: number;
  allRsyncsMiB: number;
}

export interface DatapathBenchResult {
  bytes: number;
  files: number;
  paths: PathFigures[];
  smallFiles?: { files: number; paths: SmallFilesFigures[] };
}

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;
const ALL_PATHS: readonly PathName[] = ["plain", "ours", "volsync", "pv-migrate"];
const BUILDERS: Record<PathName, (ctx: PathContext) => Promise<DataPath>> = {
  plain: plainPath,
  ours: oursPath,
  volsync: volsyncPath,
  "pv-migrate": pvMigratePath,
};

function pathsFromEnv(): PathName[] {
  const listed = process.env.DVM_BENCH_DATAPATH_PATHS?.split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  if (!listed) return [...ALL_PATHS];
  for (const name of listed)
    if (!(ALL_PATHS as readonly string[]).includes(name)) throw new Error(`DVM_BENCH_DATAPATH_PATHS: unknown path "${name}" (known: ${ALL_PATHS.join(", ")})`);
  return ALL_PATHS.filter((p) => listed.includes(p));
}

export async function runDatapathBench(options: DatapathBenchOptions = {}): Promise<DatapathBenchResult> {
  const log = options.log ?? ((line: string) => console.log(line));
  const mib = options.mib ?? Number(process.env.DVM_BENCH_DATAPATH_MIB ?? 1024);
  const rounds = options.rounds ?? Number(process.env.DVM_BENCH_DATAPATH_ROUNDS ?? 3);
  const names = options.paths ?? pathsFromEnv();
  if (!(mib > 0 && rounds > 0)) throw new Error("DVM_BENCH_DATAPATH_MIB and DVM_BENCH_DATAPATH_ROUNDS must be positive");
  assertDataPathPrograms();

  const root = mkdtempSync(join(tmpdir(), "dvm-bench-datapath-"));
  const tag = String(process.pid);
  const namespaces = createNamespacePair(tag);
  const cgroups = createCgroups(tag);
  const paths: DataPath[] = [];
  try {
    const source = join(root, "source");
    const { bytes, files } = generateDataSet(source, mib * MiB);
    log(`data set: ${(bytes / MiB).toFixed(0)} MiB in ${files} files (50% 64 MiB files, 30% 1 MiB files, 20% 4-64 KiB files, random content)`);
    const ctx: PathContext = {
      root,
      source,
      namespaces,
      cgroup: (name) => cgroups.child(name),
      pki: await generateTransferPki({ commonName: "dvm-bench", serverDnsNames: ["rsync-server.dvm.local"] }),
      password: generateRsyncPassword(),
      runAsRoot: process.getuid?.() === 0,
    };
    for (const name of names) paths.push(await BUILDERS[name](ctx));

    warmPageCache(source);
    const figures = new Map<PathName, PathFigures>(paths.map((p) => [p.name, { name: p.name, description: "", mbps: [], cpuSecondsPerGiB: [] }]));
    for (let round = 0; round < rounds; round++) {
      // Rotate the order, so no path always runs first or right after the same one.
      const order = paths.map((_, i) => paths[(i + round) % paths.length]!);
      for (const path of order) {
        for (const name of readdirSync(path.destination)) rmSync(join(path.destination, name), { recursive: true, force: true });
        const cpu0 = path.cgroup.cpuSeconds();
        const t0 = performance.now();
        await path.transfer();
        const seconds = (performance.now() - t0) / 1000;
        const cpu = path.cgroup.cpuSeconds() - cpu0;
        const landed = bytesUnder(path.destination);
        if (landed !== bytes) throw new Error(`${path.name}: ${landed} bytes arrived of ${bytes}`);
        const f = figures.get(path.name)!;
        f.mbps.push(bytes / 1e6 / seconds);
        f.cpuSecondsPerGiB.push(cpu / (bytes / GiB));
        log(
          `round ${round + 1} ${path.name.padEnd(10)} ${(bytes / 1e6 / seconds).toFixed(1).padStart(6)} MB/s  ${(cpu / (bytes / GiB)).toFixed(2).padStart(5)} CPU s/GiB`,
        );
      }
    }
    for (const path of paths) figures.get(path.name)!.description = path.describe();
    const result: DatapathBenchResult = { bytes, files, paths: [...figures.values()] };
    for (const line of table(result)) log(line);
    log(`${cpus().length} CPUs, ${cpus()[0]?.model ?? "unknown CPU"}; ${rounds} rounds, medians; CPU: user + system of each path's cgroup, both ends`);

    const smallFiles = options.smallFiles ?? Number(process.env.DVM_BENCH_DATAPATH_SMALL_FILES ?? 100_000);
    const smallPaths = paths.filter((p) => p.name === "plain" || p.name === "ours");
    if (smallFiles > 0 && smallPaths.length > 0) {
      rmSync(source, { recursive: true, force: true });
      const small = join(root, "small");
      generateSmallFiles(small, smallFiles);
      warmPageCache(small);
      result.smallFiles = { files: smallFiles, paths: await smallFilesRun(smallPaths, small, smallFiles, 2, log) };
    }
    return result;
  } finally {
    for (const path of paths) await path.stop();
    cgroups.remove();
    namespaces.remove();
    rmSync(root, { recursive: true, force: true });
  }
}

/** The figures as a Markdown table, then ours against plain and against the cheapest peer. */
export function table(result: DatapathBenchResult): string[] {
  const plain = result.paths.find((p) => p.name === "plain");
  const ours = result.paths.find((p) => p.name === "ours");
  const rows = result.paths.map((p) => {
    const mbps = median(p.mbps);
    const cpu = median(p.cpuSecondsPerGiB);
    const vs = plain && p !== plain ? `${(mbps / median(plain.mbps)).toFixed(2)} | ${(cpu / median(plain.cpuSecondsPerGiB)).toFixed(2)}` : "- | -";
    return `| ${p.name} | ${p.description} | ${mbps.toFixed(1)} | ${cpu.toFixed(2)} | ${vs} |`;
  });
  const out = ["", "| path | what runs | MB/s | CPU s/GiB | MB/s / plain | CPU / plain |", "|---|---|---|---|---|---|", ...rows, ""];
  if (plain && ours) {
    out.push(
      `ours / plain: ${(median(ours.mbps) / median(plain.mbps)).toFixed(2)} of the rate, ${(median(ours.cpuSecondsPerGiB) / median(plain.cpuSecondsPerGiB)).toFixed(2)}x the CPU per GiB (aim: at most 1.3x)`,
    );
    const peers = result.paths.filter((p) => p.name === "volsync" || p.name === "pv-migrate");
    const cheapest = peers.sort((a, b) => median(a.cpuSecondsPerGiB) - median(b.cpuSecondsPerGiB))[0];
    if (cheapest)
      out.push(
        `ours / cheapest peer path (${cheapest.name}): ${(median(ours.cpuSecondsPerGiB) / median(cheapest.cpuSecondsPerGiB)).toFixed(2)}x the CPU per GiB (aim: at most 1)`,
      );
  }
  return out;
}

/** Transfers the small files through each path, `rounds` times alternating, sampling rsync's memory. */
async function smallFilesRun(paths: DataPath[], source: string, count: number, rounds: number, log: (line: string) => void): Promise<SmallFilesFigures[]> {
  const figures = paths.map((p) => ({ name: p.name, filesPerSecond: [] as number[], largestRsyncMiB: 0, allRsyncsMiB: 0 }));
  for (let round = 0; round < rounds; round++) {
    for (let i = 0; i < paths.length; i++) {
      const index = (i + round) % paths.length;
      const path = paths[index]!;
      const f = figures[index]!;
      for (const name of readdirSync(path.destination)) rmSync(join(path.destination, name), { recursive: true, force: true });
      const peaks = new Map<number, number>();
      const sample = () => {
        for (const p of peakMemoryKiB(path.cgroup.pids())) if (p.command === "rsync") peaks.set(p.pid, Math.max(peaks.get(p.pid) ?? 0, p.kib));
      };
      const sampler = setInterval(sample, 100);
      const t0 = performance.now();
      try {
        await path.transfer(source);
      } finally {
        clearInterval(sampler);
      }
      const seconds = (performance.now() - t0) / 1000;
      const landed = filesUnder(path.destination);
      if (landed !== count) throw new Error(`${path.name}: ${landed} of ${count} small files arrived`);
      // The daemon's parent stays; its forked children and the client are gone by now.
      const kib = [...peaks.values()];
      f.largestRsyncMiB = Math.max(f.largestRsyncMiB, Math.max(0, ...kib) / 1024);
      f.allRsyncsMiB = Math.max(f.allRsyncsMiB, kib.reduce((a, b) => a + b, 0) / 1024);
      f.filesPerSecond.push(count / seconds);
      log(
        `small files, round ${round + 1} ${path.name.padEnd(6)} ${(count / seconds).toFixed(0)} files/s (${seconds.toFixed(1)} s), rsync VmHWM: largest ${(Math.max(0, ...kib) / 1024).toFixed(1)} MiB, ${kib.length} rsync processes ${(kib.reduce((a, b) => a + b, 0) / 1024).toFixed(1)} MiB`,
      );
    }
  }
  const plain = figures.find((f) => f.name === "plain");
  log("");
  log(`many small files: ${count} files of 4 KiB between the same two network namespaces (local processes, not real pods); medians of ${rounds} rounds`);
  log("| path | files/s | files/s / plain | rsync VmHWM, largest process | rsync VmHWM, all rsync processes |");
  log("|---|---|---|---|---|");
  for (const f of figures)
    log(
      `| ${f.name} | ${median(f.filesPerSecond).toFixed(0)} | ${plain && f !== plain ? (median(f.filesPerSecond) / median(plain.filesPerSecond)).toFixed(2) : "-"} | ${f.largestRsyncMiB.toFixed(1)} MiB | ${f.allRsyncsMiB.toFixed(1)} MiB |`,
    );
  return figures;
}

/** `count` files of 4 KiB (random content), 500 to a folder. */
function generateSmallFiles(dir: string, count: number): void {
  for (let i = 0; i < count; i++) {
    const folder = join(dir, String(Math.floor(i / 500)));
    if (i % 500 === 0) mkdirSync(folder, { recursive: true });
    writeFileSync(join(folder, `f${i}`), randomBytes(4096));
  }
}

function filesUnder(dir: string): number {
  return readdirSync(dir, { withFileTypes: true, recursive: true }).filter((e) => e.isFile()).length;
}

function bytesUnder(dir: string): number {
  let total = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true }))
    if (entry.isFile()) total += statSync(join(entry.parentPath, entry.name)).size;
  return total;
}

/**
 * Random content, fresh for every chunk: no two files share bytes, so rsync's -z (VolSync's and
 * pv-migrate's default) finds nothing to compress across files either, as with real incompressible data.
 */
function generateDataSet(dir: string, total: number): { bytes: number; files: number } {
  const buffer = Buffer.alloc(8 * MiB);
  let bytes = 0;
  let files = 0;
  const writeFile = (path: string, size: number) => {
    const fd = openSync(path, "w");
    try {
      for (let written = 0; written < size; ) {
        const chunk = Math.min(size - written, 8 * MiB);
        randomFillSync(buffer, 0, chunk);
        writeSync(fd, buffer, 0, chunk);
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
