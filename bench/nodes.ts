/**
 * The data phase of a whole migration on real pods (node mode, infra/dev/local/nodes), against plain rsync
 * between the same two network namespaces on the same data, in the same run.
 *
 * Ours: a DVM moves one PVC from the source cluster to the destination over a NodePort: rsync client pod
 * -> stunnel client -> (TLS 1.3 across the two nodes' namespaces) -> stunnel server -> rsync daemon pod.
 * Two figures: the RunRsyncOperations phase's wall time (from its first invocation to the one that
 * advanced: pod start and the transfer included; invocations come at most 250 ms apart, as the relay's
 * pod events would bring them), and rsync's own average rate for the
 * session (its closing "bytes/sec" line). Plain: an rsync daemon in the destination node's namespace,
 * rsync run in the source node's namespace with the same arguments our client uses, no TLS, no pods.
 * Then a Block volume of the same size (random content on a loop device, a local PV on each node) moves
 * the same way, as the device's content, for the Block / file system ratio through the tunnel.
 * MB/s is 10^6 bytes of data set per second. Before the 1 GiB runs, the time to first byte of a small
 * migration with its breakdown (bench/firstByte.ts); after them, many small files, ours against plain
 * with the rsync processes' peak memory (bench/smallFiles.ts). Last, on the same clusters, the relay as
 * a pod (bench/relayPod.ts): its image, its two replicas Ready, and the takeover after the leader pod is
 * force-deleted mid-migration.
 *
 *   npx tsx bench/nodes.ts                  # 1 GiB, 100,000 small files
 *   DVM_BENCH_NODES_MIB=256 DVM_BENCH_SMALL_FILES=10000 npx tsx bench/nodes.ts
 */

import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { pathToFileURL } from "node:url";
import { CoreV1Api } from "@kubernetes/client-node";
import { writeDataset } from "../infra/dev/local/demoData";
import { startDynamoLocal } from "../infra/dev/local/dynamoLocal";
import { ensureLedgerTable } from "../infra/dev/local/ledgerTable";
import { createBlockClaim, createLoopVolume, LOOP_STORAGE_CLASS, type LoopVolume } from "../infra/dev/local/nodes/blockVolumes";
import { startNodeClusters } from "../infra/dev/local/nodes/clusters";
import { ensureNodeImages } from "../infra/dev/local/nodes/images";
import { provisionedOn } from "../infra/dev/local/nodes/localPath";
import { volumeFolder } from "../infra/dev/local/nodes/volumes";
import { createLedgerClient, DynamoPhaseLedger } from "../src/aws/ledger";
import { createPhaseRunner } from "../src/aws/phaseRunner";
import { LABEL } from "../src/contracts/labels";
import { EXECUTABLE_PHASES, type ExecutablePhaseName } from "../src/dvm/itinerary";
import { DEFAULT_MIGRATION_POLICY } from "../src/dvm/policy";
import { KINDS, type PodObject } from "../src/kube/objects";
import { PHASE_BODIES } from "../src/phases";
import { SERVER_ROLE } from "../src/phases/endpoint";
import { CLIENT_ROLE } from "../src/phases/rsyncOperations";
import type { PhaseBody } from "../src/phases/types";
import { parseRsyncProgress } from "../src/transfer/progress";
import { rsyncClientArgs } from "../src/transfer/rsyncClient";
import { envNumber } from "./env";
import { type FirstByteResult, runFirstByteBench } from "./firstByte";
import { createBenchDvm } from "./nodeDvm";
import { type RelayPodBenchResult, runRelayPodBench } from "./relayPod";
import { type MigrationRun, type PlainRun, runSmallFilesBench, type SmallFilesResult } from "./smallFiles";

export interface NodesBenchResult {
  bytes: number;
  files: number;
  phaseSeconds: number;
  phaseMBps: number;
  rsyncSessionMBps: number;
  plainSeconds: number;
  plainMBps: number;
  /** The same size as one Block volume (a loop device), moved as the device's content. */
  blockPhaseSeconds: number;
  blockPhaseMBps: number;
  blockSessionMBps: number;
  firstByte: FirstByteResult;
  smallFiles: SmallFilesResult;
  relayPod: RelayPodBenchResult;
}

const MiB = 1024 * 1024;

interface DataPhaseTiming {
  firstEntry?: number;
  advancedAt?: number;
  clientLog: string;
  cgroupMarks: MigrationRun["cgroupMarks"];
}
const mbps = (bytes: number, seconds: number) => bytes / 1e6 / seconds;

export async function runNodesBench(options: { mib?: number; smallFiles?: number; log?: (line: string) => void } = {}): Promise<NodesBenchResult> {
  const log = options.log ?? ((line: string) => console.log(line));
  const mib = options.mib ?? envNumber("DVM_BENCH_NODES_MIB", 1024);
  const smallFiles = options.smallFiles ?? envNumber("DVM_BENCH_SMALL_FILES", 100_000);
  const images = await ensureNodeImages({ onProgress: () => {} });
  const nodes = await startNodeClusters({ names: ["source", "destination"], images });
  const dynamo = await startDynamoLocal();
  try {
    const [source, destination] = nodes.clusters as [(typeof nodes.clusters)[0], (typeof nodes.clusters)[0]];
    const core = source.kubeConfig().makeApiClient(CoreV1Api);
    for (const name of ["bench", "dvm-system"]) await core.createNamespace({ body: { metadata: { name } } });
    await core.createNamespacedPersistentVolumeClaim({
      namespace: "bench",
      body: {
        // local-path waits for a first consumer: the data set is written first, on source node 1.
        metadata: { name: "data", annotations: provisionedOn(source.node.nodeName) },
        spec: { accessModes: ["ReadWriteOnce"], storageClassName: "standard", resources: { requests: { storage: "8Gi" } } },
      },
    });
    const folder = await volumeFolder(source.kubeConfig(), source.nodes, "bench", "data");
    const data = writeDataset(folder, { bytes: mib * MiB, files: Math.max(100, Math.round(mib * 4)) });
    log(`data set: ${(data.bytes / MiB).toFixed(0)} MiB in ${data.files} files (random content), on the source node's disk`);

    // Ours: a whole migration, timing the data phase and keeping the client's own closing statistics.
    await core.createNamespacedSecret({
      namespace: "dvm-system",
      body: { metadata: { name: "destination" }, stringData: { kubeconfig: readFileSync(destination.kubeconfigPath, "utf8") } },
    });
    const table = "bench-nodes";
    const client = createLedgerClient({
      endpoint: dynamo.endpoint,
      region: "us-east-1",
      credentials: { accessKeyId: "dvmlocal", secretAccessKey: "dvmlocal" },
    });
    await ensureLedgerTable(client, table);
    const bodies = Object.fromEntries(EXECUTABLE_PHASES.map((phase) => [phase, PHASE_BODIES[phase]])) as Record<ExecutablePhaseName, PhaseBody>;
    const noPods = () => ({ client: [], server: [] });
    let timing: DataPhaseTiming = { clientLog: "", cgroupMarks: noPods() };
    bodies.RunRsyncOperations = async (ctx) => {
      timing.firstEntry ??= performance.now();
      const outcome = await PHASE_BODIES.RunRsyncOperations(ctx);
      if (outcome.kind === "advance") {
        timing.advancedAt = performance.now();
        const pods = await ctx.clusters.source.list(KINDS.Pod, "bench", { [LABEL.role]: CLIENT_ROLE });
        for (const pod of pods) timing.clientLog += await ctx.clusters.source.podLogs("bench", pod.metadata.name, "rsync", 200);
        const servers = await ctx.clusters.destination.list(KINDS.Pod, "bench", { [LABEL.role]: SERVER_ROLE });
        timing.cgroupMarks = { client: pods.flatMap(cgroupMarks), server: servers.flatMap(cgroupMarks) };
      }
      return outcome;
    };
    const runner = createPhaseRunner({
      hostKubeConfig: source.kubeConfig(),
      ledgerTableName: table,
      dynamo: client,
      bodies,
      leaseMs: 600_000,
      policy: { ...DEFAULT_MIGRATION_POLICY, defaultTransferImage: images.transferImage },
    });
    /** One whole migration of bench/<pvc>; its data phase's wall time and rsync's closing statistics. */
    const migrate = async (name: string, pvc: string, storageClass: string): Promise<MigrationRun & { sessionMBps: number }> => {
      timing = { clientLog: "", cgroupMarks: noPods() };
      const request = await createBenchDvm(source.kubeConfig(), name, pvc, storageClass);
      for (let step = 0; step < 2_000; step++) {
        const result = await runner.run(request);
        if (result.kind === "finished" || result.kind === "gone") break;
        const delay = "requeueAfterMs" in result ? result.requeueAfterMs : "retryAfterMs" in result ? result.retryAfterMs : 0;
        // The relay forwards on every change of an owned pod (a client pod finishing, say); this loop
        // stands in for it by polling at most every 250 ms instead of waiting out the requeue delay.
        await new Promise((resolve) => setTimeout(resolve, Math.min(delay, 250)));
      }
      const { firstEntry, advancedAt, clientLog, cgroupMarks } = timing;
      if (firstEntry === undefined || advancedAt === undefined) throw new Error(`migration ${name} did not complete its data phase`);
      const session = parseRsyncProgress(clientLog);
      if (!session.averageBytesPerSecond) throw new Error(`no closing statistics in the client's log:\n${clientLog.slice(-500)}`);
      return { phaseSeconds: (advancedAt - firstEntry) / 1000, sessionMBps: session.averageBytesPerSecond / 1e6, session, cgroupMarks };
    };

    // Time to first byte first, with nothing else of this run on the machine; the relay drives it.
    const ledger = new DynamoPhaseLedger({ client, tableName: table });
    const firstByte = await runFirstByteBench({
      source,
      destination,
      storageClass: "standard",
      run: (request) => runner.run(request),
      history: (uid) => ledger.history(uid),
      log,
    });
    log("");

    // Ours: a whole migration, timing the data phase and keeping the client's own closing statistics.
    const files = await migrate("bench", "data", "standard");
    const phaseSeconds = files.phaseSeconds;

    // Ours again, a Block volume of the same size: random content on a loop device offered as a local
    // PV on each node (infra/dev/local/nodes/blockVolumes.ts), moved as the device's content.
    const loops: LoopVolume[] = [];
    let block: { phaseSeconds: number; sessionMBps: number };
    try {
      const blockBytes = mib * MiB;
      const folder = join(nodes.stateDir, "block");
      loops.push(
        await createLoopVolume(source.kubeConfig(), {
          folder,
          name: "bench-src",
          sizeBytes: blockBytes,
          nodeName: source.node.nodeName,
          content: randomBytes(blockBytes),
        }),
        await createLoopVolume(destination.kubeConfig(), { folder, name: "bench-dst", sizeBytes: blockBytes, nodeName: destination.node.nodeName }),
      );
      await createBlockClaim(source.kubeConfig(), "bench", "disk", blockBytes);
      block = await migrate("bench-block", "disk", LOOP_STORAGE_CLASS);
    } finally {
      for (const loop of loops) await loop.remove();
    }

    // Plain: the same arguments, daemon to client, in the same two namespaces, no TLS, no pods.
    const plainRoot = join(destination.node.tmpDir, "bench-plain");
    mkdirSync(join(plainRoot, "data"), { recursive: true });
    const port = 8730;
    writeFileSync(
      join(plainRoot, "rsyncd.conf"),
      `port = ${port}\nuse chroot = no\nnumeric ids = yes\nmunge symlinks = no\n[plain]\npath = /tmp/bench-plain/data\nread only = no\nuid = 0\ngid = 0\n`,
    );
    const daemon = spawn(
      "nsenter",
      [`--target=${destination.node.holderPid}`, "--mount", "--net", "--", "rsync", "--daemon", "--no-detach", "--config=/tmp/bench-plain/rsyncd.conf"],
      { stdio: "ignore" },
    );
    try {
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      /** Our client's arguments, pointed at the plain daemon's emptied folder; the source as the node sees it. */
      const plain = async (sourceFolder: string): Promise<PlainRun> => {
        rmSync(join(plainRoot, "data"), { recursive: true, force: true });
        mkdirSync(join(plainRoot, "data"));
        const inNode = sourceFolder.replace(`/proc/${source.node.holderPid}/root`, "");
        const args = rsyncClientArgs({ sourcePath: inNode, module: "plain", user: "bench", host: destination.node.nodeIp, port, preserveOwnership: true });
        const t0 = performance.now();
        let clientPid = 0;
        // nsenter enters no pid namespace, so it execs rsync in its own process: the pid is the client's.
        await run("nsenter", [`--target=${source.node.holderPid}`, "--mount", "--net", "--", "rsync", ...args], (pid) => (clientPid = pid));
        return { seconds: (performance.now() - t0) / 1000, clientPid, daemonPid: daemon.pid ?? 0 };
      };
      const plainSeconds = (await plain(folder)).seconds;
      const result: Omit<NodesBenchResult, "relayPod" | "firstByte" | "smallFiles"> = {
        bytes: data.bytes,
        files: data.files,
        phaseSeconds,
        phaseMBps: mbps(data.bytes, phaseSeconds),
        rsyncSessionMBps: files.sessionMBps,
        plainSeconds,
        plainMBps: mbps(data.bytes, plainSeconds),
        blockPhaseSeconds: block.phaseSeconds,
        blockPhaseMBps: mbps(mib * MiB, block.phaseSeconds),
        blockSessionMBps: block.sessionMBps,
      };
      log(`ours, data phase (RunRsyncOperations, pod start and polls included): ${result.phaseMBps.toFixed(1)} MB/s (${phaseSeconds.toFixed(1)} s)`);
      log(`ours, rsync's own session rate through the TLS tunnel: ${result.rsyncSessionMBps.toFixed(1)} MB/s`);
      log(
        `ours, a Block volume of the same size (${mib} MiB device): data phase ${result.blockPhaseMBps.toFixed(1)} MB/s (${block.phaseSeconds.toFixed(1)} s), rsync session ${result.blockSessionMBps.toFixed(1)} MB/s`,
      );
      log(`plain rsync daemon <- rsync between the same two network namespaces: ${result.plainMBps.toFixed(1)} MB/s (${plainSeconds.toFixed(1)} s)`);
      log(
        `ratio, data phase / plain: ${(result.phaseMBps / result.plainMBps).toFixed(2)}; rsync session / plain: ${(result.rsyncSessionMBps / result.plainMBps).toFixed(2)} (aim: at least 0.7)`,
      );
      log(
        `ratio, Block / file system through the tunnel: data phase ${(result.blockPhaseMBps / result.phaseMBps).toFixed(2)}, rsync session ${(result.blockSessionMBps / result.rsyncSessionMBps).toFixed(2)}`,
      );
      log("");
      const small = await runSmallFilesBench({
        source,
        storageClass: "standard",
        files: smallFiles,
        migrate: (name, pvc) => migrate(name, pvc, "standard"),
        plain,
        log,
      });
      log("");
      const relayPod = await runRelayPodBench({ nodes, dynamoEndpoint: dynamo.endpoint, log });
      return { ...result, firstByte, smallFiles: small, relayPod };
    } finally {
      daemon.kill("SIGKILL");
    }
  } finally {
    await dynamo.stop();
    await nodes.stop();
  }
}

/** What names a pod's processes in their cgroup paths: its uid (the kubelet's pod cgroups) and its containers' ids (containerd's own, without pod cgroups, as here). */
function cgroupMarks(pod: PodObject): string[] {
  // The API's containerStatuses carry containerID ("containerd://<id>"); the project's type leaves it out.
  const statuses = (pod.status?.containerStatuses ?? []) as { containerID?: string }[];
  const ids = statuses.flatMap((c) => (c.containerID ? [c.containerID.replace(/^[a-z]+:\/\//, "")] : []));
  return [...(pod.metadata.uid ? [pod.metadata.uid] : []), ...ids];
}

function run(command: string, args: string[], onSpawn?: (pid: number) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ["ignore", "ignore", "pipe"] });
    if (child.pid !== undefined) onSpawn?.(child.pid);
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")));
    child.on("error", reject);
    child.on("close", (code) => (code === 0 ? resolve() : reject(new Error(`${command} exited ${code}: ${stderr.slice(-500)}`))));
  });
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  runNodesBench().then(
    () => process.exit(0),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}
