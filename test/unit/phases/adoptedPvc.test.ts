/** An existing destination PVC is adopted only with the volume mode the migration writes (src/phases/pvcs.ts). */
import { describe, expect, it } from "vitest";
import { createDestinationPVCs } from "../../../src/phases/pvcs";
import { fakeContext, pvc, storageClass } from "../../support/phaseContext";

const ENTRY = { name: "db", namespace: "shop", targetStorageClass: "fast", targetAccessModes: ["ReadWriteOnce"] };

function migrationInto(existingMode: "Filesystem" | "Block", entry: Record<string, unknown> = ENTRY) {
  const { ctx, source, destination } = fakeContext({ persistentVolumeClaims: [entry] });
  source.add(pvc("shop", "db"));
  destination.add(storageClass("fast"), pvc("shop", "db", { spec: { ...pvc("shop", "db").spec, volumeMode: existingMode } }));
  return ctx;
}

describe("an adopted destination PVC", () => {
  it("of the same volume mode is adopted", async () => {
    expect(await createDestinationPVCs(migrationInto("Filesystem"))).toMatchObject({ kind: "advance" });
  });

  it("of another volume mode fails the migration, naming the entry and both modes", async () => {
    expect(await createDestinationPVCs(migrationInto("Block"))).toEqual({
      kind: "fail",
      category: "Critical",
      errors: [
        "spec.persistentVolumeClaims[0]: the destination PersistentVolumeClaim shop/db already exists with volumeMode Block, but this migration writes Filesystem; delete it or set a targetName for a new one",
      ],
    });
  });

  it("names targetVolumeMode when the spec set it", async () => {
    const outcome = await createDestinationPVCs(migrationInto("Filesystem", { ...ENTRY, targetVolumeMode: "Block" }));
    expect(outcome).toMatchObject({
      kind: "fail",
      errors: [expect.stringMatching(/^spec\.persistentVolumeClaims\[0\]\.targetVolumeMode: .* volumeMode Filesystem, but this migration writes Block/)],
    });
  });
});
