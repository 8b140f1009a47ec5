/**
 * Many small files on real pods: a migration of N files of 4 KiB (DVM_BENCH_SMALL_FILES, default
 * 100,000; 1,000 to a folder) against plain rsync between the same two network namespaces, in files per
 * second, and the peak memory (VmHWM) of the rsync processes of each side (bench/processPeaks.ts): ours
 * picked by the transfer pods' uids or container ids in their cgroup paths, plain by descent from the client and the
 * daemon this bench started. Where rsync spends per file (file list, one temporary file and rename per
 * file, per-file round trips through the tunnel) shows here, where the 1 GiB runs hide it.
 */
import { randomBytes } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CoreV1Api } from "@kubernetes/client-node";
import type { NodeCluster } from "../infra/dev/local/nodes/clusters";
import { provisionedOn } from "../infra/dev/local/nodes/localPath";
import { volumeFolder } from "../infra/dev/local/nodes/volumes";
import type { RsyncProgress } from "../src/transfer/progress";
import { BENCH_PVC_NAMESPACE } from "./nodeDvm";
import { descendedFrom, describePeaks, inCgroupOf, sampleProcesses } from "./processPeaks";

const FILE_BYTES = 4096;
const PER_FOLDER = 1_000;
const PVC = "small";

/** One whole migration of one PVC, as bench/nodes.ts runs it. */
export interface MigrationRun {
  /** RunRsyncOperations' wall time, pod start included. */
  phaseSeconds: number;
  /** The client's closing statistics. */
  session: RsyncProgress;
  /** What names the transfer pods' processes in their cgroup paths (processPeaks.ts's inCgroupOf). */
  cgroupMarks: { client: string[]; server: string[] };
}

/** Plain rsync of a folder into an empty one on the destination node. */
export interface PlainRun {
  seconds: number;
  clientPid: number;
  daemonPid: number;
}

export interface SmallFilesOptions {
  source: NodeCluster;
  storageClass: string;
  files: number;
  migrate: (name: string, pvc: string) => Promise<MigrationRun>;
  /** `folder` as this machine sees it. */
  plain: (folder: string) => Promise<PlainRun>;
  log: (line: string) => void;
}

export interface SmallFilesResult {
  files: number;
  phaseFilesPerSecond: number;
  sessionFilesPerSecond?: number;
  plainFilesPerSecond: number;
  /** Sum of the VmHWM of each side's rsync processes, KiB. */
  peakKiB: { ours: { source: number; destination: number }; plain: { source: number; destination: number } };
}

export async function runSmallFilesBench(options: SmallFilesOptions): Promise<SmallFilesResult> {
  const { source, files, log } = options;
  await source
    .kubeConfig()
    .makeApiClient(CoreV1Api)
    .createNamespacedPersistentVolumeClaim({
      namespace: BENCH_PVC_NAMESPACE,
      body: {
        metadata: { name: PVC, annotations: provisionedOn(source.node.nodeName) },
        spec: { accessModes: ["ReadWriteOnce"], storageClassName: options.storageClass, resources: { requests: { storage: "8Gi" } } },
      },
    });
  const folder = await volumeFolder(source.kubeConfig(), source.nodes, BENCH_PVC_NAMESPACE, PVC);
  writeSmallFiles(folder, files);
  log(`many small files: ${files} files of ${FILE_BYTES / 1024} KiB (${((files * FILE_BYTES) / 2 ** 20).toFixed(0)} MiB), ${PER_FOLDER} to a folder`);

  let sampler = sampleProcesses("rsync");
  const ours = await options.migrate("small-files", PVC);
  let seen = sampler.stop();
  const oursSource = inCgroupOf(seen, ours.cgroupMarks.client);
  const oursDestination = inCgroupOf(seen, ours.cgroupMarks.server);

  sampler = sampleProcesses("rsync");
  const plain = await options.plain(folder);
  seen = sampler.stop();
  const plainSource = descendedFrom(seen, [plain.clientPid]);
  const plainDestination = descendedFrom(seen, [plain.daemonPid]);

  const rate = (seconds: number) => files / seconds;
  const sessionSeconds = ours.session.elapsedSeconds;
  const result: SmallFilesResult = {
    files,
    phaseFilesPerSecond: rate(ours.phaseSeconds),
    ...(sessionSeconds ? { sessionFilesPerSecond: rate(sessionSeconds) } : {}),
    plainFilesPerSecond: rate(plain.seconds),
    peakKiB: {
      ours: { source: sum(oursSource), destination: sum(oursDestination) },
      plain: { source: sum(plainSource), destination: sum(plainDestination) },
    },
  };
  const f = (n: number) => n.toFixed(0);
  log(
    `  ours, data phase (RunRsyncOperations, pod start included): ${f(result.phaseFilesPerSecond)} files/s (${ours.phaseSeconds.toFixed(1)} s); rsync's session (its own elapsed time, in whole seconds): ${sessionSeconds ? `${f(rate(sessionSeconds))} files/s (${sessionSeconds.toFixed(1)} s)` : "no elapsed time in its log"}`,
  );
  log(`  plain rsync daemon <- rsync between the same two network namespaces: ${f(result.plainFilesPerSecond)} files/s (${plain.seconds.toFixed(1)} s)`);
  log(
    `  ratio ours / plain: data phase ${(result.phaseFilesPerSecond / result.plainFilesPerSecond).toFixed(2)}${result.sessionFilesPerSecond ? `, rsync session ${(result.sessionFilesPerSecond / result.plainFilesPerSecond).toFixed(2)}` : ""}`,
  );
  log("  peak memory of the rsync processes (VmHWM, sampled every 100 ms):");
  log(`    ours, source (client pod): ${describePeaks(oursSource)}; destination (server pod, the daemon and its children): ${describePeaks(oursDestination)}`);
  log(`    plain, source (client): ${describePeaks(plainSource)}; destination (the daemon and its children): ${describePeaks(plainDestination)}`);
  return result;
}

const sum = (processes: readonly { peakKiB: number }[]) => processes.reduce((total, p) => total + p.peakKiB, 0);

/** `count` files of 4 KiB of random content, 1,000 to a folder. */
function writeSmallFiles(root: string, count: number): void {
  for (let start = 0; start < count; start += PER_FOLDER) {
    const folder = join(root, `d${String(start / PER_FOLDER).padStart(4, "0")}`);
    mkdirSync(folder, { recursive: true });
    const n = Math.min(PER_FOLDER, count - start);
    const content = randomBytes(n * FILE_BYTES);
    for (let i = 0; i < n; i++) writeFileSync(join(folder, `f${String(i).padStart(4, "0")}`), content.subarray(i * FILE_BYTES, (i + 1) * FILE_BYTES));
  }
}
