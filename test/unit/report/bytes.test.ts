/** Bytes in the phase timing report and in `dvm watch`'s lines. */
import { describe, expect, it } from "vitest";
import { renderTimingReport } from "../../../src/cli/reportText";
import { volumeLine } from "../../../src/cli/watchView";
import type { DvmStatus } from "../../../src/dvm/types";
import type { LedgerEntry } from "../../../src/ledger/types";
import { buildTimingReport, formatBytes, formatTimeLeft } from "../../../src/report";

const UID = "0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9";

const completed = (phase: LedgerEntry["key"]["phase"], startedAt: number, statusUpdate?: Partial<DvmStatus>): LedgerEntry => ({
  key: { uid: UID, phase, generation: 1 },
  state: "COMPLETED",
  attempts: 1,
  takeovers: 0,
  waits: 0,
  failures: 0,
  startedAt,
  finishedAt: startedAt + 1_000,
  elapsedSeconds: 1,
  outcome: { result: "advanced", nextPhase: "Completed", finishedAt: startedAt + 1_000, ...(statusUpdate ? { statusUpdate } : {}) },
  claims: [{ at: startedAt, attempt: 1, takeover: false, end: "completed", endedAt: startedAt + 1_000 }],
});

describe("bytes per phase", () => {
  it("sums the bytes each PVC's transfer recorded with the phase's completion", () => {
    const report = buildTimingReport({
      now: 10_000,
      entries: [
        completed("Started", 0),
        completed("RunRsyncOperations", 2_000, {
          rsyncOperations: [
            { pvcReference: { namespace: "shop", name: "db" }, currentAttempt: 1, succeeded: true, bytesTransferred: 3 * 2 ** 20 },
            { pvcReference: { namespace: "shop", name: "media" }, currentAttempt: 1, succeeded: true, bytesTransferred: 2 ** 20 },
          ],
        }),
      ],
    });
    expect(report.rows.find((r) => r.phase === "RunRsyncOperations")?.bytesTransferred).toBe(4 * 2 ** 20);
    expect(report.rows.find((r) => r.phase === "Started")?.bytesTransferred).toBeUndefined();
    expect(report.bytesTransferred).toBe(4 * 2 ** 20);
    const text = renderTimingReport(report, "t");
    expect(text).toMatch(/RunRsyncOperations.*4\.00 MiB/);
    expect(text).toContain("Bytes moved: 4.00 MiB");
  });
});

describe("dvm watch's volume line", () => {
  it("shows bytes of the total, the rate and the time left while running", () => {
    const line = volumeLine({
      pvc: "shop/db",
      record: "r",
      state: "running",
      attempt: 1,
      percent: 25,
      bytesTransferred: 25 * 2 ** 20,
      totalBytes: 100 * 2 ** 20,
      bytesPerSecond: 10 * 2 ** 20,
      secondsLeft: 75,
    });
    expect(line).toBe("shop/db  running  attempt 1  25%  25.0 MiB of 100.0 MiB  10.0 MiB/s  1:15 left");
  });

  it("formats bytes and times", () => {
    expect(formatBytes(512)).toBe("512 B");
    expect(formatBytes(1536)).toBe("1.50 KiB");
    expect(formatTimeLeft(3_909)).toBe("1:05:09");
  });
});
