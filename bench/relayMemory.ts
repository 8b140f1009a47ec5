/**
 * The relay's own memory, alone in its process: the relay image's bundle (infra/deploy/relay/build.mjs) run by
 * plain node, leader election on, forwarding to a Lambda Invoke
 * stand-in (asynchronous invocations, answered at once). DVMs are created in steps (50, 200, 1,000 by
 * default) on a control plane of its own (kube-apiserver + etcd), and once the relay has forwarded each
 * of them and settled, its resident set (VmRSS from /proc) is read: how the relay grows with live DVMs.
 * Then the relay is restarted, so a fresh one lists every DVM at once (the path that once kept every
 * full DVM), and its resident set and peak (VmHWM) are read once it has forwarded them all.
 *
 * With DVM_BENCH_RELAY_MEMORY_PAD_KIB, every DVM is padded to about that size with what a tenant
 * controls and no bound stops (an annotation of 250 KiB, under the API server's 256 KiB for all
 * annotations, and labels for the rest), to show the relay's memory with DVMs at the object size limit.
 *
 *   npx tsx bench/relayMemory.ts
 *   DVM_BENCH_RELAY_MEMORY_DVMS=50,200,1000 npx tsx bench/relayMemory.ts
 *   DVM_BENCH_RELAY_MEMORY_DVMS=100,1000 DVM_BENCH_RELAY_MEMORY_PAD_KIB=1024 npx tsx bench/relayMemory.ts
 */
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { CoreV1Api, CustomObjectsApi } from "@kubernetes/client-node";
import { startControlPlane } from "../infra/dev/local/controlPlane";
import { findFreePort } from "../infra/dev/local/ports";
import { DVM_API_VERSION, DVM_GROUP, DVM_KIND, DVM_PLURAL, DVM_VERSION } from "../src/dvm/types";
import { mapLimit } from "../test/chaos/harness/fixture";
import { startLambdaStandIn } from "../test/support/lambdaStandIn";

const REPO_ROOT = fileURLToPath(new URL("../", import.meta.url));
const RELAY_BUILD = fileURLToPath(new URL("../infra/deploy/relay/build.mjs", import.meta.url));
const MiB = 1024 * 1024;
const SETTLE_MS = 5_000;
const RELAY_NODE_OPTIONS = "--max-old-space-size=160";
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A create that a loaded API server answered with a timeout (504) or a throttle (429, 5xx) is sent again;
 * the first may have been stored anyway, so AlreadyExists (409) counts as created.
 */
async function createRetrying(create: () => Promise<unknown>): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await create();
      return;
    } catch (error) {
      const code = (error as { code?: number }).code ?? 0;
      if (code === 409) return;
      if (attempt >= 8 || (code !== 429 && code < 500)) throw error;
      await sleep(500 * attempt);
    }
  }
}

export interface RelayMemoryOptions {
  /** Live DVMs at each measurement. Default 50, 200, 1000, or DVM_BENCH_RELAY_MEMORY_DVMS. */
  steps?: number[];
  /** Pad every DVM to about this many KiB (0: unpadded). Default 0, or DVM_BENCH_RELAY_MEMORY_PAD_KIB. */
  padKiB?: number;
  log?: (line: string) => void;
}

export interface RelayMemoryPoint {
  dvms: number;
  rssMiB: number;
  forwarded: number;
  /** The restarted relay's peak resident set (VmHWM), for the point measured after its first list. */
  peakMiB?: number;
  /** This point is a fresh relay's, after listing every DVM at once. */
  relisted?: boolean;
}

function padFromEnv(): number {
  const raw = process.env.DVM_BENCH_RELAY_MEMORY_PAD_KIB;
  if (!raw) return 0;
  const kib = Number(raw);
  if (!Number.isInteger(kib) || kib < 0 || kib > 1400) throw new Error(`DVM_BENCH_RELAY_MEMORY_PAD_KIB must be a whole number up to 1400 (got "${raw}")`);
  return kib;
}

const ANNOTATION_PAD_BYTES = 250 * 1024;
/** Labels of 20 + 63 characters: about 90 bytes each in the object's JSON. */
const LABEL_BYTES = 90;

/** Annotations and labels that make a DVM about `kib` KiB, all of it the creator's to choose. */
export function padding(kib: number): { annotations?: Record<string, string>; labels?: Record<string, string> } {
  if (kib <= 0) return {};
  const bytes = kib * 1024;
  const annotationBytes = Math.min(bytes, ANNOTATION_PAD_BYTES);
  const labelCount = Math.max(0, Math.floor((bytes - annotationBytes) / LABEL_BYTES));
  const value = "v".repeat(63);
  const labels = Object.fromEntries(Array.from({ length: labelCount }, (_, i) => [`pad.example.com/l${String(i).padStart(5, "0")}`, value]));
  return { annotations: { "pad.example.com/annotation": "a".repeat(annotationBytes) }, ...(labelCount > 0 ? { labels } : {}) };
}

function peakOf(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = Number(/VmHWM:\s+(\d+)\s+kB/.exec(status)?.[1] ?? Number.NaN);
  return (kb * 1024) / MiB;
}

function stepsFromEnv(): number[] {
  const raw = process.env.DVM_BENCH_RELAY_MEMORY_DVMS;
  if (!raw) return [50, 200, 1000];
  const steps = raw.split(",").map((s) => Number(s.trim()));
  if (steps.some((n) => !Number.isInteger(n) || n <= 0))
    throw new Error(`DVM_BENCH_RELAY_MEMORY_DVMS must be positive integers, comma-separated (got "${raw}")`);
  return steps.sort((a, b) => a - b);
}

function rssOf(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = Number(/VmRSS:\s+(\d+)\s+kB/.exec(status)?.[1] ?? Number.NaN);
  return (kb * 1024) / MiB;
}

/** One relay process: its pid's memory, and a stop that waits for it to exit (releasing its Lease). */
interface RelayProcess {
  rss(): number;
  peak(): number;
  stop(): Promise<void>;
}

function startRelay(outfile: string, env: Record<string, string>): RelayProcess {
  const child = spawn(process.execPath, [outfile], { cwd: REPO_ROOT, env, stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr!.on("data", (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4_000)));
  const pid = child.pid!;
  // The relay must still be running when its memory is read: say why it is not.
  const alive = () => {
    if (child.exitCode !== null || child.signalCode !== null)
      throw new Error(`the relay exited (code ${child.exitCode}, signal ${child.signalCode}) before the measurement: ${stderr.trim() || "(no stderr)"}`);
  };
  return {
    rss: () => (alive(), rssOf(pid)),
    peak: () => (alive(), peakOf(pid)),
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGTERM");
      await Promise.race([exited, sleep(5_000)]);
      if (child.exitCode === null) child.kill("SIGKILL");
    },
  };
}

export async function runRelayMemoryBench(options: RelayMemoryOptions = {}): Promise<RelayMemoryPoint[]> {
  const log = options.log ?? ((line: string) => console.log(line));
  const steps = options.steps ?? stepsFromEnv();
  const padKiB = options.padKiB ?? padFromEnv();
  const dir = mkdtempSync(join(tmpdir(), "dvm-relay-memory-"));
  const plane = await startControlPlane({ name: "relay-memory", withKwok: false });
  const lambda = await startLambdaStandIn();
  const points: RelayMemoryPoint[] = [];
  let relay: RelayProcess | undefined;
  try {
    // The relay image's own bundle (infra/deploy/relay/build.mjs), so what is measured is what is deployed.
    const { buildRelay } = (await import(RELAY_BUILD)) as { buildRelay(options: { outfile: string }): Promise<{ outfile: string }> };
    const { outfile } = await buildRelay({ outfile: join(dir, "relay.mjs") });
    const kubeConfig = plane.kubeConfig();
    const kubeconfigPath = join(dir, "kubeconfig");
    writeFileSync(kubeconfigPath, kubeConfig.exportConfig(), { mode: 0o600 });
    const namespace = "relay-memory";
    await kubeConfig.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: namespace } } });
    const relayEnv = async (podName: string) => ({
      PATH: process.env.PATH ?? "",
      KUBECONFIG: kubeconfigPath,
      POD_NAME: podName,
      RELAY_FUNCTION_NAME: "dvm-phase",
      RELAY_HEALTH_PORT: String(await findFreePort()),
      RELAY_LEASE_NAMESPACE: namespace,
      AWS_REGION: "us-east-1",
      AWS_ACCESS_KEY_ID: "bench",
      AWS_SECRET_ACCESS_KEY: "bench",
      AWS_ENDPOINT_URL_LAMBDA: lambda.url,
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true",
      LOG_LEVEL: "warn",
      // The heap cap of the shipped Deployment (infra/deploy/k8s/relay-deployment.yaml): without it V8
      // collects lazily and the resident set says more about the machine than about the relay.
      NODE_OPTIONS: RELAY_NODE_OPTIONS,
    });
    relay = startRelay(outfile, await relayEnv("relay-memory-0"));
    await sleep(3_000);
    log(
      `relay memory: the relay alone (the relay image's bundle, infra/deploy/relay/build.mjs, under plain node ${process.version} with ${RELAY_NODE_OPTIONS} as deployed), RSS ${relay.rss().toFixed(0)} MiB with no DVM` +
        (padKiB > 0 ? `; every DVM padded to about ${padKiB} KiB (labels and annotations)` : ""),
    );
    const custom = kubeConfig.makeApiClient(CustomObjectsApi);
    const spec = { persistentVolumeClaims: [{ name: "data", namespace, targetStorageClass: "standard", targetAccessModes: ["ReadWriteOnce"] }] };
    const pad = padding(padKiB);
    const forwardedSince = (from: number) => new Set(lambda.invocations.slice(from).map((i) => i.payload.name)).size;
    const waitForwarded = async (from: number, target: number) => {
      const deadline = Date.now() + 300_000;
      while (forwardedSince(from) < target && Date.now() < deadline) await sleep(500);
      await sleep(SETTLE_MS);
    };
    let created = 0;
    for (const target of steps) {
      await mapLimit(
        Array.from({ length: target - created }, (_, i) => created + i),
        padKiB > 0 ? 4 : 16,
        (i) =>
          createRetrying(() =>
            custom.createNamespacedCustomObject({
              group: DVM_GROUP,
              version: DVM_VERSION,
              namespace,
              plural: DVM_PLURAL,
              body: { apiVersion: DVM_API_VERSION, kind: DVM_KIND, metadata: { name: `m-${i}`, ...pad }, spec },
            }),
          ),
      );
      created = target;
      // Every DVM forwarded at least once, then let the relay settle (garbage collection included).
      await waitForwarded(0, target);
      const forwarded = forwardedSince(0);
      const point = { dvms: target, rssMiB: relay.rss(), forwarded };
      points.push(point);
      log(
        `  ${String(target).padStart(5)} live DVMs: relay RSS ${point.rssMiB.toFixed(0)} MiB (${forwarded} DVMs forwarded, ${lambda.invocations.length} invocations)`,
      );
    }
    if (points.length > 1) {
      const first = points[0]!;
      const last = points.at(-1)!;
      log(`  growth: ${(((last.rssMiB - first.rssMiB) / (last.dvms - first.dvms)) * 1024).toFixed(1)} KiB per DVM from ${first.dvms} to ${last.dvms}`);
    }
    // A fresh relay lists every DVM at once.
    await relay.stop();
    const before = lambda.invocations.length;
    relay = startRelay(outfile, await relayEnv("relay-memory-1"));
    await waitForwarded(before, created);
    const relisted = { dvms: created, rssMiB: relay.rss(), peakMiB: relay.peak(), forwarded: forwardedSince(before), relisted: true };
    points.push(relisted);
    log(
      `  restarted, listing ${created} DVMs: relay RSS ${relisted.rssMiB.toFixed(0)} MiB, peak ${relisted.peakMiB.toFixed(0)} MiB (${relisted.forwarded} DVMs forwarded)`,
    );
    return points;
  } finally {
    await relay?.stop();
    await lambda.close();
    await plane.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true";
  runRelayMemoryBench().then(
    () => process.exit(0),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}
