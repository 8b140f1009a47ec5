/**
 * A tenant's plain request, as a new user writes it: a DVM in the application's own namespace copying its
 * `data` PVC (the demo's files: several modes, files only root may read) to a PVC beside it, on the same
 * cluster, with no runAsRoot and no transferIdentity (issue 26, item 6). And the held-out control: an
 * empty PVC. The destination is a volume whose root is root's folder of mode 0750, as most provisioners
 * hand out (local-path, this harness's default, makes 0777 folders; this test makes the other kind by
 * hand, a PV and its bound PVC that the DVM adopts): the unprivileged daemon cannot enter it, and both
 * must end at the first attempt and say why.
 */

import { mkdirSync, statSync } from "node:fs";
import { CoreV1Api } from "@kubernetes/client-node";
import { CloudEvent, HTTP } from "cloudevents";
import { describe, expect, it } from "vitest";
import { writeDataset } from "../../infra/dev/local/demoData";
import { DynamoHandledEvents, HANDLED_EVENT_RETENTION_SECONDS } from "../../src/aws/ledger/handledEventRecords";
import { findCondition } from "../../src/dvm/conditions";
import type { DirectVolumeMigration } from "../../src/dvm/types";
import { KubeMigrationStore } from "../../src/events/migrationStore";
import { triggerNamespaceRule } from "../../src/events/namespaces";
import { MIGRATION_REQUESTED } from "../../src/events/schema";
import { parseSourceAllowList } from "../../src/events/sources";
import { createTrigger } from "../../src/events/trigger";
import { testClusters } from "../support/clusters";
import { manifest, manifestDiff } from "../support/dataset";
import { createDvm, readDvm, transferLeftovers } from "../support/migration";
import { createBoundPvc, ensureNamespace, nodeMigrationsForFile, testNodes, volumeFolder } from "../support/nodes";

const clusters = testClusters();
const nodes = testNodes();
const run = Date.now().toString(36);
const MiB = 1024 * 1024;
const migrations = nodeMigrationsForFile(clusters, nodes, run);

/** A tenant namespace with a bound `data` PVC, filled by `fill`; returns the namespace. */
async function tenant(prefix: string, fill: (folder: string) => void): Promise<string> {
  const namespace = `${prefix}-${run}`;
  await ensureNamespace(clusters.source, namespace);
  await createBoundPvc(clusters.source, namespace, "data", { storageClass: nodes.storageClass });
  fill(await volumeFolder(clusters.source, nodes.source, namespace, "data"));
  return namespace;
}

/**
 * The destination `data-copy`: a PV over a folder of root's, mode 0750, on the source cluster's first node
 * (where its node affinity holds it), and the PVC bound to it, as a provisioner that makes such folders
 * would leave them.
 */
async function rootOwnedDestination(namespace: string): Promise<void> {
  const node = nodes.sourceNodes[0]!;
  const path = `/var/tmp/dvm-tenant-${namespace}`;
  mkdirSync(`/proc/${node.holderPid}/root${path}`, { recursive: true, mode: 0o750 });
  const core = clusters.source.makeApiClient(CoreV1Api);
  const pv = `${namespace}-data-copy`;
  await core.createPersistentVolume({
    body: {
      metadata: { name: pv },
      spec: {
        capacity: { storage: "1Gi" },
        accessModes: ["ReadWriteOnce"],
        persistentVolumeReclaimPolicy: "Retain",
        storageClassName: "",
        hostPath: { path, type: "Directory" },
        nodeAffinity: { required: { nodeSelectorTerms: [{ matchExpressions: [{ key: "kubernetes.io/hostname", operator: "In", values: [node.nodeName] }] }] } },
      },
    },
  });
  await core.createNamespacedPersistentVolumeClaim({
    namespace,
    body: {
      metadata: { name: "data-copy" },
      spec: { accessModes: ["ReadWriteOnce"], storageClassName: "", volumeName: pv, resources: { requests: { storage: "1Gi" } } },
    },
  });
}

/** The tenant's request: its own PVC to the one beside it in the same namespace, nothing else set. */
async function plainRequest(namespace: string) {
  await rootOwnedDestination(namespace);
  const dvm = await createDvm(clusters.source, namespace, "copy", {
    persistentVolumeClaims: [
      { name: "data", namespace, targetName: "data-copy", targetStorageClass: nodes.storageClass, targetAccessModes: ["ReadWriteOnce"] },
    ],
  });
  await migrations.drive(dvm);
  return readDvm(clusters.source, namespace, "copy");
}

/** Mode and owner of the destination's folder on the node, e.g. "750 0:0". */
function destinationMode(namespace: string): string {
  const stats = statSync(`/proc/${nodes.sourceNodes[0]!.holderPid}/root/var/tmp/dvm-tenant-${namespace}`);
  return `${(stats.mode & 0o7777).toString(8)} ${stats.uid}:${stats.gid}`;
}

describe("a tenant's plain request on real pods", () => {
  // The cause: the destination's volume is a folder of root's, mode 0750 (kube-controller-manager's
  // host-path provisioner and most others hand out such folders), and the unprivileged rsync daemon
  // (the image's user, 65534) cannot enter it: the client gets "@ERROR: chdir failed" (code 5) whatever the
  // source holds. The empty control fails the same way; its DVM only ends in phase Completed, as every
  // failed DVM does after the failure itinerary.
  it.each([
    ["an empty PVC (the control)", "empty", (_folder: string) => undefined],
    ["the demo's files", "demo", (folder: string) => void writeDataset(folder, { bytes: 16 * MiB, files: 250, seed: 1 })],
  ])("%s: one attempt (not the default 20), with the daemon's reason and the fields to set in the status", async (_what, prefix, fill) => {
    const namespace = await tenant(prefix, fill);
    const dvm = await plainRequest(namespace);
    expect(destinationMode(namespace)).toBe("750 0:0");
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

/**
 * The same request as a new user gets it on these clusters: the destination `data-copy` is new, so the
 * DVM creates it in local-path, the default StorageClass (WaitForFirstConsumer: the server pod is its
 * first consumer), whose folders are mode 0777.
 */
describe("a tenant's plain request on local-path, as a new user gets it", () => {
  const CI = "https://ci.example.com/pipelines/26";
  const requestSpec = (namespace: string) => ({
    persistentVolumeClaims: [
      { name: "data", namespace, targetName: "data-copy", targetStorageClass: nodes.storageClass, targetAccessModes: ["ReadWriteOnce"] },
    ],
  });

  async function byKubectl(namespace: string): Promise<DirectVolumeMigration> {
    const dvm = await createDvm(clusters.source, namespace, "copy", requestSpec(namespace));
    await migrations.drive(dvm);
    return readDvm(clusters.source, namespace, "copy");
  }

  /** The CloudEvent a CI system would POST, handled by the trigger's own code (src/events/trigger.ts). */
  async function byTrigger(namespace: string): Promise<DirectVolumeMigration> {
    const trigger = createTrigger({
      store: async () => new KubeMigrationStore(clusters.source),
      allowedSources: parseSourceAllowList(`${CI}*`),
      namespaces: triggerNamespaceRule({ allowedNamespaces: [namespace], adminNamespaces: ["dvm-system"], allowAdminNamespaces: false }),
      handledEvents: new DynamoHandledEvents({
        client: migrations.table.client,
        tableName: migrations.table.tableName,
        retentionSeconds: HANDLED_EVENT_RETENTION_SECONDS,
      }),
    });
    const event = new CloudEvent({
      type: MIGRATION_REQUESTED,
      source: CI,
      id: `run-${namespace}`,
      data: { namespace, namePrefix: "copy", spec: requestSpec(namespace) },
    });
    const message = HTTP.structured(event);
    const reply = await trigger.handleHttp({ headers: message.headers as Record<string, string>, body: message.body as string });
    expect(reply.status).toBe(201);
    const name = reply.status === 201 ? reply.body.migration.name : "";
    const dvm = await readDvm(clusters.source, namespace, name);
    await migrations.drive(dvm);
    return readDvm(clusters.source, namespace, name);
  }

  const summary = (dvm: DirectVolumeMigration) =>
    JSON.stringify({ phase: dvm.status?.phase, ops: dvm.status?.rsyncOperations, conditions: dvm.status?.conditions?.map((c) => `${c.type}: ${c.message}`) });

  async function expectCopied(namespace: string): Promise<void> {
    const source = await manifest(await volumeFolder(clusters.source, nodes.source, namespace, "data"));
    const copy = await manifest(await volumeFolder(clusters.source, nodes.source, namespace, "data-copy"));
    expect(manifestDiff(source, copy)).toEqual([]);
  }

  it("an empty PVC (the control), by kubectl", async () => {
    const namespace = await tenant("lp-empty", () => undefined);
    const dvm = await byKubectl(namespace);
    console.info(`[figures] local-path, empty: ${summary(dvm)}`);
    // The unprivileged daemon may not set the times of local-path's folder (root's, 0777): that alone is a
    // warning, not a failure, as everything inside arrived (here: nothing).
    expect(findCondition(dvm.status?.conditions, "Succeeded"), summary(dvm)).toBeDefined();
    expect(dvm.status?.rsyncOperations?.map((o) => [o.currentAttempt, o.succeeded])).toEqual([[1, true]]);
    expect(findCondition(dvm.status?.conditions, "RsyncRootFolderAttributesNotSet")?.message).toContain("Set spec.transferIdentity");
    await expectCopied(namespace);
    expect(await transferLeftovers(clusters, dvm.metadata.uid, [namespace])).toEqual([]);
  });

  it.each([
    ["by kubectl", "lp-demo", byKubectl],
    ["through the trigger", "lp-event", byTrigger],
  ])("the demo's files (some only root may read), %s", async (_how, prefix, request) => {
    const namespace = await tenant(prefix, (folder) => void writeDataset(folder, { bytes: 16 * MiB, files: 250, seed: 1 }));
    const dvm = await request(namespace);
    console.info(`[figures] local-path, demo files ${_how}: ${summary(dvm)}`);
    // The demo's root-only files (modes 0600, 0640, 0700 of root's) cannot be read by the image's user.
    expect(dvm.status?.rsyncOperations?.map((o) => [o.currentAttempt, o.failed])).toEqual([[1, true]]);
    const message = findCondition(dvm.status?.conditions, "Failed")?.message;
    expect(message).toMatch(
      /failed after 1 attempt: exit code 23: \d+ source files the transfer pods' user may not read: "[^"]+", "[^"]+", "[^"]+" and \d+ more/,
    );
    expect(message).toContain("not retried: rsync exit code 23 with only permission errors");
    expect(message).toContain("set spec.transferIdentity");
    expect(message).toContain("spec.runAsRoot");
    expect(await transferLeftovers(clusters, dvm.metadata.uid, [namespace])).toEqual([]);
  });
});
