import { describe, expect, it } from "vitest";
import { MigrationInputError } from "../../../src/contracts/inputError";
import { LABEL } from "../../../src/contracts/labels";
import { quantityValue } from "../../../src/dvm/quantity";
import { deleteTransferResources, waitForTransferResourcesGone } from "../../../src/phases/cleanup";
import { createRsyncEndpoint, endpointAddress, ensureRsyncEndpointReady } from "../../../src/phases/endpoint";
import { dvmShortId, transferLabels, transferNames } from "../../../src/phases/names";
import { createDestinationNamespaces } from "../../../src/phases/namespaces";
import { createPVProgressCRs } from "../../../src/phases/progressRecords";
import { createDestinationPVCs, requestedSize } from "../../../src/phases/pvcs";
import { serverGroups } from "../../../src/phases/serverGroups";
import { started } from "../../../src/phases/started";
import type { PhaseContext } from "../../../src/phases/types";
import { volumePairs } from "../../../src/phases/volumes";
import { fakeContext, namespace, pvc, storageClass, TEST_UID, TWO_NAMESPACE_SPEC } from "../../support/phaseContext";

describe("Started (validation)", () => {
  it("advances when every source PVC and target storage class exists", async () => {
    const { ctx, source, destination } = fakeContext(TWO_NAMESPACE_SPEC);
    source.add(pvc("shop", "db"), pvc("shop", "media"), pvc("ops", "logs"));
    destination.add(storageClass("fast"));
    expect(await started(ctx)).toEqual({ kind: "advance" });
  });

  it("reports every problem at once, each naming its field", async () => {
    const spec = {
      ...TWO_NAMESPACE_SPEC,
      persistentVolumeClaims: [
        ...TWO_NAMESPACE_SPEC.persistentVolumeClaims,
        { name: "db2", namespace: "shop", targetName: "db", targetStorageClass: "slow", targetAccessModes: ["ReadWriteOnce"] },
      ],
      endpointType: "Route",
    };
    const { ctx, source, destination } = fakeContext(spec);
    source.add(pvc("shop", "db"), pvc("ops", "logs"), pvc("shop", "db2"));
    destination.add(storageClass("fast"));
    const outcome = await started(ctx);
    expect(outcome.kind).toBe("fail");
    const errors = outcome.kind === "fail" ? outcome.errors : [];
    expect(errors).toEqual([
      "spec.persistentVolumeClaims[1].name: PersistentVolumeClaim shop/media not found on the source cluster",
      "spec.persistentVolumeClaims[3]: targets shop/db, as spec.persistentVolumeClaims[0] does",
      'spec.persistentVolumeClaims[3].targetStorageClass: StorageClass "slow" not found on the destination cluster',
      "spec.endpointType: Route was requested but the destination cluster does not serve route.openshift.io/v1 Routes",
    ]);
  });

  it("accepts a Block volume moved as Block, as root", async () => {
    const { ctx, source, destination } = fakeContext({
      persistentVolumeClaims: [{ name: "raw", namespace: "a", targetStorageClass: "fast", targetAccessModes: ["ReadWriteOnce"] }],
      runAsRoot: true,
    });
    source.add(pvc("a", "raw", { spec: { volumeMode: "Block" } }));
    destination.add(storageClass("fast"));
    expect(await started(ctx)).toMatchObject({ kind: "advance" });
  });

  it("refuses a change of volume mode, and a Block volume moved without root, naming the fields", async () => {
    const { ctx, source, destination } = fakeContext({
      persistentVolumeClaims: [
        { name: "raw", namespace: "a", targetStorageClass: "fast", targetAccessModes: ["ReadWriteOnce"], targetVolumeMode: "Filesystem" },
        { name: "files", namespace: "a", targetStorageClass: "fast", targetAccessModes: ["ReadWriteOnce"], targetVolumeMode: "Block" },
      ],
    });
    source.add(pvc("a", "raw", { spec: { volumeMode: "Block" } }), pvc("a", "files"));
    destination.add(storageClass("fast"));
    const outcome = await started(ctx);
    expect(outcome).toMatchObject({
      kind: "fail",
      errors: [
        "spec.persistentVolumeClaims[0].targetVolumeMode: a/raw has volumeMode Block; a migration cannot change it to Filesystem (create the destination as Block)",
        "spec.runAsRoot: must be true to move the Block volume a/raw (spec.persistentVolumeClaims[0]): its device node belongs to root",
        "spec.persistentVolumeClaims[1].targetVolumeMode: a/files has volumeMode Filesystem; a migration cannot change it to Block (create the destination as Filesystem)",
      ],
    });
  });

  it("checks, for a rollback, that both ends exist (and no storage class)", async () => {
    const { ctx, source, destination } = fakeContext({ ...TWO_NAMESPACE_SPEC, migrationType: "Rollback" }, { itinerary: "VolumeMigrationRollback" });
    // In a rollback the data flows from the original destination (here: the source role) back.
    source.add(pvc("shop", "db"), pvc("shop", "media-new"), pvc("ops-new", "logs"));
    destination.add(pvc("shop", "db"), pvc("shop", "media"));
    const outcome = await started(ctx);
    expect(outcome).toMatchObject({
      kind: "fail",
      errors: ["spec.persistentVolumeClaims[2].name: PersistentVolumeClaim ops/logs to roll back into not found on the destination cluster"],
    });
  });
});

describe("volume pairs", () => {
  it("defaults target names and swaps direction for a rollback", () => {
    const { ctx } = fakeContext(TWO_NAMESPACE_SPEC);
    expect(ctx.volumes.map((v) => [v.from, v.to])).toEqual([
      [
        { namespace: "shop", name: "db" },
        { namespace: "shop", name: "db" },
      ],
      [
        { namespace: "shop", name: "media" },
        { namespace: "shop", name: "media-new" },
      ],
      [
        { namespace: "ops", name: "logs" },
        { namespace: "ops-new", name: "logs" },
      ],
    ]);
    const back = volumePairs(ctx.spec, ctx.status, "VolumeMigrationRollback");
    expect(back[1]).toMatchObject({ from: { namespace: "shop", name: "media-new" }, to: { namespace: "shop", name: "media" }, id: ctx.volumes[1]!.id });
  });
});

describe("CreateDestinationNamespaces and CreateDestinationPVCs", () => {
  it("copies namespace labels and annotations, and adopts existing namespaces", async () => {
    const { ctx, source, destination } = fakeContext(TWO_NAMESPACE_SPEC);
    source.add(namespace("shop", { team: "a", "kubernetes.io/metadata.name": "shop" }), namespace("ops", { team: "b" }));
    destination.add(namespace("shop", { existing: "yes" }));
    await createDestinationNamespaces(ctx);
    await createDestinationNamespaces(ctx);
    expect((await destination.get({ apiVersion: "v1", kind: "Namespace", name: "shop" }))?.metadata.labels).toEqual({ existing: "yes" });
    const created = await destination.get({ apiVersion: "v1", kind: "Namespace", name: "ops-new" });
    expect(created?.metadata.labels).toMatchObject({ team: "b", [LABEL.dvmUid]: TEST_UID });
    expect(destination.totalCreations("Namespace")).toBe(1);
  });

  it("creates each destination PVC once with the target class, modes and the larger of request and capacity", async () => {
    const { ctx, source, destination } = fakeContext(TWO_NAMESPACE_SPEC);
    source.add(pvc("shop", "db"), pvc("shop", "media"), pvc("ops", "logs"));
    await createDestinationPVCs(ctx);
    await createDestinationPVCs(ctx);
    expect(destination.totalCreations("PersistentVolumeClaim")).toBe(3);
    const media = await destination.get({ apiVersion: "v1", kind: "PersistentVolumeClaim", namespace: "shop", name: "media-new" });
    expect(media).toMatchObject({
      spec: { storageClassName: "fast", accessModes: ["ReadWriteMany"], volumeMode: "Filesystem", resources: { requests: { storage: "2Gi" } } },
      metadata: { labels: { app: "media", [LABEL.dvmUid]: TEST_UID } },
    });
    expect(media?.metadata.labels?.[LABEL.transfer]).toBeUndefined();
  });

  it("sizes from quantities", () => {
    expect(quantityValue("1Gi")).toBe(2 ** 30);
    expect(quantityValue("1500M")).toBe(1.5e9);
    expect(requestedSize(pvc("a", "b", { status: { capacity: { storage: "500Mi" } } }) as never)).toBe("1Gi");
  });

  it("names the PVC that vanished since validation", async () => {
    const { ctx } = fakeContext(TWO_NAMESPACE_SPEC);
    await expect(createDestinationPVCs(ctx)).rejects.toBeInstanceOf(MigrationInputError);
  });
});

/** The first (for these specs, the only) rsync server pod of a destination namespace. */
const groupIn = (ctx: PhaseContext, namespace: string) => serverGroups(ctx).find((g) => g.namespace === namespace)!;

describe("the rsync endpoint", () => {
  it("creates one Service per destination namespace and reports its address", async () => {
    const { ctx, destination } = fakeContext(TWO_NAMESPACE_SPEC, { sameCluster: true });
    await createRsyncEndpoint(ctx);
    expect(destination.totalCreations("Service")).toBe(2);
    // The Service's address, which needs no cluster DNS (the certificate is checked by a fixed name).
    expect(await endpointAddress(ctx, groupIn(ctx, "ops-new"))).toEqual({ host: "198.19.0.1", port: 6443 });
    expect(await ensureRsyncEndpointReady(ctx)).toEqual({ kind: "advance" });
  });

  it("waits for a load balancer address, and warns after three minutes", async () => {
    const { ctx, destination } = fakeContext(
      { ...TWO_NAMESPACE_SPEC, endpointType: "LoadBalancer" },
      {
        status: { conditions: [{ type: "Running", status: "True", category: "Advisory", lastTransitionTime: "2025-12-31T23:50:00Z" }] },
      },
    );
    await createRsyncEndpoint(ctx);
    const waiting = await ensureRsyncEndpointReady(ctx);
    expect(waiting).toMatchObject({ kind: "wait", warnings: [{ type: "RsyncEndpointNotReady", category: "Warn" }] });
    const name = transferNames(ctx.dvm).endpointService;
    for (const ns of ["shop", "ops-new"]) {
      destination.mutate(
        { apiVersion: "v1", kind: "Service", namespace: ns, name },
        (svc) => (svc.status = { loadBalancer: { ingress: [{ ip: "203.0.113.7" }] } }),
      );
    }
    expect(await endpointAddress(ctx, groupIn(ctx, "shop"))).toEqual({ host: "203.0.113.7", port: 6443 });
    expect(await ensureRsyncEndpointReady(ctx)).toEqual({ kind: "advance" });
  });
});

describe("cleanup", () => {
  it("deletes only this DVM's transfer objects, never migrated data or other migrations' objects", async () => {
    const { ctx, source, destination, host } = fakeContext(TWO_NAMESPACE_SPEC);
    const mine = (kind: string, ns: string, name: string) => ({
      apiVersion: "v1",
      kind,
      metadata: { name: `dvm-${dvmShortId(ctx.dvm)}-${name}`, namespace: ns, labels: transferLabels(ctx.dvm, "x") },
    });
    const other = { apiVersion: "v1", kind: "Pod", metadata: { name: "other", namespace: "shop", labels: transferLabels({ uid: "another-uid" }, "x") } };
    source.add(mine("Pod", "shop", "client"), mine("Secret", "ops", "s"), other);
    destination.add(
      mine("Service", "ops-new", "svc"),
      mine("Pod", "shop", "server"),
      pvc("shop", "db", { metadata: { name: "db", namespace: "shop", labels: { [LABEL.dvmUid]: TEST_UID } } }),
    );
    host.add({ apiVersion: "v1", kind: "Secret", metadata: { name: transferNames(ctx.dvm).credentialsSecret, namespace: ctx.dvm.namespace } });
    expect((await waitForTransferResourcesGone(ctx)).kind).toBe("wait");
    await deleteTransferResources({ progressRecords: false })(ctx);
    expect(await waitForTransferResourcesGone(ctx)).toEqual({ kind: "advance" });
    expect(source.objects.size).toBe(1);
    expect(destination.objects.size).toBe(1);
    expect(host.objects.size).toBe(0);
  });

  it("deletes progress records only when asked to", async () => {
    const { ctx, source, destination, host } = fakeContext({ ...TWO_NAMESPACE_SPEC, deleteProgressReportingCRs: true });
    source.add(pvc("shop", "db"));
    destination.add(storageClass("fast"));
    await createPVProgressCRs(ctx);
    expect(host.totalCreations("DirectVolumeMigrationProgress")).toBe(3);
    await deleteTransferResources({ progressRecords: false })(ctx);
    expect(host.objects.size).toBe(3);
    await deleteTransferResources({ progressRecords: true })(ctx);
    expect(host.objects.size).toBe(0);
  });
});
