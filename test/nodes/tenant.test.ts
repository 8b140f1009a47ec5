/**
 * A tenant's plain request, as a new user writes it: a DVM in the application's own namespace copying its
 * `data` PVC (the demo's files: several modes, files only root may read) to a new PVC beside it, on the
 * same cluster, with no runAsRoot and no transferIdentity (issue 26, item 6). And the held-out control: an
 * empty PVC. Neither can work unprivileged here; both must end at the first attempt and say why.
 */
import { statSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { findCondition } from "../../src/dvm/conditions";
import { writeDataset } from "../../src/local/demoData";
import { testClusters } from "../support/clusters";
import { createDvm, driveToCompletion, readDvm, requestFor } from "../support/migration";
import { createBoundPvc, ensureNamespace, type NodeMigrations, startNodeMigrations, testNodes, volumeFolder } from "../support/nodes";

const clusters = testClusters();
const nodes = testNodes();
const run = Date.now().toString(36);
const MiB = 1024 * 1024;
let migrations: NodeMigrations;

beforeAll(async () => {
  migrations = await startNodeMigrations(clusters, nodes, run);
});

afterAll(async () => {
  await migrations?.stop();
});

/** A tenant namespace with a bound `data` PVC, filled by `fill`; returns the namespace. */
async function tenant(prefix: string, fill: (folder: string) => void): Promise<string> {
  const namespace = `${prefix}-${run}`;
  await ensureNamespace(clusters.source, namespace);
  await createBoundPvc(clusters.source, namespace, "data", { storageClass: nodes.storageClass });
  fill(await volumeFolder(clusters.source, nodes.source, namespace, "data"));
  return namespace;
}

/** The tenant's request: its own PVC to a new one in the same namespace, nothing else set. */
async function plainRequest(namespace: string) {
  const dvm = await createDvm(clusters.source, namespace, "copy", {
    persistentVolumeClaims: [
      { name: "data", namespace, targetName: "data-copy", targetStorageClass: nodes.storageClass, targetAccessModes: ["ReadWriteOnce"] },
    ],
  });
  await driveToCompletion(migrations.runner, requestFor(dvm), { maxSteps: 3_000, maxDelayMs: 1_000 });
  return readDvm(clusters.source, namespace, "copy");
}

/** Mode and owner of a PVC's folder on the node, e.g. "750 0:0". */
async function folderMode(namespace: string, name: string): Promise<string> {
  const stats = statSync(await volumeFolder(clusters.source, nodes.source, namespace, name));
  return `${(stats.mode & 0o7777).toString(8)} ${stats.uid}:${stats.gid}`;
}

describe("a tenant's plain request on real pods", () => {
  // The cause: the destination's new volume is a folder of root's, mode 0750 (kube-controller-manager's
  // host-path provisioner; most provisioners hand out root's folders), and the unprivileged rsync daemon
  // (the image's user, 65534) cannot enter it: the client gets "@ERROR: chdir failed" (code 5) whatever the
  // source holds. The empty control fails the same way; its DVM only ends in phase Completed, as every
  // failed DVM does after the failure itinerary.
  it.each([
    ["an empty PVC (the control)", "empty", (_folder: string) => undefined],
    ["the demo's files", "demo", (folder: string) => void writeDataset(folder, { bytes: 16 * MiB, files: 250, seed: 1 })],
  ])("%s: one attempt (not the default 20), with the daemon's reason and the fields to set in the status", async (_what, prefix, fill) => {
    const namespace = await tenant(prefix, fill);
    const dvm = await plainRequest(namespace);
    expect(await folderMode(namespace, "data-copy")).toBe("750 0:0");
    expect(findCondition(dvm.status?.conditions, "Succeeded")).toBeUndefined();
    expect(dvm.status?.rsyncOperations).toEqual([{ pvcReference: { namespace, name: "data" }, currentAttempt: 1, failed: true }]);
    const message = findCondition(dvm.status?.conditions, "Failed")?.message;
    expect(message).toContain("failed after 1 attempt: exit code 5");
    expect(message).toContain("not retried: rsync exit code 5: the daemon refused the connection (@ERROR: chdir failed)");
    expect(message).toMatch(/the rsync daemon said: rsync: \[Receiver\] chdir \/mnt\/pvc-[0-9a-f]+ failed: Permission denied \(13\)/);
    expect(message).toContain("set spec.transferIdentity");
    expect(message).toContain("spec.runAsRoot");
  });
});
