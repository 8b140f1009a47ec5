/**
 * A DVM that names its volumes by a label selector (spec.persistentVolumeClaimSelector), on the two real
 * control planes with kwok and DynamoDB Local, driven the way the relay drives it: the selector is
 * expanded once, by Started, and neither a PVC created later nor a repeated Started changes the set.
 */
import { CoreV1Api } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunResult } from "../../src/contracts/request";
import { findCondition } from "../../src/dvm/conditions";
import { KubeDvmStore } from "../../src/kube/dvmStore";
import { testClusters } from "../support/clusters";
import { type FreshTable, freshLedgerTable } from "../support/dynamo";
import {
  countedBodies,
  createDvm,
  createMigrationFixture,
  driveToCompletion,
  type MigrationFixture,
  readDvm,
  requestFor,
  testPhaseRunner,
} from "../support/migration";

const clusters = testClusters();
const run = Date.now().toString(36);
let fixture: MigrationFixture;
let table: FreshTable;

const ignoreExists = (error: unknown) => {
  if ((error as { code?: number }).code !== 409) throw error;
};

beforeAll(async () => {
  fixture = await createMigrationFixture(clusters, run);
  table = await freshLedgerTable();
});

afterAll(async () => {
  await table?.drop();
});

describe("a selector DVM over 5 labelled PVCs", () => {
  it("moves exactly the 5 it selected first: a sixth created mid-migration and a repeated Started change nothing", async () => {
    const core = clusters.source.makeApiClient(CoreV1Api);
    const namespace = `sel-${run}`;
    const targetNamespace = `${namespace}-dst`;
    await core.createNamespace({ body: { metadata: { name: namespace } } }).catch(ignoreExists);
    const pvc = (name: string, labels: Record<string, string>) =>
      core.createNamespacedPersistentVolumeClaim({
        namespace,
        body: { metadata: { name, labels }, spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } } } },
      });
    const five = ["vol-a", "vol-b", "vol-c", "vol-d", "vol-e"];
    for (const name of five) await pvc(name, { app: "shop", tier: "data" });
    await pvc("scratch", { app: "shop", tier: "scratch" });

    const dvm = await createDvm(clusters.source, fixture.dvmNamespace, "by-label", {
      destinationCluster: { kubeconfigSecretRef: { name: "destination-kubeconfig" } },
      persistentVolumeClaimSelector: {
        namespace,
        labelSelector: { matchLabels: { app: "shop" }, matchExpressions: [{ key: "tier", operator: "In", values: ["data"] }] },
        targetNamespace,
        targetStorageClass: fixture.storageClass,
        targetAccessModes: ["ReadWriteOnce"],
      },
    });

    const { bodies, entered } = countedBodies();
    const runner = testPhaseRunner(clusters, table, { bodies });

    const selectedFirst = five.map((name) => ({ namespace, name }));
    let repeat: RunResult | undefined;
    let afterRepeat: unknown;
    await driveToCompletion(runner, requestFor(dvm), {
      each: async () => {
        if (repeat) return;
        const current = await readDvm(clusters.source, fixture.dvmNamespace, "by-label");
        if (!current.status.selectedPersistentVolumeClaims) return;
        expect(current.status.selectedPersistentVolumeClaims).toEqual(selectedFirst);
        // Mid-migration: a sixth PVC the selector matches appears...
        await pvc("vol-f", { app: "shop", tier: "data" });
        // ...and Started is delivered again with the status lagging at Started (the state a crash between
        // the ledger's completion and the status write leaves): the repeat replays the recorded set.
        await new KubeDvmStore(clusters.source).writeStatus(current, {});
        repeat = await runner.run({ ...requestFor(current), phase: "Started" });
        afterRepeat = (await readDvm(clusters.source, fixture.dvmNamespace, "by-label")).status.selectedPersistentVolumeClaims;
      },
    });

    expect(repeat).toMatchObject({ kind: "duplicate", phase: "Started", statusRepaired: true });
    expect(afterRepeat).toEqual(selectedFirst);
    expect(entered.get("Started")).toBe(1);

    const done = await readDvm(clusters.source, fixture.dvmNamespace, "by-label");
    expect(done.status.phase).toBe("Completed");
    expect(findCondition(done.status.conditions, "Succeeded")?.status).toBe("True");
    expect(done.status.selectedPersistentVolumeClaims).toEqual(selectedFirst);
    expect(done.status.rsyncOperations?.map((op) => [op.pvcReference.name, op.succeeded])).toEqual(five.map((name) => [name, true]));
    const targets = await clusters.destination.makeApiClient(CoreV1Api).listNamespacedPersistentVolumeClaim({ namespace: targetNamespace });
    expect(targets.items.map((p) => p.metadata?.name).sort()).toEqual(five);
    expect(targets.items.every((p) => p.spec?.storageClassName === fixture.storageClass)).toBe(true);
  });

  it("is refused by the API server together with a list, or when neither is given", async () => {
    const selector = { namespace: fixture.namespaces.shop, targetStorageClass: fixture.storageClass, targetAccessModes: ["ReadWriteOnce"] };
    const both = { persistentVolumeClaimSelector: selector, persistentVolumeClaims: [{ ...selector, name: "db" }] };
    for (const [name, spec] of [
      ["both", both],
      ["neither", { migrationType: "Stage" }],
    ] as const) {
      const refused = await createDvm(clusters.source, fixture.dvmNamespace, `refused-${name}`, spec).then(
        () => "created",
        (error: { code?: number; body?: unknown }) => `${error.code} ${String(error.body)}`,
      );
      expect(refused).toMatch(/^422 .*exactly one of persistentVolumeClaims and persistentVolumeClaimSelector must be set/);
    }
  });

  it("fails a tenant's selector of another namespace before anything is read, naming the field", async () => {
    const tenant = `tenant-${run}`;
    const core = clusters.source.makeApiClient(CoreV1Api);
    await core.createNamespace({ body: { metadata: { name: tenant } } }).catch(ignoreExists);
    const dvm = await createDvm(clusters.source, tenant, "reach-out", {
      persistentVolumeClaimSelector: { namespace: fixture.namespaces.shop, targetStorageClass: fixture.storageClass, targetAccessModes: ["ReadWriteOnce"] },
    });
    const runner = testPhaseRunner(clusters, table);
    await driveToCompletion(runner, requestFor(dvm));
    const done = await readDvm(clusters.source, tenant, "reach-out");
    expect(done.status).toMatchObject({ phase: "Completed", itinerary: "VolumeMigrationFailed" });
    expect(findCondition(done.status.conditions, "Failed")).toMatchObject({ status: "True", category: "Critical" });
    expect(done.status.errors?.join("\n")).toContain(`spec.persistentVolumeClaimSelector.namespace: must be the DVM's namespace "${tenant}"`);
    expect(done.status.selectedPersistentVolumeClaims).toBeUndefined();
  });
});
