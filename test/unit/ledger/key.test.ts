import { describe, expect, it } from "vitest";
import { EXECUTABLE_PHASES } from "../../../src/dvm/itinerary";
import { InvalidLedgerKeyError, LedgerError } from "../../../src/ledger/errors";
import { MAX_GENERATION, parsePhaseKey, phaseKeyOf, validateLedgerKey } from "../../../src/ledger/key";

describe("validateLedgerKey", () => {
  it("accepts every executable phase at any non-negative integer generation", () => {
    for (const phase of EXECUTABLE_PHASES) {
      expect(validateLedgerKey({ uid: "3f1c", phase, generation: 0 })).toEqual({ uid: "3f1c", phase, generation: 0 });
      expect(validateLedgerKey({ uid: "3f1c", phase, generation: MAX_GENERATION }).generation).toBe(MAX_GENERATION);
    }
  });

  it("drops fields that are not part of the key", () => {
    expect(validateLedgerKey({ uid: "u", phase: "Started", generation: 2, extra: true })).toEqual({ uid: "u", phase: "Started", generation: 2 });
  });

  it.each([
    [null, "key"],
    ["u/Started/1", "key"],
    [{ phase: "Started", generation: 1 }, "uid"],
    [{ uid: "", phase: "Started", generation: 1 }, "uid"],
    [{ uid: " u", phase: "Started", generation: 1 }, "uid"],
    [{ uid: "x".repeat(129), phase: "Started", generation: 1 }, "uid"],
    [{ uid: 42, phase: "Started", generation: 1 }, "uid"],
    [{ uid: "u", phase: "started", generation: 1 }, "phase"],
    [{ uid: "u", phase: "toString", generation: 1 }, "phase"],
    [{ uid: "u", phase: "Completed", generation: 1 }, "phase"],
    [{ uid: "u", generation: 1 }, "phase"],
    [{ uid: "u", phase: "Started", generation: -1 }, "generation"],
    [{ uid: "u", phase: "Started", generation: 1.5 }, "generation"],
    [{ uid: "u", phase: "Started", generation: Number.NaN }, "generation"],
    [{ uid: "u", phase: "Started", generation: "1" }, "generation"],
    [{ uid: "u", phase: "Started", generation: MAX_GENERATION + 1 }, "generation"],
    [{ uid: "u", phase: "Started" }, "generation"],
  ])("rejects %j naming %s", (key, field) => {
    let caught: unknown;
    try {
      validateLedgerKey(key);
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(InvalidLedgerKeyError);
    expect(caught).toBeInstanceOf(LedgerError);
    expect(caught).toMatchObject({ field, name: "InvalidLedgerKeyError" });
    expect((caught as Error).message).toContain(field);
  });

  it("says why the terminal phase has no entry", () => {
    expect(() => validateLedgerKey({ uid: "u", phase: "Completed", generation: 1 })).toThrow(/terminal/);
  });
});

describe("phaseKeyOf", () => {
  it("zero-pads the generation so string order is generation order", () => {
    expect(phaseKeyOf({ phase: "Started", generation: 3 })).toBe("0000000003#Started");
    const keys = [10, 9, 100, 2].map((generation) => phaseKeyOf({ phase: "Started", generation }));
    expect([...keys].sort()).toEqual([2, 9, 10, 100].map((generation) => phaseKeyOf({ phase: "Started", generation })));
  });

  it("round-trips through parsePhaseKey", () => {
    for (const phase of EXECUTABLE_PHASES) {
      expect(parsePhaseKey(phaseKeyOf({ phase, generation: 42 }))).toEqual({ phase, generation: 42 });
    }
    expect(parsePhaseKey("0000000001#NoSuchPhase")).toBeUndefined();
    expect(parsePhaseKey("Started")).toBeUndefined();
  });
});
