/** The quiesce instrument: how the versions the watch saw become wrong records and wrong restores (pure, no services used). */
import { describe, expect, it } from "vitest";
import type { QuiescedApplication } from "../../src/dvm/types";
import { judgeQuiesce, QUIESCE_APPLICATIONS, type Seen } from "./harness/quiesceWorkloads";

type Versions = Record<string, Array<[number | boolean, string?]>>;

/** A history of namespace "ns": per application name, its (value, record) versions in order. */
function history(versions: Versions) {
  return {
    versions: (_kind: string, namespace: string, name: string): Seen[] =>
      namespace === "ns"
        ? (versions[name] ?? []).map(([value, record], i) => ({ resourceVersion: i + 1, value, ...(record !== undefined ? { record } : {}) }))
        : [],
  };
}

/** What ours does: record the count once, scale down, then restore once (record removed in the same write). */
const RIGHT: Versions = {
  app: [[2], [0, "2"], [2]],
  db: [[3], [0, "3"], [3]],
  report: [[false], [true, "false"], [false]],
  "paused-report": [[true], [true, "true"], [true]],
};

const LISTED: QuiescedApplication[] = QUIESCE_APPLICATIONS.map((a) => ({
  kind: a.kind,
  namespace: "ns",
  name: a.name,
  ...(a.kind === "CronJob" ? { suspend: a.suspend! } : { replicas: a.replicas! }),
  restored: true,
}));

describe("judgeQuiesce", () => {
  it("counts nothing wrong for one record and one restore per application", () => {
    const tally = judgeQuiesce(history(RIGHT), ["ns"], new Map([["ns", LISTED]]));
    expect(tally).toEqual({ workloads: 4, quiesced: 4, restores: 4, wrongRecords: [], wrongRestores: [] });
  });

  it("a repeat that recorded the 0 it read: a wrong record, and the restore to 0 a wrong restore", () => {
    const tally = judgeQuiesce(history({ ...RIGHT, app: [[2], [0, "2"], [0, "0"], [0]] }), ["ns"]);
    expect(tally.wrongRecords).toEqual(["Deployment ns/app: recorded 0 on the object, had 2"]);
    expect(tally.wrongRestores).toEqual(["Deployment ns/app: left at 0 replicas, had 2"]);
  });

  it("a status that lists the 0 read by a repeat, or lists nothing: wrong records", () => {
    const listed = LISTED.map((a) => (a.name === "db" ? { ...a, replicas: 0 } : a)).filter((a) => a.name !== "report");
    const tally = judgeQuiesce(history(RIGHT), ["ns"], new Map([["ns", listed]]));
    expect(tally.wrongRecords).toEqual([
      "StatefulSet ns/db: status.quiescedApplications says 0, had 3",
      "CronJob ns/report: not in status.quiescedApplications",
    ]);
  });

  it("a restore run twice (record put back by a stale write, removed again), and one never run", () => {
    const tally = judgeQuiesce(history({ ...RIGHT, app: [[2], [0, "2"], [2], [0, "2"], [2]], db: [[3], [0, "3"]] }), ["ns"]);
    expect(tally.restores).toBe(4);
    expect(tally.wrongRestores).toEqual([
      "Deployment ns/app: restored 2 times (record removed 2 times)",
      "Deployment ns/app: its count was written back 3 times after the scale-down",
      "StatefulSet ns/db: never restored",
      "StatefulSet ns/db: left at 0 replicas, had 3",
      "StatefulSet ns/db: its record 3 is still on the object",
    ]);
  });

  it("MTC's CronJob restore: the one suspended before is left unsuspended", () => {
    const tally = judgeQuiesce(history({ ...RIGHT, "paused-report": [[true], [true, "true"], [false]] }), ["ns"]);
    expect(tally.wrongRecords).toEqual([]);
    expect(tally.wrongRestores).toEqual(["CronJob ns/paused-report: left unsuspended, had suspend true"]);
  });

  it("an application never seen, or never quiesced", () => {
    const { app: _gone, ...rest } = RIGHT;
    const tally = judgeQuiesce(history({ ...rest, db: [[3]] }), ["ns"]);
    expect(tally.wrongRestores).toEqual(["Deployment ns/app: never seen", "StatefulSet ns/db: never quiesced"]);
  });
});
