/** One migration at a time per volume (src/phases/pvcUse.ts), and a source listed once (the parser). */
import { describe, expect, it } from "vitest";
import { parseDvmSpec } from "../../../src/dvm/types";
import { KINDS, refOf } from "../../../src/kube/objects";
import { deleteTransferResources } from "../../../src/phases/cleanup";
import { createDestinationPVCs } from "../../../src/phases/pvcs";
import { IN_USE_BY, markPvcsInUse } from "../../../src/phases/pvcUse";
import type { PhaseContext } from "../../../src/phases/types";
import { fakeContext, pvc, storageClass, TEST_UID } from "../../support/phaseContext";

const SPEC = { persistentVolumeClaims: [{ name: "db", namespace: "shop", targetStorageClass: "fast", targetAccessModes: ["ReadWriteOnce"] }] };
const OTHER_UID = "99999999-0000-4000-8000-000000000000";

/** Two DVMs of the same volume pair on the same clusters; `first` is this test's DVM, `second` another. */
function twoMigrations(secondPhase = "RunRsyncOperations") {
  const { ctx: first, host, source, destination } = fakeContext(SPEC);
  source.add(pvc("shop", "db"));
  destination.add(storageClass("fast"));
  const second: PhaseContext = { ...first, dvm: { name: "stage-2", namespace: "team", uid: OTHER_UID, generation: 1 } };
  const dvmObject = (ctx: PhaseContext, phase: string) => ({
    ...KINDS.DirectVolumeMigration,
    metadata: { name: ctx.dvm.name, namespace: ctx.dvm.namespace, uid: ctx.dvm.uid },
    status: { phase },
  });
  host.add(dvmObject(first, "CreateDestinationPVCs"), dvmObject(second, secondPhase));
  const holderOf = async (cluster = destination) => (await cluster.get(refOf("PersistentVolumeClaim", "shop", "db")))?.metadata.annotations?.[IN_USE_BY];
  return { first, second, host, source, destination, holderOf, dvmObject };
}

describe("a source PVC listed twice", () => {
  it("is refused by the parser, naming the second entry and the first", () => {
    const parsed = parseDvmSpec({ persistentVolumeClaims: [...SPEC.persistentVolumeClaims, { ...SPEC.persistentVolumeClaims[0], targetName: "db-copy" }] });
    expect(parsed).toEqual({
      ok: false,
      issues: [
        {
          field: "spec.persistentVolumeClaims[1]",
          message: "lists the source PVC shop/db again, as spec.persistentVolumeClaims[0] does: list each source once",
        },
      ],
    });
  });
});

describe("one migration at a time per volume", () => {
  it("marks the source and the destination it creates, and refuses a second DVM while the first runs, naming it", async () => {
    const { first, second, source, holderOf } = twoMigrations();
    expect(await createDestinationPVCs(second)).toMatchObject({ kind: "advance" });
    expect(await holderOf()).toBe(`team/stage-2/${OTHER_UID}`);
    expect(await holderOf(source)).toBe(`team/stage-2/${OTHER_UID}`);
    const refused = await createDestinationPVCs(first);
    expect(refused).toEqual({
      kind: "fail",
      category: "Critical",
      errors: [
        `spec.persistentVolumeClaims[0]: PersistentVolumeClaim shop/db on the source cluster is in use by DirectVolumeMigration team/stage-2 (uid ${OTHER_UID}); migrate it once that one has finished or is deleted`,
        `spec.persistentVolumeClaims[0]: PersistentVolumeClaim shop/db on the destination cluster is in use by DirectVolumeMigration team/stage-2 (uid ${OTHER_UID}); migrate it once that one has finished or is deleted`,
      ],
    });
    // A repeated run of the holder's own phase (after a crash) keeps its mark.
    expect(await createDestinationPVCs(second)).toMatchObject({ kind: "advance" });
  });

  it("frees the volumes at cleanup, so the next DVM may take them", async () => {
    const { first, second, holderOf } = twoMigrations();
    await createDestinationPVCs(second);
    await deleteTransferResources({ progressRecords: true })(second);
    expect(await holderOf()).toBeUndefined();
    expect(await createDestinationPVCs(first)).toMatchObject({ kind: "advance" });
    expect(await holderOf()).toBe(`openshift-migration/dvm/${TEST_UID}`);
  });

  it("takes over a mark whose DVM completed, was deleted, or was replaced by another of its name", async () => {
    for (const holder of ["completed", "deleted", "replaced"] as const) {
      const { first, second, host, holderOf, dvmObject } = twoMigrations(holder === "completed" ? "Completed" : "RunRsyncOperations");
      await createDestinationPVCs(second);
      const ref = refOf("DirectVolumeMigration", "team", "stage-2");
      if (holder === "deleted") await host.delete(ref);
      if (holder === "replaced") {
        await host.delete(ref);
        host.add({ ...dvmObject(second, "Started"), metadata: { name: "stage-2", namespace: "team", uid: "another-uid" } });
      }
      expect(await createDestinationPVCs(first), holder).toMatchObject({ kind: "advance" });
      expect(await holderOf(), holder).toBe(`openshift-migration/dvm/${TEST_UID}`);
    }
  });

  it("writes its mark guarded: a PVC changed since it was read is read again, and the other DVM's new mark wins", async () => {
    const { first, second, destination, holderOf } = twoMigrations();
    destination.add(pvc("shop", "db"));
    // The other DVM marks the PVC between our read and our write.
    const get = destination.get.bind(destination);
    let raced = false;
    destination.get = (async (ref: Parameters<typeof get>[0]) => {
      const read = await get(ref);
      if (!raced && ref.kind === "PersistentVolumeClaim") {
        raced = true;
        await markPvcsInUse(second, ["destination"]);
      }
      return read;
    }) as typeof destination.get;
    expect(await markPvcsInUse(first, ["destination"])).toEqual([expect.stringContaining("in use by DirectVolumeMigration team/stage-2")]);
    expect(await holderOf()).toBe(`team/stage-2/${OTHER_UID}`);
  });
});
