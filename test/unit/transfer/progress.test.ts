import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { mergeRsyncProgress, parseRate, parseRsyncProgress, parseSize } from "../../../src/transfer/progress";

// Recorded from rsync 3.5.0 through the generated stunnel pair (--human-readable --info=...PROGRESS2,STATS2).
const fixture = (name: string) => readFileSync(join(import.meta.dirname, "fixtures", name), "utf8");

describe("parseRsyncProgress", () => {
  it("reads a complete run: 100%, last rate, byte and file figures", () => {
    expect(parseRsyncProgress(fixture("progress-complete.txt"))).toEqual({
      finished: true,
      percent: 100,
      rate: "288.96MB/s",
      rateBytesPerSecond: Math.round(288.96 * 1024 * 1024),
      bytesTransferred: 15_490_000,
      filesTransferred: 4,
      totalFiles: 12,
      regularFiles: 5,
      createdFiles: 11,
      deletedFiles: 0,
      totalFileSize: 15_490_000,
      transferredFileSize: 15_490_000,
      bytesSent: 15_490_000,
      literalBytes: 15_490_000,
      matchedBytes: 0,
      averageBytesPerSecond: 30_980_000,
      elapsedSeconds: 0,
    });
  });

  it("reads a bandwidth-limited run (rate in kB/s, elapsed from the final line)", () => {
    const p = parseRsyncProgress(fixture("progress-bwlimit.txt"));
    expect(p).toMatchObject({
      finished: true,
      percent: 100,
      rate: "989.65kB/s",
      rateBytesPerSecond: 1_013_402,
      elapsedSeconds: 2,
      averageBytesPerSecond: 857_400,
      filesTransferred: 1,
    });
  });

  it("reads a log tail in the middle of a transfer: the last carriage-return segment wins", () => {
    const head = fixture("progress-bwlimit.txt").split("\n").slice(0, 2).join("\n");
    const midway = head.slice(0, head.indexOf("70%") + 40);
    const p = parseRsyncProgress(midway);
    expect(p).toEqual({
      finished: false,
      percent: 70,
      rate: "1000.98kB/s",
      rateBytesPerSecond: Math.round(1000.98 * 1024),
      bytesTransferred: 2_130_000,
      secondsLeft: 0,
    });
  });

  it("reads upstream-style lines, ir-chk, plain numbers and 1024 units", () => {
    expect(parseRsyncProgress("  1,234,567  45%   12.34MB/s    0:00:09 (xfr#3, ir-chk=1000/1020)\r")).toMatchObject({
      percent: 45,
      bytesTransferred: 1_234_567,
      filesTransferred: 3,
    });
    expect(parseRsyncProgress("Total bytes sent: 2.00M\n", { unitBase: 1024 }).bytesTransferred).toBe(2 * 1024 * 1024);
    expect(parseRsyncProgress("Number of regular files transferred: 1,024\n").filesTransferred).toBe(1024);
  });

  it("reports rsync's and the daemon's errors", () => {
    const p = parseRsyncProgress(
      "@ERROR: auth failed on module pvc-1\nrsync error: error starting client-server protocol (code 5) at main.c(1954) [sender=3.5.0]\n",
    );
    expect(p).toEqual({ finished: false, daemonError: "auth failed on module pvc-1", error: "error starting client-server protocol", errorCode: 5 });
    expect(
      parseRsyncProgress("rsync error: some files/attrs were not transferred (see previous errors) (code 23) at main.c(1338) [sender=3.2.3]").errorCode,
    ).toBe(23);
  });

  it("returns nothing but finished=false for unrelated text", () => {
    expect(parseRsyncProgress("")).toEqual({ finished: false });
    expect(parseRsyncProgress("sending incremental file list\nfoo/bar\n")).toEqual({ finished: false });
  });
});

describe("mergeRsyncProgress", () => {
  it("keeps the highest percent across attempts and takes other fields from the later reading", () => {
    const first = parseRsyncProgress("  10.00M  80%  5.00MB/s  0:00:01\r");
    const retry = parseRsyncProgress("  1.00M  10%  9.00MB/s  0:00:30\r");
    expect(mergeRsyncProgress(first, retry)).toMatchObject({ percent: 80, rate: "9.00MB/s", bytesTransferred: 1_000_000, finished: false });
    expect(mergeRsyncProgress(retry, first).percent).toBe(80);
    expect(mergeRsyncProgress(undefined, retry)).toBe(retry);
    expect(mergeRsyncProgress(first, { finished: true, percent: 100 })).toMatchObject({ percent: 100, finished: true, rate: "5.00MB/s" });
  });
});

describe("parseSize / parseRate", () => {
  it("reads rsync's number styles", () => {
    expect(parseSize("15.49M")).toBe(15_490_000);
    expect(parseSize("1.5G", 1024)).toBe(1.5 * 1024 ** 3);
    expect(parseSize("15,490,064")).toBe(15_490_064);
    expect(parseSize("15.490.064")).toBe(15_490_064);
    expect(parseSize("141")).toBe(141);
    expect(parseSize("x")).toBeNaN();
    expect(parseRate("0.00kB/s")).toBe(0);
    expect(parseRate("1.01MB/s")).toBe(Math.round(1.01 * 1024 * 1024));
    expect(parseRate("fast")).toBeNaN();
  });
});

describe("vanished files (rsync exit code 24)", () => {
  it('counts the "file has vanished" lines and reads the warning with its code', () => {
    const log = [
      "sending incremental file list",
      'file has vanished: "/mnt/source/cache/x"',
      "        1.00M  50%  100.00MB/s    0:00:00 (xfr#1, to-chk=1/3)",
      'file has vanished: "/mnt/source/cache/y z"',
      "sent 1.00M bytes  received 35 bytes  2.00M bytes/sec",
      "total size is 2.00M  speedup is 1.00",
      "rsync warning: some files vanished before they could be transferred (code 24) at main.c(1338) [sender=3.2.7]",
    ].join("\n");
    const progress = parseRsyncProgress(log);
    expect(progress).toMatchObject({ vanishedFiles: 2, warning: "some files vanished before they could be transferred", errorCode: 24, finished: true });
    expect(progress.error).toBeUndefined();
  });

  it("leaves the count undefined when nothing vanished", () => {
    expect(parseRsyncProgress("total size is 0  speedup is 0.00").vanishedFiles).toBeUndefined();
  });
});
