/** `dvm schedule`'s rows (src/cli/scheduleRuns.ts): a schedule's runs, oldest first, with rsync's delta of each. */
import { describe, expect, it } from "vitest";
import { scheduleRuns } from "../../../src/cli/scheduleRuns";
import type { DirectVolumeMigration, DvmStatus } from "../../../src/dvm/types";
import { SCHEDULE_LABEL } from "../../../src/events/schedule";

const report = (transferredFileSize: number, bytesTransferred: number, filesTransferred: number) => ({
  filesTransferred,
  filesSkipped: 0,
  filesVanished: 0,
  filesFailed: 0,
  filesDeleted: 0,
  bytesTransferred,
  transferredFileSize,
  totalFiles: 10,
  totalBytes: 1_000_000,
  checksumVerified: false,
  checksumMismatches: 0,
});

const dvm = (name: string, schedule: string | undefined, status: DvmStatus): DirectVolumeMigration => ({
  apiVersion: "migration.openshift.io/v1alpha1",
  kind: "DirectVolumeMigration",
  metadata: { name, namespace: "shop", uid: name, generation: 1, resourceVersion: "1", ...(schedule ? { labels: { [SCHEDULE_LABEL]: schedule } } : {}) },
  spec: {},
  status,
});

const op = (name: string, verification?: ReturnType<typeof report>) => ({
  pvcReference: { namespace: "shop", name },
  currentAttempt: 1,
  succeeded: true,
  ...(verification ? { verification } : {}),
});

describe("a schedule's runs", () => {
  it("are its DVMs, oldest first, each with the delta summed over its PVCs from rsync's statistics", () => {
    const runs = scheduleRuns(
      [
        dvm("nightly-20261203-020000", "nightly", { phase: "Completed", rsyncOperations: [op("db", report(2048, 3000, 2)), op("media", report(0, 500, 0))] }),
        dvm("nightly-20261202-020000", "nightly", { phase: "Completed", rsyncOperations: [op("db", report(1_000_000, 1_100_000, 10))] }),
        dvm("nightly-20261204-020000", "nightly", { phase: "WaitForRsyncClientPodsCompleted", rsyncOperations: [op("db")] }),
        dvm("weekly-20261201-020000", "weekly", { phase: "Completed" }),
        dvm("by-hand", undefined, { phase: "Completed" }),
      ],
      "nightly",
    );
    expect(runs).toEqual([
      {
        name: "nightly-20261202-020000",
        scheduledTime: "2026-12-02T02:00:00Z",
        phase: "Completed",
        deltaBytes: 1_000_000,
        sentBytes: 1_100_000,
        filesTransferred: 10,
      },
      { name: "nightly-20261203-020000", scheduledTime: "2026-12-03T02:00:00Z", phase: "Completed", deltaBytes: 2048, sentBytes: 3500, filesTransferred: 2 },
      { name: "nightly-20261204-020000", scheduledTime: "2026-12-04T02:00:00Z", phase: "WaitForRsyncClientPodsCompleted" },
    ]);
  });
});
