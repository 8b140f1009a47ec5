/**
 * rsync's exit 24 on real pods (issue #26 item 5): an application deletes files while a Stage copies
 * them. The Stage completes with the RsyncFilesVanished Warn condition naming the PVC and the count, and
 * the next Stage copies what is there then, so the destination ends equal to the source. Two node-mode
 * clusters, the real phase bodies driven as the relay drives them, DynamoDB Local for the ledger.
 *
 * The deletion is made certain, not hoped for: one directory holds a large file that sorts first and
 * the files to delete after it. rsync sends a directory's whole file list before it copies a byte, and
 * copies in that order, so once part of the large file has arrived on the destination the small files
 * are listed and not yet read: deleting them then is what rsync reports as vanished.
 */
import { closeSync, openSync, readdirSync, rmSync, statSync, writeFileSync, writeSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CONDITION, findCondition } from "../../src/dvm/conditions";
import type { PhaseRunner } from "../../src/runner/runner";
import { testClusters } from "../support/clusters";
import { manifest, manifestDiff } from "../support/dataset";
import type { FreshTable } from "../support/dynamo";
import { createDvm, driveToCompletion, readDvm, requestFor } from "../support/migration";
import { createBoundPvc, ensureNamespace, NODE_ADMIN_NAMESPACE, startNodeMigrations, testNodes, volumeFolder } from "../support/nodes";
import { found } from "../support/poll";

const clusters = testClusters();
const nodes = testNodes();
const run = `v${Date.now().toString(36)}`;
const MiB = 1024 * 1024;
/** Large enough that rsync is still copying it when the test has seen part of it and deleted the rest. */
const LARGE_BYTES = 256 * MiB;
const DOOMED_FILES = 200;
let table: FreshTable;
let runner: PhaseRunner;

beforeAll(async () => {
  ({ runner, table } = await startNodeMigrations(clusters, nodes, run));
});

afterAll(async () => {
  await table?.drop();
});

/** Writes `bytes` of non-repeating data (rsync moves every byte; nothing on the path compresses). */
function writeLargeFile(path: string, bytes: number): void {
  const fd = openSync(path, "w");
  try {
    const block = Buffer.alloc(MiB);
    for (let written = 0, n = 0; written < bytes; written += block.length, n++) {
      for (let i = 0; i < block.length; i += 8) block.writeUInt32LE((n * 2_654_435_761 + i) >>> 0, i);
      writeSync(fd, block);
    }
  } finally {
    closeSync(fd);
  }
}

/** A transfer temp file of rsync's (".name.XXXXXX") with at least `bytes` in it, in `folder`. */
function partialTransferIn(folder: string, bytes: number): boolean {
  try {
    return readdirSync(folder).some((name) => name.startsWith(".") && statSync(join(folder, name)).size >= bytes);
  } catch {
    return false;
  }
}

describe("rsync exit 24 on real pods", () => {
  it("a Stage during which the app deletes files completes with the Warn condition; the next Stage copies what is there", async () => {
    const namespace = `vanish-${run}`;
    await ensureNamespace(clusters.source, namespace);
    await createBoundPvc(clusters.source, namespace, "app", { storageClass: nodes.storageClass });
    const source = await volumeFolder(clusters.source, nodes.source, namespace, "app");
    writeLargeFile(join(source, "a-large.dat"), LARGE_BYTES);
    const doomed = Array.from({ length: DOOMED_FILES }, (_, i) => `z-${String(i).padStart(4, "0")}.log`);
    for (const name of doomed) writeFileSync(join(source, name), `scratch file ${name}\n`);
    const spec = {
      destinationCluster: { kubeconfigSecretRef: { name: `destination-${run}` } },
      endpointType: "NodePort",
      runAsRoot: true,
      migrationType: "Stage",
      persistentVolumeClaims: [{ name: "app", namespace, targetStorageClass: nodes.storageClass, targetAccessModes: ["ReadWriteOnce"] }],
    };

    const first = await createDvm(clusters.source, NODE_ADMIN_NAMESPACE, `stage1-${run}`, spec);
    let deleted = false;
    await Promise.all([
      driveToCompletion(runner, requestFor(first), { maxSteps: 3_000, maxDelayMs: 1_000 }),
      (async () => {
        // The app's part: once rsync is inside the large file, the scratch files after it go away.
        await found(
          "part of the large file on the destination",
          async () => {
            const folder = await volumeFolder(clusters.destination, nodes.destination, namespace, "app").catch(() => undefined);
            return folder !== undefined && partialTransferIn(folder, 8 * MiB);
          },
          { timeoutMs: 300_000, intervalMs: 50, retryErrors: true },
        );
        for (const name of doomed) rmSync(join(source, name));
        deleted = true;
      })(),
    ]);
    expect(deleted).toBe(true);
    const staged = await readDvm(clusters.source, NODE_ADMIN_NAMESPACE, `stage1-${run}`);
    expect(staged.status?.phase).toBe("Completed");
    const warning = findCondition(staged.status?.conditions, CONDITION.RsyncFilesVanished);
    expect(warning?.category).toBe("Warn");
    expect(warning?.message).toContain(`${namespace}/app: ${DOOMED_FILES} files vanished during the transfer`);

    // The app carries on; the next Stage copies what is there now, and the destination equals the source.
    writeFileSync(join(source, "written-after.txt"), "written after the first Stage\n");
    const second = await createDvm(clusters.source, NODE_ADMIN_NAMESPACE, `stage2-${run}`, spec);
    await driveToCompletion(runner, requestFor(second), { maxSteps: 3_000, maxDelayMs: 1_000 });
    const restaged = await readDvm(clusters.source, NODE_ADMIN_NAMESPACE, `stage2-${run}`);
    expect(restaged.status?.phase).toBe("Completed");
    expect(findCondition(restaged.status?.conditions, CONDITION.RsyncFilesVanished)).toBeUndefined();
    const copy = await manifest(await volumeFolder(clusters.destination, nodes.destination, namespace, "app"), { exclude: (p) => p === "lost+found" });
    expect(manifestDiff(await manifest(source, { exclude: (p) => p === "lost+found" }), copy)).toEqual([]);
    expect(Object.keys(copy)).toContain("written-after.txt");
  });
});
