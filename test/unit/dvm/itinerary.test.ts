import { describe, expect, it } from "vitest";
import {
  EXECUTABLE_PHASES,
  firstPhase,
  ITINERARIES,
  ITINERARY_NAMES,
  isPhaseName,
  nextPhase,
  PHASE_NAMES,
  PHASES,
  phaseSpec,
  stepOf,
} from "../../../src/dvm/itinerary";
import { PHASE_BODIES } from "../../../src/phases";

describe("itinerary table", () => {
  it("ends every itinerary with the terminal Completed step and repeats no phase", () => {
    for (const name of ITINERARY_NAMES) {
      const steps = ITINERARIES[name];
      expect(steps.at(-1)).toBe("Completed");
      expect(new Set(steps).size).toBe(steps.length);
    }
  });

  it("uses every phase of the table in some itinerary, and only known phases", () => {
    const used = new Set(ITINERARY_NAMES.flatMap((n) => [...ITINERARIES[n]]));
    expect([...used].sort()).toEqual([...PHASE_NAMES].sort());
  });

  it("gives every executable phase a body, and the terminal one none", () => {
    expect(Object.keys(PHASE_BODIES).sort()).toEqual([...EXECUTABLE_PHASES].sort());
    expect(EXECUTABLE_PHASES).not.toContain("Completed");
  });

  it("numbers steps from 1 and walks to Completed", () => {
    expect(firstPhase("VolumeMigration")).toBe("Started");
    expect(stepOf("VolumeMigration", "Started")).toEqual({ step: 1, total: ITINERARIES.VolumeMigration.length });
    let phase = firstPhase("VolumeMigration");
    const walked = [phase];
    while (phase !== "Completed") walked.push((phase = nextPhase("VolumeMigration", phase)));
    expect(walked).toEqual([...ITINERARIES.VolumeMigration]);
  });

  it("sends a phase that is not in the itinerary straight to Completed, as upstream", () => {
    expect(nextPhase("VolumeMigrationFailed", "CreateDestinationPVCs")).toBe("Completed");
  });

  it("marks wait phases with the poll delay and others with the fast one", () => {
    for (const phase of EXECUTABLE_PHASES) {
      expect(phaseSpec(phase).requeueMs).toBe(PHASES[phase].waits ? 3_000 : 100);
    }
  });

  it("recognises phase names", () => {
    expect(isPhaseName("RunRsyncOperations")).toBe(true);
    expect(isPhaseName("toString")).toBe(false);
    expect(isPhaseName("")).toBe(false);
  });

  it("rolls back without creating namespaces or PVCs", () => {
    expect(ITINERARIES.VolumeMigrationRollback).not.toContain("CreateDestinationNamespaces");
    expect(ITINERARIES.VolumeMigrationRollback).not.toContain("CreateDestinationPVCs");
    expect(ITINERARIES.VolumeMigrationRollback).toContain("RunRsyncOperations");
  });
});
