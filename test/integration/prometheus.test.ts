/**
 * The relay's /metrics scraped by a real Prometheus (Debian's `prometheus`, loopback only, its own config
 * and data directory, a 1 s scrape interval) while the real relay drives a migration on a real
 * kube-apiserver, and PromQL through Prometheus's HTTP API answering with the migration's bytes.
 *
 * The relay is wired as src/relay/main.ts wires it (replica, metrics, health server); its transport is
 * in-process, as in test/integration/relay.test.ts: a stand-in phase function that writes the DVM's
 * status (phase, and status.progress in RunRsyncOperations) through the API server. The bytes are the
 * stand-in's, not rsync's: kwok's pods write no logs, so a kwok migration has no byte counts; real pods
 * (node mode) were outside this test's budget. Everything from the watch event to the PromQL answer is real.
 */

import { type ChildProcess, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CoreV1Api, CustomObjectsApi, type KubeConfig, PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { findFreePort } from "../../infra/dev/local/ports";
import type { ReconcileRequest, RunResult } from "../../src/contracts/request";
import { DVM_API_VERSION, DVM_GROUP, DVM_KIND, DVM_PLURAL, DVM_VERSION } from "../../src/dvm/types";
import { silentLogger } from "../../src/lib/log";
import { type HealthServer, startHealthServer } from "../../src/relay/health";
import { RelayMetrics } from "../../src/relay/metrics";
import { RelayReplica } from "../../src/relay/replica";
import { testClusters } from "../support/clusters";
import { InProcessTransport } from "../support/inProcessTransport";
import { until } from "../support/poll";

const PROMETHEUS = "/usr/bin/prometheus";
const MiB = 1024 * 1024;
const TOTAL = 4 * MiB;
const SPEC = {
  persistentVolumeClaims: [{ name: "data", namespace: "app", targetStorageClass: "standard", targetAccessModes: ["ReadWriteOnce"] }],
};

let host: KubeConfig;
let namespace: string;
let replica: RelayReplica;
let health: HealthServer;
let prometheus: ChildProcess | undefined;
let prometheusLog = "";
let prometheusUrl: string;
let workDir: string;
/** Set by the test when it has what it needs: the stand-in function then lets the migration complete. */
let finish = false;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** How long a wait of this file may take, polled every 500 ms; a timeout shows Prometheus's log tail. */
const WAIT = { timeoutMs: 90_000, context: () => `prometheus log tail:\n${prometheusLog.slice(-2000)}` };

/** One instant PromQL query through the HTTP API: the samples' labels and values. */
async function query(promql: string): Promise<Array<{ metric: Record<string, string>; value: number }>> {
  const response = await fetch(`${prometheusUrl}/api/v1/query?query=${encodeURIComponent(promql)}`);
  const body = (await response.json()) as {
    status: string;
    error?: string;
    data?: { result: Array<{ metric: Record<string, string>; value: [number, string] }> };
  };
  if (body.status !== "success") throw new Error(`PromQL ${promql}: ${body.error ?? response.status}`);
  return (body.data?.result ?? []).map((r) => ({ metric: r.metric, value: Number(r.value[1]) }));
}

async function patchStatus(name: string, status: Record<string, unknown>): Promise<void> {
  await host
    .makeApiClient(CustomObjectsApi)
    .patchNamespacedCustomObjectStatus(
      { group: DVM_GROUP, version: DVM_VERSION, namespace, plural: DVM_PLURAL, name, body: { status } },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    );
}

/**
 * The stand-in phase function: Started, then RunRsyncOperations moving 1 MiB per call up to 4 MiB (the
 * progress a real run writes: bytes done, total, rate), holding there until the test says finish.
 */
let transferred = 0;
async function standInFunction(request: ReconcileRequest): Promise<RunResult> {
  const phase = request.phase;
  if (phase === undefined) {
    await patchStatus(request.name, { phase: "Started" });
    return { kind: "advanced", phase: "Started", next: "Started", requeueAfterMs: 0 };
  }
  if (phase === "Started") {
    await patchStatus(request.name, { phase: "RunRsyncOperations" });
    return { kind: "advanced", phase, next: "RunRsyncOperations", requeueAfterMs: 0 };
  }
  if (transferred < TOTAL) {
    transferred += MiB;
    await patchStatus(request.name, {
      progress: { bytesTransferred: transferred, totalBytes: TOTAL, bytesPerSecond: MiB, percent: (100 * transferred) / TOTAL },
    });
    return { kind: "waiting", phase, reason: "transferring", requeueAfterMs: 500 };
  }
  if (!finish) return { kind: "waiting", phase, reason: "holding for the test", requeueAfterMs: 500 };
  await patchStatus(request.name, { phase: "Completed" });
  return { kind: "finished", phase: "Completed" };
}

beforeAll(async () => {
  if (!existsSync(PROMETHEUS)) {
    throw new Error(`${PROMETHEUS} is missing: this test needs a real Prometheus (apt-get install -y prometheus; infra/dev/bootstrap.mjs installs it)`);
  }
  host = testClusters().source;
  namespace = `metrics-it-${randomUUID().slice(0, 8)}`;
  await host.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: namespace } } });

  // The relay as main.ts wires it, on a loopback health port.
  const metrics = new RelayMetrics({ maxDvmSeries: 1_000, source: () => replica.stats() });
  replica = new RelayReplica({
    relay: { kubeConfig: host, transport: new InProcessTransport(standInFunction), namespace, resyncMs: 0, log: silentLogger, metrics },
    log: silentLogger,
    metrics,
  });
  health = await startHealthServer({
    port: 0,
    host: "127.0.0.1",
    ready: () => replica.ready(),
    stats: () => replica.stats(),
    metrics: () => metrics.render(),
  });
  replica.start();

  // Prometheus: its own config and data directory, loopback only, scraping the relay every second.
  workDir = mkdtempSync(join(tmpdir(), "dvm-prometheus-"));
  const config = join(workDir, "prometheus.yml");
  writeFileSync(
    config,
    [
      "global:",
      "  scrape_interval: 1s",
      "  scrape_timeout: 1s",
      "scrape_configs:",
      "  - job_name: dvm-relay",
      "    metrics_path: /metrics",
      "    static_configs:",
      `      - targets: ["127.0.0.1:${health.port}"]`,
      "",
    ].join("\n"),
  );
  const port = await findFreePort("127.0.0.1");
  prometheusUrl = `http://127.0.0.1:${port}`;
  prometheus = spawn(PROMETHEUS, [`--config.file=${config}`, `--storage.tsdb.path=${join(workDir, "data")}`, `--web.listen-address=127.0.0.1:${port}`], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  const keep = (chunk: Buffer) => {
    prometheusLog = (prometheusLog + chunk.toString()).slice(-20_000);
  };
  prometheus.stdout?.on("data", keep);
  prometheus.stderr?.on("data", keep);
  await until(
    "Prometheus to be ready",
    () =>
      fetch(`${prometheusUrl}/-/ready`).then(
        (r) => r.status,
        () => 0,
      ),
    (status) => status === 200,
    { ...WAIT, timeoutMs: 60_000 },
  );
}, 120_000);

afterAll(async () => {
  if (prometheus && prometheus.exitCode === null) {
    const exited = new Promise((resolve) => prometheus?.once("exit", resolve));
    prometheus.kill("SIGTERM");
    await Promise.race([exited, sleep(10_000)]);
    if (prometheus.exitCode === null) prometheus.kill("SIGKILL");
  }
  await replica?.stop();
  await health?.close();
  if (workDir) rmSync(workDir, { recursive: true, force: true });
  if (namespace)
    await host
      ?.makeApiClient(CoreV1Api)
      .deleteNamespace({ name: namespace })
      .catch(() => undefined);
}, 60_000);

describe("the relay's metrics in a real Prometheus", () => {
  it("answers PromQL with the migration's transferred bytes, total, rate and phase, and the forwards; the DVM's series go when it completes", async () => {
    const created = (await host.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
      group: DVM_GROUP,
      version: DVM_VERSION,
      namespace,
      plural: DVM_PLURAL,
      body: { apiVersion: DVM_API_VERSION, kind: DVM_KIND, metadata: { name: "scraped" }, spec: SPEC },
    })) as { metadata: { uid: string } };
    const selector = `{namespace="${namespace}",name="scraped",uid="${created.metadata.uid}"}`;

    const bytes = await until(
      "Prometheus to hold the migration's 4 MiB",
      () => query(`dvm_relay_dvm_bytes_transferred${selector}`),
      (result) => result[0]?.value === TOTAL,
      WAIT,
    );
    expect(bytes).toHaveLength(1);
    expect(bytes[0]!.metric).toMatchObject({ job: "dvm-relay", namespace, name: "scraped", uid: created.metadata.uid });
    expect((await query(`dvm_relay_dvm_bytes_total${selector}`))[0]?.value).toBe(TOTAL);
    expect((await query(`dvm_relay_dvm_bytes_per_second${selector}`))[0]?.value).toBe(MiB);
    expect((await query(`dvm_relay_dvm_phase${selector}`)).map((r) => r.metric.phase)).toEqual(["RunRsyncOperations"]);
    expect((await query("sum(dvm_relay_forwards_total)"))[0]?.value).toBeGreaterThan(0);
    expect((await query(`sum(dvm_relay_forwards_total{result="waiting"})`))[0]?.value).toBeGreaterThan(0);
    expect((await query("dvm_relay_leader"))[0]?.value).toBe(1);
    expect((await query(`dvm_relay_watch_connected{watch="dvms"}`))[0]?.value).toBe(1);
    expect((await query("sum(dvm_relay_invoke_duration_seconds_count)"))[0]?.value).toBeGreaterThan(0);

    finish = true;
    // Completed: the relay forgets the DVM, and its series leave the scrape (Prometheus marks them stale).
    await until(
      "the DVM's series to leave the scrape",
      () => query(`dvm_relay_dvm_bytes_transferred${selector}`),
      (result) => result.length === 0,
      WAIT,
    );
    expect((await query("dvm_relay_live_dvms"))[0]?.value).toBe(0);
    // What the migration moved stays queryable over a range.
    expect((await query(`max_over_time(dvm_relay_dvm_bytes_transferred${selector}[10m])`))[0]?.value).toBe(TOTAL);
  }, 180_000);
});
