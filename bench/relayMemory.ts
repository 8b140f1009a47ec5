/**
 * The relay's own memory, alone in its process: the relay image's bundle (infra/deploy/relay/build.mjs) run by
 * plain node, leader election on, forwarding to a Lambda Invoke
 * stand-in (asynchronous invocations, answered at once). DVMs are created in steps (50, 200, 1,000 by
 * default) on a control plane of its own (kube-apiserver + etcd), and once the relay has forwarded each
 * of them and settled, its resident set (VmRSS from /proc) is read: how the relay grows with live DVMs.
 *
 *   npx tsx bench/relayMemory.ts
 *   DVM_BENCH_RELAY_MEMORY_DVMS=50,200,1000 npx tsx bench/relayMemory.ts
 */
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { CoreV1Api, CustomObjectsApi } from "@kubernetes/client-node";
import { DVM_API_VERSION, DVM_GROUP, DVM_KIND, DVM_PLURAL, DVM_VERSION } from "../src/dvm/types";
import { startControlPlane } from "../src/local/controlPlane";
import { findFreePort } from "../src/local/ports";
import { mapLimit } from "../test/chaos/harness/fixture";
import { startLambdaStandIn } from "../test/support/lambdaStandIn";

const REPO_ROOT = fileURLToPath(new URL("../", import.meta.url));
const RELAY_BUILD = fileURLToPath(new URL("../infra/deploy/relay/build.mjs", import.meta.url));
const MiB = 1024 * 1024;
const SETTLE_MS = 5_000;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export interface RelayMemoryOptions {
  /** Live DVMs at each measurement. Default 50, 200, 1000, or DVM_BENCH_RELAY_MEMORY_DVMS. */
  steps?: number[];
  log?: (line: string) => void;
}

export interface RelayMemoryPoint {
  dvms: number;
  rssMiB: number;
  forwarded: number;
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

export async function runRelayMemoryBench(options: RelayMemoryOptions = {}): Promise<RelayMemoryPoint[]> {
  const log = options.log ?? ((line: string) => console.log(line));
  const steps = options.steps ?? stepsFromEnv();
  const dir = mkdtempSync(join(tmpdir(), "dvm-relay-memory-"));
  const plane = await startControlPlane({ name: "relay-memory", withKwok: false });
  const lambda = await startLambdaStandIn();
  const points: RelayMemoryPoint[] = [];
  let child: ReturnType<typeof spawn> | undefined;
  try {
    // The relay image's own bundle (infra/deploy/relay/build.mjs), so what is measured is what is deployed.
    const { buildRelay } = (await import(RELAY_BUILD)) as { buildRelay(options: { outfile: string }): Promise<{ outfile: string }> };
    const { outfile } = await buildRelay({ outfile: join(dir, "relay.mjs") });
    const kubeConfig = plane.kubeConfig();
    const kubeconfigPath = join(dir, "kubeconfig");
    writeFileSync(kubeconfigPath, kubeConfig.exportConfig(), { mode: 0o600 });
    const namespace = "relay-memory";
    await kubeConfig.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: namespace } } });
    child = spawn(process.execPath, [outfile], {
      cwd: REPO_ROOT,
      env: {
        PATH: process.env.PATH ?? "",
        KUBECONFIG: kubeconfigPath,
        POD_NAME: "relay-memory-0",
        RELAY_FUNCTION_NAME: "dvm-phase",
        RELAY_HEALTH_PORT: String(await findFreePort()),
        RELAY_LEASE_NAMESPACE: namespace,
        AWS_REGION: "us-east-1",
        AWS_ACCESS_KEY_ID: "bench",
        AWS_SECRET_ACCESS_KEY: "bench",
        AWS_ENDPOINT_URL_LAMBDA: lambda.url,
        AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true",
        LOG_LEVEL: "warn",
      },
      stdio: ["ignore", "ignore", "pipe"],
    });
    let stderr = "";
    child.stderr!.on("data", (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4_000)));
    const pid = child.pid!;
    const relay = child;
    // The relay must still be running when its memory is read: say why it is not.
    const rss = () => {
      if (relay.exitCode !== null || relay.signalCode !== null)
        throw new Error(`the relay exited (code ${relay.exitCode}, signal ${relay.signalCode}) before the measurement: ${stderr.trim() || "(no stderr)"}`);
      return rssOf(pid);
    };
    await sleep(3_000);
    log(
      `relay memory: the relay alone (the relay image's bundle, infra/deploy/relay/build.mjs, under plain node ${process.version}), RSS ${rss().toFixed(0)} MiB with no DVM`,
    );
    const custom = kubeConfig.makeApiClient(CustomObjectsApi);
    const spec = { persistentVolumeClaims: [{ name: "data", namespace, targetStorageClass: "standard", targetAccessModes: ["ReadWriteOnce"] }] };
    const forwardedDvms = () => new Set(lambda.invocations.map((i) => i.payload.name)).size;
    let created = 0;
    for (const target of steps) {
      await mapLimit(
        Array.from({ length: target - created }, (_, i) => created + i),
        16,
        (i) =>
          custom.createNamespacedCustomObject({
            group: DVM_GROUP,
            version: DVM_VERSION,
            namespace,
            plural: DVM_PLURAL,
            body: { apiVersion: DVM_API_VERSION, kind: DVM_KIND, metadata: { name: `m-${i}` }, spec },
          }),
      );
      created = target;
      // Every DVM forwarded at least once, then let the relay settle (garbage collection included).
      const deadline = Date.now() + 120_000;
      while (forwardedDvms() < target && Date.now() < deadline) await sleep(500);
      await sleep(SETTLE_MS);
      const forwarded = forwardedDvms();
      const point = { dvms: target, rssMiB: rss(), forwarded };
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
    return points;
  } finally {
    if (child && child.exitCode === null) {
      const exited = new Promise((resolve) => child!.once("exit", resolve));
      child.kill("SIGTERM");
      await Promise.race([exited, sleep(5_000)]);
      if (child.exitCode === null) child.kill("SIGKILL");
    }
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
