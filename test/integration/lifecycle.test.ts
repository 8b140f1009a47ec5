/**
 * A DVM's lifecycle on the real stack: the relay watching the source cluster, the phase function behind
 * serverless-offline, DynamoDB Local, two control planes with kwok. The spec cannot be edited (the API
 * server refuses it), and a DELETE through the API (what `kubectl delete` sends) stops the migration and
 * leaves no transfer object on either cluster before the DVM disappears.
 */

import { CoreV1Api, CustomObjectsApi, type KubeConfig } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LocalController } from "../../infra/dev/local/controller";
import { DynamoPhaseLedger } from "../../src/aws/ledger";
import { DVM_FINALIZER, DVM_GROUP, DVM_PLURAL, DVM_VERSION } from "../../src/dvm/types";
import { silentLogger } from "../../src/lib/log";
import { transferSelector } from "../../src/phases/names";
import { testClusters } from "../support/clusters";
import { startTestController } from "../support/controller";
import { testDynamoClient } from "../support/dynamo";
import { createDvm, createMigrationFixture, type MigrationFixture, readDvm } from "../support/migration";
import { until } from "../support/poll";

const clusters = testClusters();
const run = `lc${Date.now().toString(36)}`;
let fixture: MigrationFixture;
let controller: LocalController;

/** How long a wait of this file may take, polled every 500 ms. */
const WAIT = { timeoutMs: 120_000 };

/** Transfer objects of this DVM on one cluster, in every namespace (a terminating pod counts as gone). */
async function transferObjects(kc: KubeConfig, uid: string): Promise<string[]> {
  const core = kc.makeApiClient(CoreV1Api);
  const labelSelector = Object.entries(transferSelector({ uid }))
    .map(([k, v]) => `${k}=${v}`)
    .join(",");
  const found: string[] = [];
  for (const [kind, list] of [
    ["Pod", () => core.listPodForAllNamespaces({ labelSelector })],
    ["Secret", () => core.listSecretForAllNamespaces({ labelSelector })],
    ["Service", () => core.listServiceForAllNamespaces({ labelSelector })],
    ["ConfigMap", () => core.listConfigMapForAllNamespaces({ labelSelector })],
  ] as const) {
    for (const item of (await list()).items) if (!item.metadata?.deletionTimestamp) found.push(`${kind} ${item.metadata?.namespace}/${item.metadata?.name}`);
  }
  return found;
}

beforeAll(async () => {
  fixture = await createMigrationFixture(clusters, run);
  controller = await startTestController(clusters, fixture, "lifecycle", silentLogger);
});

afterAll(async () => {
  await controller?.stop();
});

describe("a DVM's lifecycle through the API server", () => {
  it("refuses an edit of the spec, with a message that says to create a new DVM", async () => {
    const created = await createDvm(clusters.source, fixture.dvmNamespace, "lc-immutable", { ...fixture.spec, backOffLimit: 3 });
    const api = clusters.source.makeApiClient(CustomObjectsApi);
    const edit = api.patchNamespacedCustomObject({
      group: DVM_GROUP,
      version: DVM_VERSION,
      namespace: fixture.dvmNamespace,
      plural: DVM_PLURAL,
      name: "lc-immutable",
      body: [{ op: "replace", path: "/spec/backOffLimit", value: 5 }],
    });
    await expect(edit).rejects.toMatchObject({ code: 422 });
    await expect(edit).rejects.toThrow(/spec is immutable.*create a new DirectVolumeMigration/s);
    const after = await readDvm(clusters.source, fixture.dvmNamespace, "lc-immutable");
    expect(after.metadata.generation).toBe(created.metadata.generation);
    expect((after.spec as { backOffLimit: number }).backOffLimit).toBe(3);
    // It runs on the fixture's PVCs: one migration at a time per volume, so it makes way for the next test.
    await api.deleteNamespacedCustomObject({
      group: DVM_GROUP,
      version: DVM_VERSION,
      namespace: fixture.dvmNamespace,
      plural: DVM_PLURAL,
      name: "lc-immutable",
    });
    await until(
      "lc-immutable to disappear",
      () =>
        readDvm(clusters.source, fixture.dvmNamespace, "lc-immutable").then(
          () => "present",
          (error: { code?: number }) => (error.code === 404 ? "gone" : Promise.reject(error)),
        ),
      (state) => state === "gone",
      WAIT,
    );
  });

  it("on a DELETE mid-transfer stops the migration and removes its transfer objects from both clusters, then the DVM goes", async () => {
    // Client pods that run for ten minutes: the migration is transferring when it is deleted.
    const spec = { ...fixture.spec, transferPodAnnotations: { "dvm.test/run-duration": "600s" } };
    const created = await createDvm(clusters.source, fixture.dvmNamespace, "lc-delete", spec);
    const { uid } = created.metadata;
    const transferring = await until(
      "the transfer to run",
      () => readDvm(clusters.source, fixture.dvmNamespace, "lc-delete"),
      (dvm) => dvm.status.phase === "RunRsyncOperations" && (dvm.status.runningPods?.length ?? 0) === 3,
      WAIT,
    );
    expect(transferring.metadata.finalizers).toContain(DVM_FINALIZER);
    expect((await transferObjects(clusters.source, uid)).length).toBeGreaterThan(0);
    expect((await transferObjects(clusters.destination, uid)).length).toBeGreaterThan(0);

    // What `kubectl delete dvm lc-delete` sends.
    await clusters.source.makeApiClient(CustomObjectsApi).deleteNamespacedCustomObject({
      group: DVM_GROUP,
      version: DVM_VERSION,
      namespace: fixture.dvmNamespace,
      plural: DVM_PLURAL,
      name: "lc-delete",
    });
    await until(
      "the DVM to disappear",
      () =>
        readDvm(clusters.source, fixture.dvmNamespace, "lc-delete").then(
          () => "present",
          (error: { code?: number }) => (error.code === 404 ? "gone" : Promise.reject(error)),
        ),
      (state) => state === "gone",
      WAIT,
    );
    expect(await transferObjects(clusters.source, uid)).toEqual([]);
    expect(await transferObjects(clusters.destination, uid)).toEqual([]);
    // The data already moved stays: destination PVCs are not transfer objects.
    const pvc = await clusters.destination
      .makeApiClient(CoreV1Api)
      .readNamespacedPersistentVolumeClaim({ namespace: fixture.namespaces.opsTarget, name: "logs" });
    expect(pvc.metadata?.deletionTimestamp).toBeUndefined();
    // The ledger entries of a DVM that is gone expire; none did while it existed.
    const ledger = new DynamoPhaseLedger({ client: testDynamoClient(), tableName: controller.ledgerTableName });
    expect((await ledger.history(uid)).length).toBeGreaterThan(0);
  });
});
