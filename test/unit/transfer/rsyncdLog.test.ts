import { describe, expect, it } from "vitest";
import { DAEMON_LINE_CHARS, DAEMON_REASON_LINES, daemonErrorLines } from "../../../src/transfer/rsyncdLog";

// As rsync 3.5.0's daemon wrote them (log file = /dev/stdout), two modules of one server pod.
const LOG = `2026/12/03 08:01:22 [24193] rsyncd version 3.5.0 starting, listening on port 8873
2026/12/03 08:01:24 [24203] connect from UNDETERMINED (127.0.0.1)
2026/12/03 08:01:24 [24203] rsync allowed access on module pvc-aaaa from UNDETERMINED (127.0.0.1)
2026/12/03 08:01:24 [24203] auth failed on module pvc-aaaa from UNDETERMINED (127.0.0.1) for dvm: password mismatch
2026/12/03 08:01:24 [24220] connect from UNDETERMINED (127.0.0.1)
2026/12/03 08:01:24 [24220] rsync allowed access on module pvc-bbbb from UNDETERMINED (127.0.0.1)
2026/12/03 08:01:24 [24220] rsync to pvc-bbbb/ from dvm@UNDETERMINED (127.0.0.1)
2026/12/03 08:01:24 [24220] receiving file list
2026/12/03 08:01:24 [24220] rsync: [receiver] mkstemp ".f.NpzvPj" (in pvc-bbbb) failed: Permission denied (13)
2026/12/03 08:01:24 [24225] connect from UNDETERMINED (127.0.0.1)
2026/12/03 08:01:24 [24225] rsync allowed access on module pvc-aaaa from UNDETERMINED (127.0.0.1)
2026/12/03 08:01:24 [24225] rsync: [Receiver] chdir /mnt/pvc-aaaa failed: Permission denied (13)
`;

describe("daemonErrorLines", () => {
  it("is the newest connection's error lines for the module, without timestamps, pids and routine lines", () => {
    expect(daemonErrorLines(LOG, "pvc-aaaa")).toEqual(["rsync: [Receiver] chdir /mnt/pvc-aaaa failed: Permission denied (13)"]);
    expect(daemonErrorLines(LOG, "pvc-bbbb")).toEqual(['rsync: [receiver] mkstemp ".f.NpzvPj" (in pvc-bbbb) failed: Permission denied (13)']);
    expect(daemonErrorLines(LOG.split("\n").slice(0, 4).join("\n"), "pvc-aaaa")).toEqual([
      "auth failed on module pvc-aaaa from UNDETERMINED (127.0.0.1) for dvm: password mismatch",
    ]);
  });

  it("is empty for a module the log does not mention", () => {
    expect(daemonErrorLines(LOG, "pvc-cccc")).toEqual([]);
    expect(daemonErrorLines("", "pvc-aaaa")).toEqual([]);
  });

  it("keeps at most DAEMON_REASON_LINES lines of at most DAEMON_LINE_CHARS characters", () => {
    const many = Array.from({ length: 50 }, (_, i) => `2026/12/03 08:01:24 [7] rsync: [receiver] failed ${i} ${"x".repeat(1_000)}`);
    const lines = daemonErrorLines(["2026/12/03 08:01:24 [7] rsync to pvc-aaaa/ from dvm@x (127.0.0.1)", ...many].join("\n"), "pvc-aaaa");
    expect(lines).toHaveLength(DAEMON_REASON_LINES);
    expect(lines.every((l) => l.length <= DAEMON_LINE_CHARS)).toBe(true);
    expect(lines[0]).toMatch(/^rsync: \[receiver\] failed 45 /);
  });
});
