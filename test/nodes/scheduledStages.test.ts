/**
 * Scheduled stages on real pods: a schedule's input reaches the trigger three times (plus a duplicate
 * delivery of the first time), each creating one Stage DVM that the real runner drives to its end over
 * the two node-mode clusters. The volume changes a little between runs, and each run moves only that
 * delta, as rsync's statistics in the status say ("Total transferred file size" of the run).
 */

import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { DynamoHandledEvents, HANDLED_EVENT_RETENTION_SECONDS } from "../../src/aws/ledger";
import { scheduleRuns } from "../../src/cli/scheduleRuns";
import type { DirectVolumeMigration } from "../../src/dvm/types";
import { KubeMigrationStore } from "../../src/events/migrationStore";
import { triggerNamespaceRule } from "../../src/events/namespaces";
import { parseSourceAllowList } from "../../src/events/sources";
import { createTrigger } from "../../src/events/trigger";
import { testClusters } from "../support/clusters";
import { manifest, manifestDiff, writeDataset } from "../support/dataset";
import { readDvm } from "../support/migration";
import { createBoundPvc, ensureNamespace, NODE_ADMIN_NAMESPACE, nodeMigrationsForFile, testNodes, volumeFolder } from "../support/nodes";

const clusters = testClusters();
const nodes = testNodes();
const run = Date.now().toString(36);
const MiB = 1024 * 1024;
const migrations = nodeMigrationsForFile(clusters, nodes, run);

const deltaOf = (dvm: DirectVolumeMigration) =>
  (dvm.status.rsyncOperations ?? []).reduce((sum, op) => sum + (op.verification?.transferredFileSize ?? Number.NaN), 0);

describe("a schedule of stages on real pods", () => {
  it("creates one Stage per scheduled time, a duplicate delivery none more, and each later run moves only the delta", async () => {
    const namespace = `sched-${run}`;
    await ensureNamespace(clusters.source, namespace);
    await createBoundPvc(clusters.source, namespace, "data", { storageClass: nodes.storageClass });
    const folder = await volumeFolder(clusters.source, nodes.source, namespace, "data");
    const dataset = writeDataset(folder, { bytes: 24 * MiB, files: 300, seed: 7 });

    let now = 0;
    const trigger = createTrigger({
      store: async () => new KubeMigrationStore(clusters.source),
      handledEvents: new DynamoHandledEvents({
        client: migrations.table.client,
        tableName: migrations.table.tableName,
        retentionSeconds: HANDLED_EVENT_RETENTION_SECONDS,
      }),
      allowedSources: parseSourceAllowList("schedule:*"),
      // The DVMs go where the destination's kubeconfig is: the admin namespace, named exactly and allowed.
      namespaces: triggerNamespaceRule({ allowedNamespaces: [NODE_ADMIN_NAMESPACE], adminNamespaces: [NODE_ADMIN_NAMESPACE], allowAdminNamespaces: true }),
      clock: { now: () => now },
    });
    const spec = {
      ...migrations.toDestination,
      runAsRoot: true,
      persistentVolumeClaimSelector: { namespace, targetStorageClass: nodes.storageClass, targetAccessModes: ["ReadWriteOnce"] },
    };
    const changes = [
      () => writeFileSync(join(folder, "delta-1.bin"), Buffer.alloc(1 * MiB, 1)),
      () => writeFileSync(join(folder, "delta-2.bin"), Buffer.alloc(MiB / 2, 2)),
    ];
    const deltas: number[] = [];
    for (const [i, hour] of ["01", "02", "03"].entries()) {
      const scheduledTime = `2026-12-03T${hour}:00:00Z`;
      now = Date.parse(scheduledTime) + 60_000;
      const input = { schedule: "nightly", scheduledTime, namespace: NODE_ADMIN_NAMESPACE, spec };
      const [first, second] = await Promise.all([trigger.handleSchedule(input), trigger.handleSchedule(input)]);
      expect([first.status, second.status].sort()).toEqual([200, 201]);
      const name = `nightly-20261203-${hour}0000`;
      const dvm = await readDvm(clusters.source, NODE_ADMIN_NAMESPACE, name);
      await migrations.drive(dvm);
      const done = await readDvm(clusters.source, NODE_ADMIN_NAMESPACE, name);
      expect(done.status.phase, JSON.stringify(done.status.errors)).toBe("Completed");
      expect(done.status.errors ?? []).toEqual([]);
      deltas.push(deltaOf(done));
      changes[i]?.();
    }

    console.info(`[figures] scheduled stages: dataset ${dataset.bytes} bytes; delta (rsync's transferred file size) per run: ${deltas.join(", ")} bytes`);
    // The first run moves the whole dataset; the next two only the file added before each.
    expect(deltas[0]).toBeGreaterThan(dataset.bytes * 0.8);
    expect(deltas.slice(1)).toEqual([1 * MiB, MiB / 2]);
    // The runs as `dvm schedule nightly` lists them: three, one per time, with the same deltas.
    const runs = scheduleRuns(
      await Promise.all(["01", "02", "03"].map((h) => readDvm(clusters.source, NODE_ADMIN_NAMESPACE, `nightly-20261203-${h}0000`))),
      "nightly",
    );
    expect(runs.map((r) => [r.scheduledTime, r.deltaBytes])).toEqual([
      ["2026-12-03T01:00:00Z", deltas[0]],
      ["2026-12-03T02:00:00Z", 1 * MiB],
      ["2026-12-03T03:00:00Z", MiB / 2],
    ]);
    // The destination holds what the source held at the last run.
    changes.length = 0;
    const source = await manifest(folder);
    const copy = await manifest(await volumeFolder(clusters.destination, nodes.destination, namespace, "data"), { exclude: (p) => p === "lost+found" });
    expect(manifestDiff(source, copy)).toEqual([]);
  });
});
