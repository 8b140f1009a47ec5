/**
 * The timing report and its timeline picture, from hand-made ledger histories: rows in itinerary order
 * with step numbers from the table, shares that add up to 100, repeated executions found and costed, and
 * an SVG that is well-formed with one bar per execution.
 */
import { describe, expect, it } from "vitest";
import { EXECUTABLE_PHASES, ITINERARIES, PHASES, type PhaseName, stepOf } from "../../../src/dvm/itinerary";
import type { LedgerEntry } from "../../../src/ledger";
import type { ClaimRecord } from "../../../src/ledger/types";
import { buildTimingReport, renderTimelineSvg } from "../../../src/report";
import { executionsOf } from "../../../src/report/executions";
import { tickStep } from "../../../src/report/svg";
import { guessItinerary, roundShares } from "../../../src/report/timing";
import { checkWellFormedXml, countElementsWithClass } from "../../support/wellFormedXml";

const T0 = 1_750_000_000_000;
const UID = "0b6f3c1e-1111-2222-3333-444455556666";

function entry(phase: PhaseName, startedAt: number, ms: number, extra: Partial<LedgerEntry> = {}): LedgerEntry {
  const waits = PHASES[phase].waits;
  return {
    key: { uid: UID, phase, generation: 1 },
    state: "COMPLETED",
    attempts: 1,
    takeovers: 0,
    waits: waits ? 2 : 0,
    failures: 0,
    startedAt,
    finishedAt: startedAt + ms,
    elapsedSeconds: ms / 1000,
    outcome: { result: "advanced", nextPhase: "Completed", finishedAt: startedAt + ms },
    claims: waits
      ? [
          { at: startedAt, attempt: 1, takeover: false, end: "waited", endedAt: startedAt + 5 },
          { at: startedAt + ms - 10, attempt: 3, takeover: false, end: "completed", endedAt: startedAt + ms },
        ]
      : [{ at: startedAt, attempt: 1, takeover: false, end: "completed", endedAt: startedAt + ms }],
    ...extra,
  };
}

/** A whole forward migration, each phase taking `ms(i)` with 20 ms between phases. */
function migration(ms: (i: number) => number = (i) => 100 + i * 37): LedgerEntry[] {
  const phases = ITINERARIES.VolumeMigration.filter((p) => p !== "Completed");
  let t = T0;
  return phases.map((phase, i) => {
    const e = entry(phase, t, ms(i));
    t += ms(i) + 20;
    return e;
  });
}

const sum = (values: number[]) => values.reduce((a, b) => a + b, 0);

describe("buildTimingReport", () => {
  it("lists every phase of the itinerary once, in table order, with the table's step numbers", () => {
    const entries = migration();
    // The ledger returns entries oldest first; shuffle to prove the order comes from the table.
    const report = buildTimingReport({ entries: [...entries].reverse(), itinerary: "VolumeMigration", now: T0 + 60_000 });
    const phases = ITINERARIES.VolumeMigration.filter((p) => p !== "Completed");
    expect(report.rows.map((r) => r.phase)).toEqual(phases);
    for (const row of report.rows) {
      expect({ step: row.step, total: row.totalSteps }).toEqual({
        step: stepOf("VolumeMigration", row.phase)!.step,
        total: ITINERARIES.VolumeMigration.length,
      });
      expect(row.description).toBe(PHASES[row.phase].description);
    }
    expect(report.repeated).toEqual({ count: 0, seconds: 0, unplaced: 0 });
    expect(report.running).toBe(false);
  });

  it("gives shares that add up to exactly 100 and a total that is the sum of the phases", () => {
    for (const ms of [(i: number) => 100 + i * 37, (i: number) => (i % 3 === 0 ? 1 : 3333), () => 7]) {
      const report = buildTimingReport({ entries: migration(ms), now: T0 + 600_000 });
      const shares = report.rows.map((r) => r.percent ?? 0);
      expect(Math.round(sum(shares) * 10)).toBe(1000);
      expect(report.totalSeconds).toBeCloseTo(sum(report.rows.map((r) => r.elapsedSeconds ?? 0)), 9);
      const longest = report.rows.reduce((a, b) => ((a.elapsedSeconds ?? 0) >= (b.elapsedSeconds ?? 0) ? a : b));
      expect(longest.percent).toBeCloseTo(((longest.elapsedSeconds ?? 0) / report.totalSeconds) * 100, 0);
    }
    // Wall clock includes the 20 ms gaps between phases.
    const report = buildTimingReport({ entries: migration(() => 100), now: T0 });
    expect(report.wallSeconds).toBeCloseTo(report.totalSeconds + (report.rows.length - 1) * 0.02, 6);
  });

  it("rounds shares by largest remainder", () => {
    expect(roundShares([1, 1, 1])).toEqual([33.4, 33.3, 33.3]);
    expect(roundShares([0, 0])).toEqual([0, 0]);
    expect(sum(roundShares([0.1, 0.2, 0.3, 9.4]))).toBeCloseTo(100, 9);
  });

  it("flags a takeover and a re-run after a failure as repeated executions and adds up what they cost", () => {
    const entries = migration(() => 1_000);
    const pvcs = entries.findIndex((e) => e.key.phase === "CreateDestinationPVCs");
    const s = entries[pvcs]!.startedAt;
    // Attempt 1 crashed; attempt 2 took over at +400 and failed at +600; attempt 3 ran +700..+1000.
    entries[pvcs] = entry("CreateDestinationPVCs", s, 1_000, {
      attempts: 3,
      takeovers: 1,
      failures: 1,
      lastError: "etcdserver: request timed out",
      claims: [
        { at: s },
        { at: s + 400, attempt: 2, takeover: true, end: "failed", endedAt: s + 600 },
        { at: s + 700, attempt: 3, takeover: false, end: "completed", endedAt: s + 1_000 },
      ],
    });
    // A wait phase: many polls are one execution; a takeover starts a second one.
    const wait = entries.findIndex((e) => e.key.phase === "WaitForRsyncTransferPodsRunning");
    const w = entries[wait]!.startedAt;
    entries[wait] = entry("WaitForRsyncTransferPodsRunning", w, 1_000, {
      attempts: 6,
      takeovers: 1,
      waits: 4,
      claims: [
        { at: w, attempt: 1, takeover: false, end: "waited", endedAt: w + 5 },
        { at: w + 300 },
        { at: w + 800, attempt: 6, takeover: true, end: "completed", endedAt: w + 1_000 },
      ],
    });
    const report = buildTimingReport({ entries, now: T0 });
    const row = (phase: PhaseName) => report.rows.find((r) => r.phase === phase)!;

    expect(row("CreateDestinationPVCs")).toMatchObject({ attempts: 3, repeatedExecutions: 2, flags: ["repeated x2", "takeover x1", "retried x1"] });
    expect(row("CreateDestinationPVCs").executions.map((e) => [e.start - s, e.end - s, e.repeated, e.ended])).toEqual([
      [0, 400, false, "crashed"],
      [400, 600, true, "failed"],
      [700, 1_000, true, "completed"],
    ]);
    expect(row("CreateDestinationPVCs").repeatedSeconds).toBeCloseTo(0.5, 9);

    expect(row("WaitForRsyncTransferPodsRunning").executions.map((e) => [e.start - w, e.end - w, e.repeated, e.takeover])).toEqual([
      [0, 800, false, false],
      [800, 1_000, true, true],
    ]);
    expect(row("WaitForRsyncTransferPodsRunning").repeatedExecutions).toBe(1);

    expect(report.repeated).toEqual({ count: 3, seconds: expect.closeTo(0.7, 9), unplaced: 0 });
    expect(report.executions).toBe(report.rows.length + 3);
  });

  it("counts repeats the claim records do not hold (entries from before them, or failures past the cap)", () => {
    const entries = migration();
    entries[0] = { ...entries[0]!, attempts: 3, failures: 2 };
    delete entries[0].claims;
    const report = buildTimingReport({ entries, now: T0 });
    expect(report.rows[0]).toMatchObject({ repeatedExecutions: 2, executions: [expect.objectContaining({ repeated: false })] });
    expect(report.repeated).toMatchObject({ count: 2, unplaced: 2 });
  });

  it("does not count a wait phase's polls or its failed polls as repeated executions", () => {
    const e = entry("RunRsyncOperations", T0, 10_000, { attempts: 40, waits: 38, failures: 1 });
    expect(executionsOf(e, true, T0)).toMatchObject({ repeated: 0, unplaced: 0, executions: [{ start: T0, end: T0 + 10_000, repeated: false }] });
  });

  it("counts the polls of a phase that waits only sometimes, and a claim given back unrun, as one execution; a re-run after a failure still repeats", () => {
    const claims: ClaimRecord[] = [
      { at: T0, attempt: 1, takeover: false, end: "waited", endedAt: T0 + 5 },
      { at: T0 + 1_000, attempt: 2, takeover: false, end: "waited", endedAt: T0 + 1_005 },
      { at: T0 + 2_000, attempt: 3, takeover: false, end: "completed", endedAt: T0 + 2_100 },
    ];
    const polled = entry("CreateDestinationPVCs", T0, 2_100, { attempts: 3, waits: 2, claims });
    expect(PHASES.CreateDestinationPVCs.waits).toBe(false);
    expect(executionsOf(polled, false, T0)).toMatchObject({ repeated: 0, executions: [{ start: T0, end: T0 + 2_100, repeated: false }] });
    const { claims: _dropped, ...countersOnly } = polled;
    expect(executionsOf(countersOnly, false, T0).repeated).toBe(0);

    const rerun = entry("CreateDestinationPVCs", T0, 2_100, {
      attempts: 2,
      failures: 1,
      claims: [
        { at: T0, attempt: 1, takeover: false, end: "failed", endedAt: T0 + 5 },
        { at: T0 + 1_000, attempt: 2, takeover: false, end: "completed", endedAt: T0 + 2_100 },
      ],
    });
    expect(executionsOf(rerun, false, T0)).toMatchObject({ repeated: 1, executions: [{ repeated: false }, { repeated: true }] });
  });

  it("shows a running migration: elapsed so far, phases not reached, the failure itinerary only when entered", () => {
    const entries = migration().slice(0, 4);
    const running = entries[3]!;
    entries[3] = { ...running, state: "RUNNING", attempts: 1, claims: [{ at: running.startedAt }] };
    delete entries[3].finishedAt;
    delete entries[3].elapsedSeconds;
    delete entries[3].outcome;
    const now = running.startedAt + 2_500;
    const report = buildTimingReport({ entries, itinerary: "VolumeMigration", now });
    expect(report.running).toBe(true);
    expect(report.rows[3]).toMatchObject({ elapsedSeconds: 2.5, flags: ["running"], executions: [{ ended: "running", end: now }] });
    expect(report.rows.slice(4).every((r) => !r.ran && r.flags[0] === "not run" && r.percent === undefined)).toBe(true);
    expect(report.rows.some((r) => r.phase === "MigrationFailed")).toBe(false);
  });

  it("puts the failure itinerary's phases after the main ones, numbered in their own itinerary", () => {
    const entries = migration().slice(0, 15);
    const last = entries[14]!;
    entries[14] = { ...last, outcome: { result: "failed", nextPhase: "MigrationFailed", finishedAt: last.finishedAt! } };
    let t = last.finishedAt! + 10;
    for (const phase of ["MigrationFailed", "CleanupAfterFailure", "WaitForCleanupAfterFailure"] as const) {
      entries.push(entry(phase, t, 50));
      t += 60;
    }
    const report = buildTimingReport({ entries, itinerary: "VolumeMigrationFailed", now: t });
    expect(report.itinerary).toBe("VolumeMigration");
    const tail = report.rows.slice(-4);
    expect(tail.map((r) => [r.phase, r.itinerary, r.step, r.totalSteps])).toEqual([
      ["MigrationFailed", "VolumeMigrationFailed", 1, 5],
      ["CleanupAfterFailure", "VolumeMigrationFailed", 2, 5],
      ["WaitForCleanupAfterFailure", "VolumeMigrationFailed", 3, 5],
      ["UnquiesceAfterFailure", "VolumeMigrationFailed", 4, 5],
    ]);
    expect(report.rows.find((r) => r.phase === "RunRsyncOperations")?.flags).toContain("failed");
    expect(report.rows.filter((r) => !r.ran).map((r) => r.phase)).toEqual(["DeleteRsyncResources", "WaitForRsyncResourcesTerminated", "UnquiesceAfterFailure"]);
  });

  it("guesses a rollback from entries that created nothing on the destination", () => {
    const rollback = ITINERARIES.VolumeMigrationRollback.filter((p) => p !== "Completed").map((p, i) => entry(p, T0 + i * 10, 5));
    expect(guessItinerary(rollback)).toBe("VolumeMigrationRollback");
    expect(guessItinerary(migration())).toBe("VolumeMigration");
    expect(buildTimingReport({ entries: rollback, now: T0 }).rows.map((r) => r.step)).toEqual(rollback.map((_, i) => i + 1));
  });
});

describe("the itinerary table as the report reads it", () => {
  it("puts every executable phase in an itinerary, so every ledger entry gets a place and a step", () => {
    const ordered = new Set<PhaseName>([...ITINERARIES.VolumeMigration, ...ITINERARIES.VolumeMigrationRollback, ...ITINERARIES.VolumeMigrationFailed]);
    expect(EXECUTABLE_PHASES.filter((p) => !ordered.has(p))).toEqual([]);
  });
});

describe("renderTimelineSvg", () => {
  it("is well-formed XML with one bar per execution, repeated ones in their own colour", () => {
    const entries = migration();
    const s = entries[1]!.startedAt;
    const claims: ClaimRecord[] = [{ at: s }, { at: s + 50, attempt: 2, takeover: true, end: "completed", endedAt: s + 90 }];
    entries[1] = { ...entries[1]!, attempts: 2, takeovers: 1, claims };
    const report = buildTimingReport({ entries, now: T0 });
    const svg = renderTimelineSvg(report, { title: `timeline of a <b>&"quoted"</b> DVM` });
    const checked = checkWellFormedXml(svg);
    expect(checked).toMatchObject({ ok: true, root: "svg" });
    expect(countElementsWithClass(svg, "execution")).toBe(report.executions);
    expect(countElementsWithClass(svg, "execution")).toBe(entries.length + 1);
    expect(countElementsWithClass(svg, "repeated")).toBe(1);
    expect(svg).toMatch(/<rect class="execution repeated"[^>]*fill="#e15759"/);
    for (const phase of entries.map((e) => e.key.phase)) expect(svg).toContain(`data-phase="${phase}"`);
    expect(svg).toContain("&lt;b&gt;&amp;&quot;quoted&quot;&lt;/b&gt;");
  });

  it("draws a bar even for an execution of no measurable length, and ticks at round steps", () => {
    const report = buildTimingReport({ entries: [entry("Started", T0, 0)], now: T0 });
    const svg = renderTimelineSvg(report);
    expect(checkWellFormedXml(svg).ok).toBe(true);
    expect(svg).toMatch(/<rect class="execution" x="[\d.]+" y="\d+" width="1.5"/);
    expect([tickStep(272), tickStep(14), tickStep(0.5), tickStep(0)]).toEqual([50, 2, 0.1, 1]);
  });
});

describe("checkWellFormedXml", () => {
  it("accepts well-formed documents and names what is wrong with broken ones", () => {
    expect(checkWellFormedXml(`<?xml version="1.0"?>\n<a x="1"><!-- c --><b/>t &amp; u</a>\n`)).toMatchObject({ ok: true, root: "a" });
    const broken: [string, RegExp][] = [
      ["<a><b></a>", /closes <b>/],
      ["<a>", /never closed/],
      ["<a/><b/>", /second root/],
      ['<a x="1" x="2"/>', /repeated/],
      ["<a x=1/>", /malformed/],
      ["<a>fish & chips</a>", /'&'/],
      ['<a t="<"/>', /malformed|'<'/],
      ["", /no root/],
    ];
    for (const [xml, error] of broken) expect(checkWellFormedXml(xml), xml).toMatchObject({ ok: false, error: expect.stringMatching(error) });
  });
});
