import { describe, expect, it } from "vitest";
import { findCondition, hasBlocker, setCondition } from "../../../src/dvm/conditions";
import { enterFailure, enterPhase, positionOf } from "../../../src/dvm/status";
import { parseDvmSpec } from "../../../src/dvm/types";

const T0 = "2026-01-01T00:00:00.000Z";
const T1 = "2026-01-01T00:01:00.000Z";

describe("status", () => {
  it("starts an empty status at the first step of the itinerary its migrationType selects", () => {
    expect(positionOf({}, undefined)).toEqual({ itinerary: "VolumeMigration", phase: "Started" });
    expect(positionOf({}, "Rollback")).toEqual({ itinerary: "VolumeMigrationRollback", phase: "Started" });
    expect(positionOf({ itinerary: "VolumeMigration", phase: "Bogus" }, undefined).phase).toBe("Started");
  });

  it("writes phase, step, description and Running/Ready on entering a step", () => {
    const status = enterPhase({}, { itinerary: "VolumeMigration", phase: "CreateDestinationPVCs" }, 3, T0);
    expect(status).toMatchObject({ phase: "CreateDestinationPVCs", itinerary: "VolumeMigration", step: "5/18", observedGeneration: 3, startTimestamp: T0 });
    expect(status.phaseDescription).toMatch(/persistent volume claims/);
    expect(findCondition(status.conditions, "Running")).toMatchObject({ reason: "CreateDestinationPVCs", message: "Step: 5/18" });
    expect(findCondition(status.conditions, "Ready")?.category).toBe("Required");
  });

  it("keeps startTimestamp and drops the previous step's warnings, keeping durable conditions", () => {
    let status = enterPhase({}, { itinerary: "VolumeMigration", phase: "Started" }, 1, T0);
    status = { ...status, conditions: setCondition(status.conditions ?? [], { type: "RsyncTransferPodsPending", status: "True", category: "Warn" }, T0) };
    status = { ...status, conditions: setCondition(status.conditions ?? [], { type: "Note", status: "True", category: "Advisory", durable: true }, T0) };
    const next = enterPhase(status, { itinerary: "VolumeMigration", phase: "CleanStaleRsyncResources" }, 1, T1);
    expect(next.startTimestamp).toBe(T0);
    expect(findCondition(next.conditions, "RsyncTransferPodsPending")).toBeUndefined();
    expect(findCondition(next.conditions, "Note")).toBeDefined();
    expect(findCondition(next.conditions, "Running")?.lastTransitionTime).toBe(T1);
  });

  it("marks Completed with Succeeded, without Running", () => {
    const done = enterPhase({}, { itinerary: "VolumeMigration", phase: "Completed" }, 1, T0);
    expect(findCondition(done.conditions, "Succeeded")).toMatchObject({ durable: true, status: "True" });
    expect(findCondition(done.conditions, "Running")).toBeUndefined();
  });

  it("records a failure: errors deduplicated, durable Failed, failure itinerary, and no Succeeded at the end", () => {
    const failed = enterFailure({ errors: ["a"] }, "RunRsyncOperations", ["a", "b"], "Critical", 1, T0);
    expect(failed).toMatchObject({ itinerary: "VolumeMigrationFailed", phase: "MigrationFailed", errors: ["a", "b"], step: "1/5" });
    expect(findCondition(failed.conditions, "Failed")).toMatchObject({ reason: "RunRsyncOperations", durable: true, category: "Critical" });
    expect(hasBlocker(failed.conditions)).toBe(true);
    const done = enterPhase(failed, { itinerary: "VolumeMigrationFailed", phase: "Completed" }, 1, T1);
    expect(findCondition(done.conditions, "Succeeded")).toBeUndefined();
    expect(findCondition(done.conditions, "Failed")).toBeDefined();
  });

  it("keeps a condition's transition time when nothing about it changed", () => {
    const once = setCondition([], { type: "X", status: "True", category: "Warn", message: "m" }, T0);
    expect(setCondition(once, { type: "X", status: "True", category: "Warn", message: "m" }, T1)[0]!.lastTransitionTime).toBe(T0);
    expect(setCondition(once, { type: "X", status: "True", category: "Warn", message: "n" }, T1)[0]!.lastTransitionTime).toBe(T1);
  });
});

describe("spec validation", () => {
  const valid = {
    persistentVolumeClaims: [{ name: "data", namespace: "app", targetStorageClass: "standard", targetAccessModes: ["ReadWriteOnce"] }],
  };

  it("accepts a minimal spec", () => {
    expect(parseDvmSpec(valid).ok).toBe(true);
  });

  it.each([
    [{}, "spec.persistentVolumeClaims"],
    [{ persistentVolumeClaims: [] }, "spec.persistentVolumeClaims"],
    [{ persistentVolumeClaims: [{ ...valid.persistentVolumeClaims[0], targetStorageClass: undefined }] }, "spec.persistentVolumeClaims[0].targetStorageClass"],
    [
      { persistentVolumeClaims: [{ ...valid.persistentVolumeClaims[0], targetAccessModes: ["Sometimes"] }] },
      "spec.persistentVolumeClaims[0].targetAccessModes[0]",
    ],
    [{ persistentVolumeClaims: [{ ...valid.persistentVolumeClaims[0], name: "Not_A_Name" }] }, "spec.persistentVolumeClaims[0].name"],
    [{ ...valid, backOffLimit: -1 }, "spec.backOffLimit"],
    [{ ...valid, migrationType: "Sideways" }, "spec.migrationType"],
    [{ ...valid, sourceCluster: { kubeconfigSecretRef: {} } }, "spec.sourceCluster.kubeconfigSecretRef.name"],
  ])("names the failing field of %j", (spec, field) => {
    const result = parseDvmSpec(spec);
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.issues.map((i) => i.field)).toContain(field);
  });
});
