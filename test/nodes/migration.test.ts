/**
 * Whole migrations on real pods: two node-mode clusters (a real kubelet, containerd and runc each, in
 * their own network namespaces), the real phase bodies driven the way the relay drives them, DynamoDB
 * Local for the ledger. The transfer image is built from Debian's packages. Every test compares a
 * manifest of the destination's files (content, type, mode, link target, hard links, and owners where
 * they are meant to be kept) with the source's.
 */
import { execFile } from "node:child_process";
import { chownSync, mkdirSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { CoreV1Api, StorageV1Api } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { ABSOLUTE_LINK, ABSOLUTE_LINK_TARGET } from "../../infra/dev/local/demoData";
import { findCondition } from "../../src/dvm/conditions";
import { testClusters } from "../support/clusters";
import { type Manifest, manifest, manifestDiff, writeDataset } from "../support/dataset";
import { dynamoEndpoint } from "../support/dynamo";
import { createDvm, requestFor, transferLeftovers } from "../support/migration";
import { createBoundPvc, ensureNamespace, nodeMigrationsForFile, testNodes, volumeFolder } from "../support/nodes";
import { found } from "../support/poll";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const clusters = testClusters();
const nodes = testNodes();
const run = Date.now().toString(36);
const ADMIN_NAMESPACE = "dvm-system";
const MiB = 1024 * 1024;
const migrations = nodeMigrationsForFile(clusters, nodes, run);

/** Source namespaces with one seeded PVC each; returns the PVC list of a DVM spec and the source folders. */
async function seededVolumes(prefix: string, volumes: { name: string; bytes: number; files: number }[], owners?: { uid: number; gid: number }[]) {
  const claims = [];
  const folders: Record<string, string> = {};
  for (const [i, volume] of volumes.entries()) {
    const namespace = `${prefix}${i}-${run}`;
    await ensureNamespace(clusters.source, namespace);
    await createBoundPvc(clusters.source, namespace, volume.name, { storageClass: nodes.storageClass });
    const folder = await volumeFolder(clusters.source, nodes.source, namespace, volume.name);
    writeDataset(folder, { bytes: volume.bytes, files: volume.files, seed: i + 1, ...(owners ? { owners } : {}) });
    folders[`${namespace}/${volume.name}`] = folder;
    claims.push({ name: volume.name, namespace, targetStorageClass: nodes.storageClass, targetAccessModes: ["ReadWriteOnce"] });
  }
  return { claims, folders };
}

const TO_DESTINATION = { destinationCluster: { kubeconfigSecretRef: { name: `destination-${run}` } } };

/** Source and destination manifests of each claim are equal (destination = same namespace and name unless given). */
async function expectSameData(
  claims: { name: string; namespace: string; targetNamespace?: string }[],
  folders: Record<string, string>,
  options: { owners: boolean; destination?: "destination" | "source"; expect?: (source: Manifest) => Manifest },
) {
  const side = options.destination ?? "destination";
  for (const claim of claims) {
    const read = await manifest(folders[`${claim.namespace}/${claim.name}`]!, { owners: options.owners });
    const source = options.expect ? options.expect(read) : read;
    const target = await volumeFolder(clusters[side], nodes[side], claim.targetNamespace ?? claim.namespace, claim.name);
    const copy = await manifest(target, { owners: options.owners, exclude: (p) => p === "lost+found" });
    expect(Object.keys(source).length).toBeGreaterThan(10);
    expect(manifestDiff(source, copy)).toEqual([]);
  }
}

/** A transfer temp file of rsync's (".name.XXXXXX") with at least `bytes` in it, anywhere under `folder`. */
function partialTransferIn(folder: string, bytes: number): boolean {
  try {
    return readdirSync(folder).some((name) => name.startsWith(".") && statSync(join(folder, name)).size >= bytes);
  } catch {
    return false;
  }
}

describe("a migration on real pods", () => {
  it("moves 2 PVCs from 2 namespaces across the two clusters' network namespaces over a NodePort, byte for byte, owners kept", async () => {
    const owners = [
      { uid: 0, gid: 0 },
      { uid: 1234, gid: 5678 },
      { uid: 1001, gid: 1001 },
    ];
    const { claims, folders } = await seededVolumes(
      "shop",
      [
        { name: "db", bytes: 120 * MiB, files: 3_000 },
        { name: "media", bytes: 80 * MiB, files: 2_100 },
      ],
      owners,
    );
    const dvm = await migrations.migrate(`nodeport-${run}`, { ...TO_DESTINATION, persistentVolumeClaims: claims, endpointType: "NodePort", runAsRoot: true });
    expect(dvm.status?.phase).toBe("Completed");
    expect(findCondition(dvm.status?.conditions, "Succeeded")).toBeDefined();
    await expectSameData(claims, folders, { owners: true });
    expect(
      await transferLeftovers(
        clusters,
        dvm.metadata.uid,
        claims.map((c) => c.namespace),
      ),
    ).toEqual([]);

    // Rollback moves the data back: the source lost files and one changed, and gets the copy again.
    const first = folders[`${claims[0]!.namespace}/${claims[0]!.name}`]!;
    rmSync(join(first, readdirSync(first).find((n) => n.startsWith("d0-"))!), { recursive: true });
    writeFileSync(join(first, "large-0.dat"), "changed on the source after the migration");
    const back = await migrations.migrate(`rollback-${run}`, {
      ...TO_DESTINATION,
      persistentVolumeClaims: claims,
      endpointType: "NodePort",
      runAsRoot: true,
      migrationType: "Rollback",
    });
    expect(back.status?.phase).toBe("Completed");
    for (const claim of claims) {
      const copy = await manifest(await volumeFolder(clusters.destination, nodes.destination, claim.namespace, claim.name), {
        owners: true,
        exclude: (p) => p === "lost+found",
      });
      const restored = await manifest(folders[`${claim.namespace}/${claim.name}`]!, { owners: true });
      expect(manifestDiff(copy, restored)).toEqual([]);
    }
    expect(
      await transferLeftovers(
        clusters,
        back.metadata.uid,
        claims.map((c) => c.namespace),
      ),
    ).toEqual([]);
  });

  it("runs unprivileged with spec.transferIdentity: the files arrive owned by and readable for that user", async () => {
    const app = { uid: 1001, gid: 1001 };
    const { claims, folders } = await seededVolumes("app", [{ name: "data", bytes: 20 * MiB, files: 400 }], [app]);
    const claim = claims[0]!;
    chownSync(folders[`${claim.namespace}/${claim.name}`]!, app.uid, app.gid);
    // As a storage admin would for an application that runs as 1001: a volume it may write.
    await ensureNamespace(clusters.destination, claim.namespace);
    await createBoundPvc(clusters.destination, claim.namespace, claim.name, { storageClass: nodes.storageClass });
    chownSync(await volumeFolder(clusters.destination, nodes.destination, claim.namespace, claim.name), app.uid, app.gid);
    const dvm = await migrations.migrate(`unprivileged-${run}`, {
      ...TO_DESTINATION,
      persistentVolumeClaims: claims,
      endpointType: "NodePort",
      transferIdentity: { runAsUser: app.uid, runAsGroup: app.gid },
    });
    expect(dvm.status?.phase).toBe("Completed");
    // An rsync daemon that cannot chroot (unprivileged) sanitizes incoming symlinks: an absolute target
    // loses its leading slash (rsyncd.conf(5), "munge symlinks"). README says so; runAsRoot keeps it.
    const sanitized = (source: Manifest): Manifest => ({ ...source, [ABSOLUTE_LINK]: { ...source[ABSOLUTE_LINK]!, target: ABSOLUTE_LINK_TARGET.slice(1) } });
    await expectSameData(claims, folders, { owners: true, expect: sanitized });
    const copy = await manifest(await volumeFolder(clusters.destination, nodes.destination, claim.namespace, claim.name), { owners: true });
    for (const [path, entry] of Object.entries(copy)) {
      if (entry.type === "symlink") continue;
      expect({ path, uid: entry.uid, ownerCanRead: (parseInt(entry.mode, 8) & 0o400) !== 0 }).toEqual({ path, uid: app.uid, ownerCanRead: true });
    }
  });

  it("migrates within one cluster through a ClusterIP Service", async () => {
    const { claims, folders } = await seededVolumes("same", [{ name: "cache", bytes: 20 * MiB, files: 300 }]);
    const targets = claims.map((c) => ({ ...c, targetNamespace: `${c.namespace}-copy` }));
    const dvm = await migrations.migrate(`same-cluster-${run}`, { persistentVolumeClaims: targets, endpointType: "ClusterIP", runAsRoot: true });
    expect(dvm.status?.phase).toBe("Completed");
    await expectSameData(targets, folders, { owners: true, destination: "source" });
  });
});

describe("faults on real pods", () => {
  it("survives the rsync server pod being deleted mid-transfer: the client is retried and the data is complete", async () => {
    const { claims, folders } = await seededVolumes("fault", [{ name: "big", bytes: 800 * MiB, files: 50 }]);
    const claim = claims[0]!;
    const name = `server-lost-${run}`;
    let deletedMidTransfer = false;
    const dvm = await migrations.migrate(
      name,
      { ...TO_DESTINATION, persistentVolumeClaims: claims, endpointType: "NodePort", runAsRoot: true, backOffLimit: 5 },
      async () => {
        // Once rsync has written part of a large file on the destination, take the server away.
        await found(
          "a partly transferred file",
          async () => {
            const folder = await volumeFolder(clusters.destination, nodes.destination, claim.namespace, claim.name).catch(() => undefined);
            return folder !== undefined && partialTransferIn(folder, 8 * MiB);
          },
          { timeoutMs: 300_000, intervalMs: 50, retryErrors: true },
        );
        const server = (
          await clusters.destination
            .makeApiClient(CoreV1Api)
            .listNamespacedPod({ namespace: claim.namespace, labelSelector: "dvm.migration.openshift.io/role=rsync-server" })
        ).items[0];
        await clusters.destination
          .makeApiClient(CoreV1Api)
          .deleteNamespacedPod({ namespace: claim.namespace, name: server!.metadata!.name!, gracePeriodSeconds: 0 });
        deletedMidTransfer = true;
      },
    );
    expect(deletedMidTransfer).toBe(true);
    expect(dvm.status?.phase).toBe("Completed");
    expect(dvm.status?.rsyncOperations?.[0]?.currentAttempt).toBeGreaterThanOrEqual(2);
    await expectSameData(claims, folders, { owners: true });
  });

  it("fails a transfer that cannot succeed (the destination volume is too small) with rsync's error, and leaves no transfer object", async () => {
    const { claims } = await seededVolumes("tiny", [{ name: "full", bytes: 40 * MiB, files: 100 }]);
    const claim = claims[0]!;
    // A 16 MiB file system behind a volume that claims 1 GiB: only writing finds out.
    const tinyClass = `tiny-${run}`;
    const inNode = `/tmp/${tinyClass}`;
    mkdirSync(`/proc/${nodes.destination.holderPid}/root${inNode}`);
    await promisify(execFile)("nsenter", [
      `--target=${nodes.destination.holderPid}`,
      "--mount",
      "--",
      "mount",
      "-t",
      "tmpfs",
      "-o",
      "size=16m",
      "tiny",
      inNode,
    ]);
    try {
      await clusters.destination
        .makeApiClient(StorageV1Api)
        .createStorageClass({ body: { metadata: { name: tinyClass }, provisioner: "kubernetes.io/no-provisioner" } });
      await clusters.destination.makeApiClient(CoreV1Api).createPersistentVolume({
        body: {
          metadata: { name: tinyClass },
          spec: {
            storageClassName: tinyClass,
            capacity: { storage: "1Gi" },
            accessModes: ["ReadWriteOnce"],
            hostPath: { path: inNode },
            persistentVolumeReclaimPolicy: "Retain",
            // The tmpfs is on destination node 1 only: the server pod must go there.
            nodeAffinity: {
              required: {
                nodeSelectorTerms: [{ matchExpressions: [{ key: "kubernetes.io/hostname", operator: "In", values: [nodes.destination.nodeName] }] }],
              },
            },
          },
        },
      });
      const dvm = await migrations.migrate(`too-small-${run}`, {
        ...TO_DESTINATION,
        persistentVolumeClaims: [{ ...claim, targetStorageClass: tinyClass }],
        endpointType: "NodePort",
        runAsRoot: true,
        backOffLimit: 2,
      });
      expect(dvm.status?.phase).toBe("Completed");
      expect(dvm.status?.itinerary).toBe("VolumeMigrationFailed");
      const failed = findCondition(dvm.status?.conditions, "Failed");
      expect(failed).toBeDefined();
      // rsync's own words reach the status.
      expect(JSON.stringify(dvm.status?.errors)).toMatch(/No space left on device/);
      expect(await transferLeftovers(clusters, dvm.metadata.uid, [claim.namespace])).toEqual([]);
    } finally {
      await promisify(execFile)("nsenter", [`--target=${nodes.destination.holderPid}`, "--mount", "--", "umount", "-l", inNode]).catch(() => undefined);
    }
  });

  it("dvm cancel on a running migration leaves no transfer object on either cluster", async () => {
    const { claims } = await seededVolumes("cancel", [{ name: "slow", bytes: 800 * MiB, files: 50 }]);
    const claim = claims[0]!;
    const name = `cancel-${run}`;
    const dvm = await createDvm(clusters.source, ADMIN_NAMESPACE, name, {
      ...TO_DESTINATION,
      persistentVolumeClaims: claims,
      endpointType: "NodePort",
      runAsRoot: true,
    });
    // Drive it until its client pod runs (the data is moving), then cancel it as a user would.
    for (let step = 0; step < 600; step++) {
      const result = await migrations.runner.run(requestFor(dvm));
      const running = (
        await clusters.source
          .makeApiClient(CoreV1Api)
          .listNamespacedPod({ namespace: claim.namespace, labelSelector: "dvm.migration.openshift.io/role=rsync-client" })
      ).items.some((p) => p.status?.phase === "Running");
      if (running) break;
      if (result.kind === "finished") throw new Error("the migration finished before it could be cancelled");
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    const cancelled = await promisify(execFile)(
      process.execPath,
      ["--import", "tsx", "src/cli/main.ts", "cancel", name, "-n", ADMIN_NAMESPACE, "--timeout", "180"],
      {
        cwd: ROOT,
        env: {
          ...process.env,
          KUBECONFIG: clusters.info.source.kubeconfigPath,
          LEDGER_TABLE_NAME: migrations.table.tableName,
          AWS_ENDPOINT_URL_DYNAMODB: dynamoEndpoint()!.endpoint,
          AWS_ACCESS_KEY_ID: "dvmlocal",
          AWS_SECRET_ACCESS_KEY: "dvmlocal",
          AWS_REGION: "us-east-1",
        },
      },
    );
    expect(cancelled.stdout).toMatch(/Transfer resources removed/);
    expect(await transferLeftovers(clusters, dvm.metadata.uid, [claim.namespace, ADMIN_NAMESPACE])).toEqual([]);
  });
});

describe("images", () => {
  it.each(["source", "destination"] as const)("each %s node has only the three images imported from files, and no pod ever pulled one", async (side) => {
    for (const node of side === "source" ? nodes.sourceNodes : nodes.destinationNodes) {
      const { stdout } = await promisify(execFile)("ctr", ["--address", node.containerdSocket, "--namespace", "k8s.io", "images", "list", "--quiet"]);
      const names = stdout
        .trim()
        .split("\n")
        .filter((line) => !line.startsWith("sha256:"))
        // The relay image, imported from its file by test/nodes/relayPod.test.ts when that file ran first.
        .filter((line) => !line.startsWith("localhost/dvm-relay:"));
      expect(names.sort(), node.nodeName).toEqual([nodes.pauseImage, nodes.transferImage, nodes.localPathImage].sort());
    }
    const events = await clusters[side].makeApiClient(CoreV1Api).listEventForAllNamespaces();
    expect(events.items.filter((e) => e.reason === "Pulled").length).toBeGreaterThan(0);
    // "Pulled" also reports "already present on machine"; an attempt to pull is "Pulling".
    expect(
      events.items.filter((e) => e.reason === "Pulling" || (e.reason === "Pulled" && !/already present/.test(e.message ?? ""))).map((e) => e.message),
    ).toEqual([]);
  });
});
