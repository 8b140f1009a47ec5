/**
 * Time to first byte on real pods: from the create (`kubectl apply`) of a one-PVC DVM to the first byte
 * written on the destination volume, and where the time went. The real watch relay forwards to our
 * runner in this process (an InProcessTransport, as `npm start` does, without the Lambda hop), so the
 * waits end on the events as they would deployed.
 *
 * Seen from this process, in ms after the create: every phase's start and end (its ledger entries, as
 * `dvm report` reads them); what the watches of both clusters show of the transfer pods, of
 * local-path's helper pod and of the destination PVC (created, scheduled, each container running,
 * Ready, Bound); and, polled every 20 ms on both destination nodes' disks, the destination volume's
 * folder appearing (local-path provisioned it) and its first file with a byte in it. Read at the first
 * byte: the first lines of each transfer container's log with the container runtime's timestamps (ns),
 * which place stunnel's start, its TLS handshake and rsync's connection. The image is on every node
 * already (imagePullPolicy Never): no pull is in the figure.
 */

import { type Dirent, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { CoreV1Api, CustomObjectsApi, type KubeConfig, Watch } from "@kubernetes/client-node";
import { writeDataset } from "../infra/dev/local/demoData";
import type { NodeCluster } from "../infra/dev/local/nodes/clusters";
import { LOCAL_PATH_NAMESPACE, LOCAL_PATH_ROOT, provisionedOn } from "../infra/dev/local/nodes/localPath";
import { volumeFolder } from "../infra/dev/local/nodes/volumes";
import { LABEL } from "../src/contracts/labels";
import type { ReconcileRequest, RunResult } from "../src/contracts/request";
import type { LedgerEntry } from "../src/ledger";
import { silentLogger } from "../src/lib/log";
import { SERVER_ROLE } from "../src/phases/endpoint";
import { CLIENT_ROLE } from "../src/phases/rsyncOperations";
import { Relay } from "../src/relay/relay";
import { buildTimingReport } from "../src/report";
import { InProcessTransport } from "../test/support/inProcessTransport";
import { BENCH_DVM_NAMESPACE, BENCH_PVC_NAMESPACE, createBenchDvm } from "./nodeDvm";

export interface FirstByteResult {
  /** Create of the DVM to the first byte on the destination volume. */
  seconds: number;
  /** Every event seen, in order: seconds after the create. */
  timeline: { at: number; what: string }[];
}

export interface FirstByteOptions {
  source: NodeCluster;
  destination: NodeCluster;
  storageClass: string;
  /** The phase function: our runner. */
  run: (request: ReconcileRequest) => Promise<RunResult>;
  /** The DVM's ledger entries. */
  history: (uid: string) => Promise<LedgerEntry[]>;
  log: (line: string) => void;
}

const PVC = "first";
const MiB = 1024 * 1024;
const POLL_MS = 20;
const TIMEOUT_MS = 300_000;

export async function runFirstByteBench(options: FirstByteOptions): Promise<FirstByteResult> {
  const { source, destination, log } = options;
  const core = source.kubeConfig().makeApiClient(CoreV1Api);
  await core.createNamespacedPersistentVolumeClaim({
    namespace: BENCH_PVC_NAMESPACE,
    body: {
      metadata: { name: PVC, annotations: provisionedOn(source.node.nodeName) },
      spec: { accessModes: ["ReadWriteOnce"], storageClassName: options.storageClass, resources: { requests: { storage: "1Gi" } } },
    },
  });
  const data = writeDataset(await volumeFolder(source.kubeConfig(), source.nodes, BENCH_PVC_NAMESPACE, PVC), { bytes: 32 * MiB, files: 50 });

  const events = new Map<string, number>();
  let t0 = 0;
  const mark = (what: string, at = Date.now()) => {
    if (t0 && !events.has(what)) events.set(what, at - t0);
  };
  const pods = new Map<string, { kc: KubeConfig; name: string; containers: string[] }>();
  const watches = await Promise.all([
    watchPods(source.kubeConfig(), `/api/v1/namespaces/${BENCH_PVC_NAMESPACE}/pods`, mark, pods),
    watchPods(destination.kubeConfig(), "/api/v1/pods", mark, pods),
    watchClaims(destination.kubeConfig(), mark),
  ]);
  const relay = new Relay({
    kubeConfig: source.kubeConfig(),
    transport: new InProcessTransport((request) => options.run(request)),
    clusters: [{ name: "destination", kubeConfig: destination.kubeConfig() }],
    namespace: BENCH_DVM_NAMESPACE,
    log: silentLogger,
  });
  relay.start();
  try {
    t0 = Date.now();
    const request = await createBenchDvm(source.kubeConfig(), "first-byte", PVC, options.storageClass);
    mark("DVM created (the create call returned)");
    const roots = destination.nodes.map((n) => join(n.tmpDir, LOCAL_PATH_ROOT.replace(/^\/tmp\//, "")));
    for (;;) {
      const folder = provisionedFolder(roots);
      if (folder) {
        mark("destination volume's folder on the node (local-path made it)");
        if (hasByte(folder)) break;
      }
      if (Date.now() - t0 > TIMEOUT_MS) throw new Error(`no byte on the destination volume ${TIMEOUT_MS / 1000} s after the DVM's create`);
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    }
    mark("FIRST BYTE on the destination volume");
    for (const [label, pod] of pods)
      for (const container of pod.containers)
        for (const line of await logLines(pod.kc, pod.name, container)) mark(`${label}, ${container} log: ${line.text}`, line.at);
    const seconds = (events.get("FIRST BYTE on the destination volume") ?? 0) / 1000;
    await completed(source.kubeConfig(), "first-byte");
    for (const row of buildTimingReport({ entries: await options.history(request.uid), now: Date.now(), itinerary: "VolumeMigration" }).rows) {
      if (row.startedAt === undefined) continue;
      events.set(`phase ${row.phase} started`, row.startedAt - t0);
      if (row.finishedAt !== undefined) events.set(`phase ${row.phase} ended (${row.elapsedSeconds?.toFixed(2)} s)`, row.finishedAt - t0);
    }
    const timeline = [...events].map(([what, ms]) => ({ at: ms / 1000, what })).sort((a, b) => a.at - b.at);
    log(
      `time to first byte: ${seconds.toFixed(2)} s from the create of a one-PVC DVM (${(data.bytes / MiB).toFixed(0)} MiB in ${data.files} files) to the first byte on the destination volume (relay and runner in this process, the volume polled every ${POLL_MS} ms); where it went, s after the create:`,
    );
    for (const { at, what } of timeline) if (at <= seconds) log(`  +${at.toFixed(2)}  ${what}`);
    for (const line of breakdown(events, seconds)) log(line);
    return { seconds, timeline };
  } finally {
    await relay.stop();
    for (const watch of watches) watch.abort();
  }
}

/** The spans that add up to the figure, from the timeline. */
function breakdown(events: Map<string, number>, seconds: number): string[] {
  const at = (prefix: string) => [...events].find(([what]) => what.startsWith(prefix))?.[1];
  const span = (label: string, from: number | undefined, to: number | undefined) =>
    from !== undefined && to !== undefined ? [`  ${label}: ${((to - from) / 1000).toFixed(2)} s`] : [];
  const transferPods = at("phase CreateRsyncTransferPods started");
  const serverRunning = at("rsync server pod: all containers running");
  const clientCreated = at("rsync client pod: created");
  const clientRunning = at("rsync client pod: all containers running");
  const clientTunnel = at("rsync client pod, stunnel log:");
  const connected = [...events].find(([what]) => what.startsWith("rsync server pod, rsync log:") && what.includes("connect from"))?.[1];
  return [
    "breakdown:",
    ...span("DVM create to CreateRsyncTransferPods (the API phases before the pods)", 0, transferPods),
    ...span("destination PVC provisioning (PVC created to Bound; local-path's helper pod)", at("destination PVC: created"), at("destination PVC: Bound")),
    ...span("rsync server pod: created to all containers running", at("rsync server pod: created"), serverRunning),
    ...span("server pod running to the client pod's create (the wait phase ends, RunRsyncOperations starts)", serverRunning, clientCreated),
    ...span("rsync client pod: created to all containers running", clientCreated, clientRunning),
    ...span("client running to the first byte (stunnel listening, TLS 1.3 handshake, rsync's file list)", clientRunning, seconds * 1000),
    ...span(
      "  of which: the client's stunnel logging its start to the daemon's 'connect from' (the wait for stunnel, TLS 1.3 across the nodes)",
      clientTunnel,
      connected,
    ),
    ...span("  of which: the daemon's 'connect from' to the first byte (rsync's handshake, file list, first file)", connected, seconds * 1000),
  ];
}

type Mark = (what: string, at?: number) => void;

/**
 * The first lines of a container's log, each with the runtime's timestamp; rsync's progress lines and
 * stunnel's start-up banner (its "[ui]" lines after the first) left out.
 */
async function logLines(kc: KubeConfig, name: string, container: string): Promise<{ at: number; text: string }[]> {
  const text = await kc
    .makeApiClient(CoreV1Api)
    .readNamespacedPodLog({ name, namespace: BENCH_PVC_NAMESPACE, container, timestamps: true, limitBytes: 16_384 })
    .catch(() => "");
  const lines: { at: number; text: string }[] = [];
  for (const line of String(text).split("\n")) {
    // "2026-12-03T15:20:01.123456789Z text": milliseconds are what Date parses.
    const match = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?Z (.*)$/.exec(line);
    if (!match || match[3]!.includes("\r") || match[3]!.trim() === "") continue;
    if (match[3]!.includes("[ui]:") && lines.some((l) => l.text.includes("[ui]:"))) continue;
    lines.push({ at: Date.parse(`${match[1]}${(match[2] ?? ".0").slice(0, 4)}Z`), text: match[3]!.slice(0, 120) });
    if (lines.length >= 10) break;
  }
  return lines;
}

const ROLE_NAMES: Record<string, string> = { [SERVER_ROLE]: "rsync server pod", [CLIENT_ROLE]: "rsync client pod" };

interface WatchedPod {
  metadata?: { name?: string; namespace?: string; labels?: Record<string, string> };
  spec?: { nodeName?: string };
  status?: { phase?: string; conditions?: { type: string; status: string }[]; containerStatuses?: { name: string; state?: { running?: unknown } }[] };
}

function podName(pod: WatchedPod): string | undefined {
  const role = pod.metadata?.labels?.[LABEL.role];
  if (role && pod.metadata?.namespace === BENCH_PVC_NAMESPACE) return ROLE_NAMES[role] ?? `${role} pod`;
  if (pod.metadata?.namespace === LOCAL_PATH_NAMESPACE && pod.metadata.name?.startsWith("helper-pod-create-")) return "local-path helper pod";
  return undefined;
}

type TransferPods = Map<string, { kc: KubeConfig; name: string; containers: string[] }>;

async function watchPods(kc: KubeConfig, path: string, mark: Mark, transferPods: TransferPods): Promise<AbortController> {
  return new Watch(kc).watch(
    path,
    {},
    (type, pod: WatchedPod & { spec?: { containers?: { name: string }[] } }) => {
      const name = podName(pod);
      if (!name) return;
      if (pod.metadata?.namespace === BENCH_PVC_NAMESPACE && pod.metadata.name)
        transferPods.set(name, { kc, name: pod.metadata.name, containers: (pod.spec?.containers ?? []).map((c) => c.name) });
      if (type === "DELETED") return mark(`${name}: deleted`);
      mark(`${name}: created`);
      if (pod.spec?.nodeName) mark(`${name}: scheduled`);
      const statuses = pod.status?.containerStatuses ?? [];
      for (const c of statuses) if (c.state?.running) mark(`${name}: container ${c.name} running`);
      if (statuses.length > 0 && statuses.every((c) => c.state?.running)) mark(`${name}: all containers running`);
      if (pod.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True")) mark(`${name}: Ready`);
      if (pod.status?.phase === "Succeeded" || pod.status?.phase === "Failed") mark(`${name}: ${pod.status.phase}`);
    },
    () => undefined,
  );
}

async function watchClaims(kc: KubeConfig, mark: Mark): Promise<AbortController> {
  return new Watch(kc).watch(
    `/api/v1/namespaces/${BENCH_PVC_NAMESPACE}/persistentvolumeclaims`,
    {},
    (_type, claim: { metadata?: { name?: string; annotations?: Record<string, string> }; status?: { phase?: string } }) => {
      if (claim.metadata?.name !== PVC) return;
      mark("destination PVC: created");
      if (claim.metadata.annotations?.["volume.kubernetes.io/selected-node"]) mark("destination PVC: node selected (the scheduler placed its first pod)");
      if (claim.status?.phase === "Bound") mark("destination PVC: Bound");
    },
    () => undefined,
  );
}

/** local-path's folder of the destination PVC (pvc-<uid>_<namespace>_<name>) on either node, once made. */
function provisionedFolder(roots: readonly string[]): string | undefined {
  for (const root of roots) {
    let entries: string[];
    try {
      entries = readdirSync(root);
    } catch {
      continue;
    }
    const folder = entries.find((e) => e.endsWith(`_${BENCH_PVC_NAMESPACE}_${PVC}`));
    if (folder) return join(root, folder);
  }
  return undefined;
}

/** Some regular file under `folder` has a byte (rsync's temporary files included). */
function hasByte(folder: string): boolean {
  let entries: Dirent[];
  try {
    entries = readdirSync(folder, { withFileTypes: true });
  } catch {
    return false;
  }
  for (const entry of entries) {
    const path = join(folder, entry.name);
    if (entry.isDirectory() && hasByte(path)) return true;
    if (entry.isFile()) {
      try {
        if (statSync(path).size > 0) return true;
      } catch {
        // renamed or removed between the listing and the stat
      }
    }
  }
  return false;
}

async function completed(kc: KubeConfig, name: string): Promise<void> {
  const api = kc.makeApiClient(CustomObjectsApi);
  const t0 = Date.now();
  for (;;) {
    const dvm = (await api.getNamespacedCustomObject({
      group: "migration.openshift.io",
      version: "v1alpha1",
      namespace: BENCH_DVM_NAMESPACE,
      plural: "directvolumemigrations",
      name,
    })) as { status?: { phase?: string } };
    if (dvm.status?.phase === "Completed") return;
    if (Date.now() - t0 > TIMEOUT_MS) throw new Error(`DVM ${name} not Completed ${TIMEOUT_MS / 1000} s after its first byte (phase ${dvm.status?.phase})`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}
