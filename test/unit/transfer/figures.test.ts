import { describe, expect, it } from "vitest";
import { liveFigures, totalFigures, verificationReport } from "../../../src/transfer/figures";
import { parseRsyncProgress } from "../../../src/transfer/progress";

// An incremental pass as rsync 3.2.7 prints it with the client's --info flags and --human-readable:
// 2 of 5,000 regular files changed, one could not be read, one vanished, one failed verification.
const INCREMENTAL = [
  "sending incremental file list",
  "d0/f-17.dat",
  "d3/f-300.dat",
  "\r         32.77K   0%    0.00kB/s    0:00:00  \r          1.05M 100%   12.50MB/s    0:00:04 (xfr#2, to-chk=0/5101)",
  "",
  "Number of files: 5,101 (reg: 5,000, dir: 100, link: 1)",
  "Number of created files: 0",
  "Number of deleted files: 3",
  "Number of regular files transferred: 2",
  "Total file size: 209.72M bytes",
  "Total transferred file size: 1.05M bytes",
  "Literal data: 8.19K bytes",
  "Matched data: 1.04M bytes",
  "File list size: 65.54K",
  "Total bytes sent: 120.31K",
  "Total bytes received: 2.05K",
  "",
  "sent 120.31K bytes  received 2.05K bytes  30.59K bytes/sec",
  "total size is 209.72M  speedup is 1,714.00",
  'rsync: [sender] send_files failed to open "/mnt/source/secret.key": Permission denied (13)',
  'file has vanished: "/mnt/source/tmp/lock"',
  "ERROR: d3/f-300.dat failed verification -- update discarded.",
  "rsync error: some files/attrs were not transferred (see previous errors) (code 23) at main.c(1338) [sender=3.2.7]",
].join("\n");

describe("the verification report", () => {
  it("counts what was sent, skipped, vanished, failed and deleted, and the checksum mismatches, from rsync's own output", () => {
    expect(verificationReport(parseRsyncProgress(INCREMENTAL), { checksum: true })).toEqual({
      filesTransferred: 2,
      filesSkipped: 4_998,
      filesVanished: 1,
      filesFailed: 1,
      filesDeleted: 3,
      bytesTransferred: 120_310,
      transferredFileSize: 1_050_000,
      totalFiles: 5_101,
      totalBytes: 209_720_000,
      checksumVerified: true,
      checksumMismatches: 1,
    });
  });

  it("needs rsync's statistics: a log cut before them gives no report", () => {
    expect(verificationReport(parseRsyncProgress(INCREMENTAL.split("Number of files")[0]!), { checksum: false })).toBeUndefined();
  });
});

describe("transfer figures", () => {
  it("while running: bytes, the total estimated from the percentage, rate and rsync's time left", () => {
    expect(liveFigures(parseRsyncProgress("\r     52.43M  25%   10.00MB/s    0:00:15 (xfr#10, to-chk=90/100)"))).toEqual({
      bytesTransferred: 52_430_000,
      totalBytes: 209_720_000,
      percent: 25,
      bytesPerSecond: 10 * 1024 * 1024,
      secondsLeft: 15,
    });
  });

  it("at the end: the bytes rsync sent, the source's size, the average rate and the elapsed time", () => {
    expect(liveFigures(parseRsyncProgress(INCREMENTAL))).toEqual({
      bytesTransferred: 120_310,
      totalBytes: 209_720_000,
      percent: 100,
      bytesPerSecond: 30_590,
      secondsLeft: 0,
      elapsedSeconds: 4,
    });
  });

  it("adds volumes up; totals and time left only when every open volume has them", () => {
    const done = { bytesTransferred: 100, totalBytes: 100, percent: 100, done: true };
    const running = { bytesTransferred: 50, totalBytes: 300, percent: 50, bytesPerSecond: 10, secondsLeft: 15, done: false };
    expect(totalFigures([done, running])).toEqual({ bytesTransferred: 150, totalBytes: 400, percent: 62.5, bytesPerSecond: 10, secondsLeft: 15 });
    expect(totalFigures([done, running, { done: false }])).toEqual({ bytesTransferred: 150, bytesPerSecond: 10 });
    // An incremental pass: few bytes sent, still 100%.
    expect(totalFigures([{ bytesTransferred: 5, totalBytes: 1_000, percent: 100, done: true }])).toMatchObject({ percent: 100 });
  });
});
