/** spec.rightSizeTargets: the destination PVC requests the measured usage plus headroom. */
import { describe, expect, it } from "vitest";
import { KINDS, type PodObject, type PvcObject } from "../../../src/kube/objects";
import { createDestinationPVCs } from "../../../src/phases/pvcs";
import { rightSizedRequest, usagePodName } from "../../../src/phases/targetSizing";
import { fakeContext, pvc, storageClass } from "../../support/phaseContext";

const spec = {
  persistentVolumeClaims: [{ name: "db", namespace: "shop", targetStorageClass: "fast", targetAccessModes: ["ReadWriteOnce"] }],
  rightSizeTargets: { headroomPercent: 25 },
};

describe("right-sized destination PVCs", () => {
  it("rounds used bytes plus headroom up to whole MiB", () => {
    expect(rightSizedRequest(100 * 2 ** 20, 25)).toBe("125Mi");
    expect(rightSizedRequest(1, 0)).toBe("1Mi");
    expect(rightSizedRequest(0, 50)).toBe("1Mi");
  });

  it("measures the source with a pod, then requests its usage plus headroom instead of the capacity, and records why", async () => {
    const { ctx, source, destination } = fakeContext(spec);
    source.add(pvc("shop", "db"));
    destination.add(storageClass("fast"));
    expect(await createDestinationPVCs(ctx)).toMatchObject({ kind: "wait" });
    const name = usagePodName(ctx, ctx.volumes[0]!);
    const usage = await source.get<PodObject>({ ...KINDS.Pod, namespace: "shop", name });
    expect(usage?.spec?.volumes).toEqual([{ name: "source", persistentVolumeClaim: { claimName: "db", readOnly: true } }]);
    expect(await destination.get({ ...KINDS.PersistentVolumeClaim, namespace: "shop", name: "db" })).toBeUndefined();

    source.mutate({ ...KINDS.Pod, namespace: "shop", name }, (p) => {
      p.status = { phase: "Succeeded", containerStatuses: [{ name: "usage", state: { terminated: { exitCode: 0, message: String(80 * 2 ** 20) } } }] };
    });
    const done = await createDestinationPVCs(ctx);
    expect(done).toEqual({
      kind: "advance",
      status: {
        targetSizes: [{ pvcReference: { namespace: "shop", name: "db" }, usedBytes: 80 * 2 ** 20, headroomPercent: 25, requested: "100Mi", sourceSize: "2Gi" }],
      },
    });
    const created = await destination.get<PvcObject>({ ...KINDS.PersistentVolumeClaim, namespace: "shop", name: "db" });
    expect(created?.spec?.resources?.requests?.storage).toBe("100Mi");
    expect(await source.get({ ...KINDS.Pod, namespace: "shop", name })).toBeUndefined();
  });

  it("fails the migration, naming the PVC, when the measurement fails", async () => {
    const { ctx, source } = fakeContext(spec);
    source.add(pvc("shop", "db"));
    await createDestinationPVCs(ctx);
    source.mutate({ ...KINDS.Pod, namespace: "shop", name: usagePodName(ctx, ctx.volumes[0]!) }, (p) => {
      p.status = { phase: "Failed", containerStatuses: [{ name: "usage", state: { terminated: { exitCode: 1 } } }] };
    });
    expect(await createDestinationPVCs(ctx)).toMatchObject({
      kind: "fail",
      errors: [expect.stringMatching(/^spec\.persistentVolumeClaims\[0\]: cannot measure/)],
    });
  });
});
