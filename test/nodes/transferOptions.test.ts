/**
 * spec.transfer on real pods (two node-mode clusters, the real phase bodies, DynamoDB Local): the API
 * server refuses bad option values naming the field; an rsync option beyond the operator's allow-list
 * fails the DVM before any pod exists; a bandwidth limit holds rsync back; at most maxConcurrentVolumes
 * client pods are alive at once (watched on the API server); bytes, rate and time left reach the status,
 * `dvm watch` and `dvm report --json`; a second Stage moves only what changed, and a CutOver ends it.
 */
import { execFile, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { closeSync, openSync, writeFileSync, writeSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { CoreV1Api, Watch } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { quantityValue } from "../../src/dvm/quantity";
import { rightSizedRequest } from "../../src/phases/targetSizing";
import { testClusters } from "../support/clusters";
import { manifest, manifestDiff, writeDataset } from "../support/dataset";
import { dynamoEndpoint } from "../support/dynamo";
import { createDvm, readDvm } from "../support/migration";
import { createBoundPvc, ensureNamespace, nodeMigrationsForFile, testNodes, volumeFolder } from "../support/nodes";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const clusters = testClusters();
const nodes = testNodes();
const run = `t${Date.now().toString(36)}`;
const ADMIN_NAMESPACE = "dvm-system";
const MiB = 1024 * 1024;
const CLIENT_SELECTOR = "dvm.migration.openshift.io/role=rsync-client";
const migrations = nodeMigrationsForFile(clusters, nodes, run);

const TO_DESTINATION = { destinationCluster: { kubeconfigSecretRef: { name: `destination-${run}` } }, endpointType: "NodePort", runAsRoot: true };
const cliEnv = () => ({
  ...process.env,
  KUBECONFIG: clusters.info.source.kubeconfigPath,
  LEDGER_TABLE_NAME: migrations.table.tableName,
  AWS_ENDPOINT_URL_DYNAMODB: dynamoEndpoint()!.endpoint,
  AWS_ACCESS_KEY_ID: "dvmlocal",
  AWS_SECRET_ACCESS_KEY: "dvmlocal",
  AWS_REGION: "us-east-1",
});
const dvmCli = (args: string[]) => promisify(execFile)(process.execPath, ["--import", "tsx", "src/cli/main.ts", ...args], { cwd: ROOT, env: cliEnv() });

/** `dvm watch NAME --plain` as a child process: resolves `firstLine` once it printed something, `output` when it exits 0. */
function watchCommand(name: string): { firstLine: Promise<void>; output: Promise<string> } {
  const child = spawn(
    process.execPath,
    ["--import", "tsx", "src/cli/main.ts", "watch", name, "-n", ADMIN_NAMESPACE, "--plain", "--interval", "1", "--timeout", "580"],
    {
      cwd: ROOT,
      env: cliEnv(),
      stdio: ["ignore", "pipe", "inherit"],
    },
  );
  let text = "";
  let printed: () => void = () => undefined;
  const firstLine = new Promise<void>((resolve) => {
    printed = resolve;
  });
  child.stdout.on("data", (chunk: Buffer) => {
    text += chunk.toString("utf8");
    if (text.includes("\n")) printed();
  });
  const output = new Promise<string>((resolve, reject) => {
    child.on("error", reject);
    child.on("exit", (code) => {
      printed();
      if (code === 0) resolve(text);
      else reject(new Error(`dvm watch exited with ${code}: ${text}`));
    });
  });
  return { firstLine, output };
}

/** A source PVC in `namespace` filled by `fill(folder)`; returns its spec entry and its folder. */
async function sourceVolume(namespace: string, name: string, fill: (folder: string) => void) {
  await ensureNamespace(clusters.source, namespace);
  await createBoundPvc(clusters.source, namespace, name, { storageClass: nodes.storageClass });
  const folder = await volumeFolder(clusters.source, nodes.source, namespace, name);
  fill(folder);
  return { claim: { name, namespace, targetStorageClass: nodes.storageClass, targetAccessModes: ["ReadWriteOnce"] }, folder };
}

async function expectSameData(claim: { namespace: string; name: string }, folder: string): Promise<void> {
  const source = await manifest(folder, { owners: true });
  const copy = await manifest(await volumeFolder(clusters.destination, nodes.destination, claim.namespace, claim.name), {
    owners: true,
    exclude: (p) => p === "lost+found",
  });
  expect(manifestDiff(source, copy)).toEqual([]);
}

/**
 * Watches the source's rsync client pods in `namespaces` through the API server: the most alive at one
 * moment (not yet Succeeded or Failed, not being deleted), every pod seen, and each pod's rsync container
 * times as the kubelet reported them.
 */
async function watchClientPods(namespaces: string[]) {
  const alive = new Set<string>();
  const seen = new Set<string>();
  const rsyncTimes = new Map<string, { startedAt?: string; finishedAt?: string }>();
  let maxAlive = 0;
  type Pod = {
    metadata?: { name?: string; namespace?: string; deletionTimestamp?: string };
    status?: { phase?: string; containerStatuses?: { name: string; state?: { terminated?: { startedAt?: string; finishedAt?: string } } }[] };
  };
  const abort = await new Watch(clusters.source).watch(
    "/api/v1/pods",
    { labelSelector: CLIENT_SELECTOR },
    (type: string, pod: Pod) => {
      if (!namespaces.includes(pod.metadata?.namespace ?? "")) return;
      const name = `${pod.metadata?.namespace}/${pod.metadata?.name}`;
      seen.add(name);
      const terminated = pod.status?.containerStatuses?.find((c) => c.name === "rsync")?.state?.terminated;
      if (terminated)
        rsyncTimes.set(name, {
          ...(terminated.startedAt ? { startedAt: terminated.startedAt } : {}),
          ...(terminated.finishedAt ? { finishedAt: terminated.finishedAt } : {}),
        });
      const live = type !== "DELETED" && !pod.metadata?.deletionTimestamp && pod.status?.phase !== "Succeeded" && pod.status?.phase !== "Failed";
      if (live) alive.add(name);
      else alive.delete(name);
      maxAlive = Math.max(maxAlive, alive.size);
    },
    () => undefined,
  );
  return {
    stop: () => abort.abort(),
    get maxAlive() {
      return maxAlive;
    },
    seen,
    rsyncTimes,
  };
}

describe("transfer options on real pods", () => {
  it("are refused by the API server when their values are bad, each field named", async () => {
    const claim = { name: "db", namespace: ADMIN_NAMESPACE, targetStorageClass: nodes.storageClass, targetAccessModes: ["ReadWriteOnce"] };
    const refusal = async (transfer: Record<string, unknown>, extra: Record<string, unknown> = {}) => {
      const error = await createDvm(clusters.source, ADMIN_NAMESPACE, `bad-${run}-${Math.random().toString(36).slice(2, 8)}`, {
        persistentVolumeClaims: [claim],
        transfer,
        ...extra,
      }).then(
        () => undefined,
        (e: { code?: number; body?: unknown }) => e,
      );
      expect(error?.code).toBe(422);
      return typeof error?.body === "string" ? error.body : JSON.stringify(error?.body);
    };
    const message = await refusal({
      bandwidthLimitKiBPerSecond: 0,
      maxConcurrentVolumes: 0,
      extraOptions: ["-e ssh"],
      resources: { limits: { cpu: "lots" } },
    });
    for (const field of [
      "spec.transfer.bandwidthLimitKiBPerSecond",
      "spec.transfer.maxConcurrentVolumes",
      "spec.transfer.extraOptions[0]",
      "spec.transfer.resources.limits.cpu",
    ])
      expect(message).toContain(field);
    // CEL: requests within limits, and a CutOver that would keep files gone from the source.
    expect(await refusal({ resources: { requests: { memory: "2Gi" }, limits: { memory: "1Gi" } } })).toContain("spec.transfer.resources.requests.memory");
    expect(await refusal({ delete: false }, { migrationType: "CutOver" })).toContain("spec.transfer.delete");
  });

  it("an rsync option beyond the allow-list fails the DVM naming the field, before any pod exists", async () => {
    const namespace = `attack-${run}`;
    const { claim } = await sourceVolume(namespace, "data", (folder) => writeFileSync(join(folder, "f"), "x"));
    // Syntactically a long option, so the API server takes it; the operator's policy does not.
    const dvm = await migrations.migrate(`attack-${run}`, {
      ...TO_DESTINATION,
      persistentVolumeClaims: [claim],
      transfer: { extraOptions: ["--inplace", "--rsh=/bin/sh"] },
    });
    expect(dvm.status.itinerary).toBe("VolumeMigrationFailed");
    expect(JSON.stringify(dvm.status.errors)).toContain("spec.transfer.extraOptions[1]");
    const pods = await clusters.source
      .makeApiClient(CoreV1Api)
      .listNamespacedPod({ namespace, labelSelector: `dvm.migration.openshift.io/uid=${dvm.metadata.uid}` });
    expect(pods.items).toEqual([]);
  });

  it("a bandwidth limit of 10 MiB/s holds 100 MiB to at least 9 s, and at most maxConcurrentVolumes client pods are alive at once", async () => {
    const namespace = `limits-${run}`;
    const big = await sourceVolume(namespace, "big", (folder) => writeFileSync(join(folder, "random.bin"), randomBytes(100 * MiB)));
    const small = await Promise.all(
      ["a", "b"].map((name, i) => sourceVolume(namespace, name, (folder) => writeDataset(folder, { bytes: 4 * MiB, files: 60, seed: 10 + i }))),
    );
    const name = `limits-${run}`;
    const pods = await watchClientPods([namespace]);
    try {
      const created = await createDvm(clusters.source, ADMIN_NAMESPACE, name, {
        ...TO_DESTINATION,
        persistentVolumeClaims: [big.claim, ...small.map((s) => s.claim)],
        transfer: { bandwidthLimitKiBPerSecond: 10 * 1024, maxConcurrentVolumes: 2 },
      });
      // `dvm watch` as a user runs it; the migration starts once it has printed its first reading, so a
      // slow start of the command on a loaded machine cannot miss the transfer.
      const watcher = watchCommand(name);
      await watcher.firstLine;
      await migrations.drive(created);
      const watchOutput = await watcher.output;
      const dvm = await readDvm(clusters.source, ADMIN_NAMESPACE, name);
      expect(dvm.status.phase).toBe("Completed");
      expect(dvm.status.itinerary).toBe("VolumeMigration");
      expect(pods.seen.size).toBe(3);
      expect(pods.maxAlive).toBe(2);

      // rsync's own clock, and the kubelet's, both say the limit held.
      const bigOp = dvm.status.rsyncOperations?.find((o) => o.pvcReference.name === "big");
      expect(bigOp?.verification).toMatchObject({ filesTransferred: 1, totalBytes: 100 * MiB, filesFailed: 0, filesVanished: 0 });
      expect(bigOp?.verification?.bytesTransferred).toBeGreaterThanOrEqual(100 * MiB);
      expect(bigOp?.elapsedSeconds).toBeGreaterThanOrEqual(9);
      const bigPod = dvm.status.successfulPods?.find((p) => p.pvcRef.name === "big")?.name;
      const times = pods.rsyncTimes.get(`${namespace}/${bigPod}`);
      expect(Date.parse(times?.finishedAt ?? "") - Date.parse(times?.startedAt ?? "")).toBeGreaterThanOrEqual(9_000);
      console.info(
        `[figures] 10 MiB/s limit: ${bigOp?.verification?.bytesTransferred} bytes sent in ${bigOp?.elapsedSeconds} s by rsync's clock, ` +
          `${(Date.parse(times!.finishedAt!) - Date.parse(times!.startedAt!)) / 1000} s by the kubelet's; most client pods alive at once: ${pods.maxAlive} of ${pods.seen.size}`,
      );

      // Bytes in the status: per PVC and in total.
      expect(dvm.status.progress).toMatchObject({ percent: 100 });
      expect(dvm.status.progress?.bytesTransferred).toBeGreaterThanOrEqual(100 * MiB);
      expect(dvm.status.progress?.totalBytes).toBeGreaterThan(100 * MiB);
      for (const volume of [big, ...small]) await expectSameData(volume.claim, volume.folder);

      // dvm watch showed bytes of the total, the rate and the time left while the big volume moved.
      expect(watchOutput).toMatch(/limits-[a-z0-9]+\/big {2}running {2}attempt 1 {2}\d+% {2}[\d.]+ MiB of [\d.]+ MiB {2}[\d.]+ MiB\/s {2}\d+:\d\d left/);
      expect(watchOutput).toContain("Completed: the migration succeeded");
      // dvm report --json carries the bytes of the transfer phase.
      const report = JSON.parse((await dvmCli(["report", name, "-n", ADMIN_NAMESPACE, "--json"])).stdout) as {
        bytesTransferred: number;
        rows: { phase: string; bytesTransferred?: number }[];
      };
      expect(report.rows.find((r) => r.phase === "RunRsyncOperations")?.bytesTransferred).toBeGreaterThanOrEqual(100 * MiB);
      expect(report.bytesTransferred).toBe(report.rows.find((r) => r.phase === "RunRsyncOperations")?.bytesTransferred);
    } finally {
      pods.stop();
    }
  });
});

describe("incremental stages on real pods", () => {
  it("a second Stage after changing 1% of the files moves at most 3% of the first stage's bytes, and a CutOver ends equal", async () => {
    const namespace = `stages-${run}`;
    const volume = await sourceVolume(namespace, "data", (folder) => writeDataset(folder, { bytes: 40 * MiB, files: 1_000, seed: 42 }));
    const spec = { ...TO_DESTINATION, persistentVolumeClaims: [volume.claim], migrationType: "Stage" };
    const first = await migrations.migrate(`stage1-${run}`, spec);
    expect(first.status.phase).toBe("Completed");
    expect(first.status.itinerary).toBe("VolumeMigration");
    await expectSameData(volume.claim, volume.folder);
    const firstReport = first.status.rsyncOperations?.[0]?.verification;
    // The first pass sends all of the content (and the file list).
    expect(firstReport?.bytesTransferred).toBeGreaterThanOrEqual(firstReport!.transferredFileSize);
    expect(firstReport!.transferredFileSize).toBeGreaterThan(30 * MiB);

    // 1% of the regular files change (their first 4 KiB), as an application that keeps running would.
    const entries = Object.entries(await manifest(volume.folder)).sort(([a], [b]) => a.localeCompare(b));
    const regular = entries.filter(([, entry]) => entry.type === "file");
    const eligible = regular.filter(([, entry]) => (entry.size ?? 0) >= 4096 && !entry.links).map(([path]) => path);
    const target = Math.ceil(regular.length / 100);
    const changed = Array.from({ length: target }, (_, i) => eligible[Math.floor((i * eligible.length) / target)]!);
    expect(new Set(changed).size).toBe(target);
    for (const path of changed) {
      const fd = openSync(join(volume.folder, path), "r+");
      writeSync(fd, randomBytes(4096), 0, 4096, 0);
      closeSync(fd);
    }

    const second = await migrations.migrate(`stage2-${run}`, spec);
    expect(second.status.phase).toBe("Completed");
    const secondReport = second.status.rsyncOperations?.[0]?.verification;
    expect(secondReport).toMatchObject({ filesTransferred: changed.length, filesFailed: 0, checksumMismatches: 0 });
    expect(secondReport!.filesSkipped + secondReport!.filesTransferred).toBe(firstReport!.filesSkipped + firstReport!.filesTransferred);
    expect(secondReport!.bytesTransferred).toBeLessThanOrEqual(0.03 * firstReport!.bytesTransferred);
    console.info(
      `[figures] incremental stage: ${changed.length} of ${regular.length} files changed; first stage sent ${firstReport!.bytesTransferred} bytes, ` +
        `the second ${secondReport!.bytesTransferred} (${((100 * secondReport!.bytesTransferred) / firstReport!.bytesTransferred).toFixed(2)}%)`,
    );
    await expectSameData(volume.claim, volume.folder);

    // The application is quiesced; the cut-over is the last pass, with checksums: nothing left to send.
    const cutOver = await migrations.migrate(`cutover-${run}`, { ...spec, migrationType: "CutOver", transfer: { verify: true } });
    expect(cutOver.status.phase).toBe("Completed");
    expect(cutOver.status.rsyncOperations?.[0]?.verification).toMatchObject({ filesTransferred: 0, checksumVerified: true, checksumMismatches: 0 });
    await expectSameData(volume.claim, volume.folder);
  });
});

describe("right-sized targets on real pods", () => {
  it("a right-sized destination PVC requests the used size plus headroom, not the source's capacity", async () => {
    const namespace = `sized-${run}`;
    const volume = await sourceVolume(namespace, "data", (folder) => writeDataset(folder, { bytes: 20 * MiB, files: 200, seed: 7 }));
    const dvm = await migrations.migrate(`sized-${run}`, {
      ...TO_DESTINATION,
      persistentVolumeClaims: [volume.claim],
      rightSizeTargets: { headroomPercent: 50 },
    });
    expect(dvm.status.phase).toBe("Completed");
    expect(dvm.status.itinerary).toBe("VolumeMigration");
    const fileBytes = Object.values(await manifest(volume.folder))
      .filter((entry) => entry.type === "file")
      .reduce((sum, entry) => sum + (entry.size ?? 0), 0);
    const decision = dvm.status.targetSizes?.[0];
    expect(decision).toMatchObject({ pvcReference: { namespace, name: "data" }, headroomPercent: 50, sourceSize: "1Gi" });
    // du's apparent size: every file once (hard links once), plus the directories' own size.
    expect(decision!.usedBytes).toBeGreaterThan(0.5 * fileBytes);
    expect(decision!.requested).toBe(rightSizedRequest(decision!.usedBytes, 50));
    const target = await clusters.destination.makeApiClient(CoreV1Api).readNamespacedPersistentVolumeClaim({ namespace, name: "data" });
    expect(target.spec?.resources?.requests?.storage).toBe(decision!.requested);
    expect(quantityValue(decision!.requested)).toBeLessThan(quantityValue("1Gi")!);
    await expectSameData(volume.claim, volume.folder);
    console.info(`[figures] right-sized: ${decision!.usedBytes} bytes used (files ${fileBytes}), requested ${decision!.requested} instead of 1Gi`);
  });
});
