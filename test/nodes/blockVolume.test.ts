/**
 * Block volumes on real pods: a 256 MiB loop device of random content on the source node, offered as a
 * local PersistentVolume with volumeMode Block, moves to a loop device on the destination node over the
 * same mutually verified TLS 1.3 tunnel as file systems (rsync --copy-devices into --write-devices), and
 * arrives with the same sha256. A second Stage after 1% of the device changed sends only the changed
 * blocks (rsync's delta transfer on the device, from its own statistics).
 */
import { createHash, randomBytes } from "node:crypto";
import { closeSync, createReadStream, openSync, writeSync } from "node:fs";
import { join } from "node:path";
import { CoreV1Api } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createBlockClaim, createLoopVolume, LOOP_STORAGE_CLASS, type LoopVolume } from "../../infra/dev/local/nodes/blockVolumes";
import { testClusters } from "../support/clusters";
import { ensureNamespace, type NodeMigrations, startNodeMigrations, testNodes } from "../support/nodes";
import { found } from "../support/poll";

const clusters = testClusters();
const nodes = testNodes();
const run = `b${Date.now().toString(36)}`;
const MiB = 1024 * 1024;
const SIZE = 256 * MiB;
const loops: LoopVolume[] = [];
let migrations: NodeMigrations;

beforeAll(async () => {
  migrations = await startNodeMigrations(clusters, nodes, run);
});

afterAll(async () => {
  for (const loop of loops.reverse()) await loop.remove();
  await migrations?.stop();
});

async function sha256Of(device: string, bytes: number): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(device, { start: 0, end: bytes - 1 })) hash.update(chunk as Buffer);
  return hash.digest("hex");
}

async function loopVolume(cluster: "source" | "destination", name: string, content?: Buffer): Promise<LoopVolume> {
  const loop = await createLoopVolume(clusters[cluster], {
    folder: join(nodes.stateDir, "block"),
    name,
    sizeBytes: SIZE,
    nodeName: nodes[cluster].nodeName,
    ...(content ? { content } : {}),
  });
  loops.push(loop);
  return loop;
}

async function blockClaim(namespace: string, name: string): Promise<void> {
  await createBlockClaim(clusters.source, namespace, name, SIZE);
  const core = clusters.source.makeApiClient(CoreV1Api);
  await found(`PVC ${namespace}/${name} Bound`, async () => (await core.readNamespacedPersistentVolumeClaim({ namespace, name })).status?.phase === "Bound", {
    timeoutMs: 60_000,
    intervalMs: 100,
    retryErrors: true,
  });
}

describe("a Block volume on real pods", () => {
  it("arrives with the same sha256 through the TLS tunnel, and a second Stage sends only the changed blocks", async () => {
    const namespace = `block-${run}`;
    await ensureNamespace(clusters.source, namespace);
    const source = await loopVolume("source", `src-${run}`, randomBytes(SIZE));
    const target = await loopVolume("destination", `dst-${run}`);
    await blockClaim(namespace, "disk");
    const sourceSum = await sha256Of(source.device, SIZE);
    const spec = {
      ...migrations.toDestination,
      runAsRoot: true,
      persistentVolumeClaims: [{ name: "disk", namespace, targetStorageClass: LOOP_STORAGE_CLASS, targetAccessModes: ["ReadWriteOnce"] }],
    };

    const first = await migrations.migrate(`block-${run}`, spec);
    expect(first.status.phase).toBe("Completed");
    expect(first.status.itinerary).toBe("VolumeMigration");
    const op = first.status.rsyncOperations?.[0];
    expect(op).toMatchObject({ succeeded: true, totalBytes: SIZE });
    expect(op?.verification).toMatchObject({ filesTransferred: 1, filesFailed: 0, totalBytes: SIZE });
    expect(await sha256Of(target.device, SIZE)).toBe(sourceSum);
    const destinationPvc = await clusters.destination.makeApiClient(CoreV1Api).readNamespacedPersistentVolumeClaim({ namespace, name: "disk" });
    expect(destinationPvc.spec?.volumeMode).toBe("Block");
    expect(destinationPvc.spec?.volumeName).toBe(target.persistentVolume);
    console.info(
      `[figures] Block volume: ${SIZE / MiB} MiB, ${op?.verification?.bytesTransferred} bytes sent in ${op?.elapsedSeconds} s ` +
        `(${op?.bytesPerSecond} B/s by rsync's account), sha256 ${sourceSum.slice(0, 16)}… on both sides`,
    );

    // 1% of the device changes (spread over 64 places), then a second Stage of the same PVC.
    const fd = openSync(source.device, "r+");
    try {
      const chunk = 40 * 1024; // 64 x 40 KiB = 2.5 MiB, just under 1% of 256 MiB
      for (let i = 0; i < 64; i++) writeSync(fd, randomBytes(chunk), 0, chunk, (i * SIZE) / 64);
    } finally {
      closeSync(fd);
    }
    const changedSum = await sha256Of(source.device, SIZE);
    expect(changedSum).not.toBe(sourceSum);
    const second = await migrations.migrate(`block2-${run}`, spec);
    expect(second.status.phase).toBe("Completed");
    const again = second.status.rsyncOperations?.[0];
    expect(await sha256Of(target.device, SIZE)).toBe(changedSum);
    const firstSent = op?.verification?.bytesTransferred ?? 0;
    const secondSent = again?.verification?.bytesTransferred ?? Number.POSITIVE_INFINITY;
    expect(firstSent).toBeGreaterThanOrEqual(SIZE);
    expect(secondSent / firstSent).toBeLessThanOrEqual(0.03);
    console.info(`[figures] second Block Stage after 1% changed: ${secondSent} bytes sent (${((100 * secondSent) / firstSent).toFixed(2)}% of the first)`);
  });

  it("refuses a change of volume mode and a Block volume without root, naming the fields, before any pod exists", async () => {
    const namespace = `block-bad-${run}`;
    await ensureNamespace(clusters.source, namespace);
    await loopVolume("source", `bad-${run}`);
    await blockClaim(namespace, "disk");
    const dvm = await migrations.migrate(`block-bad-${run}`, {
      ...migrations.toDestination,
      persistentVolumeClaims: [
        { name: "disk", namespace, targetStorageClass: LOOP_STORAGE_CLASS, targetAccessModes: ["ReadWriteOnce"], targetVolumeMode: "Filesystem" },
      ],
    });
    expect(dvm.status.itinerary).toBe("VolumeMigrationFailed");
    const errors = JSON.stringify(dvm.status.errors);
    expect(errors).toContain("spec.persistentVolumeClaims[0].targetVolumeMode");
    expect(errors).toContain("spec.runAsRoot");
    const pods = await clusters.source.makeApiClient(CoreV1Api).listNamespacedPod({ namespace });
    expect(pods.items).toEqual([]);
  });
});
