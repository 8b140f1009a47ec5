import { spawn } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { IN_POD_POLL_SECONDS } from "../../../src/transfer/configText";
import { clientScript, rsyncClientArgs, STUNNEL_WAIT_TIMEOUT_EXIT_CODE } from "../../../src/transfer/rsyncClient";
import { recordingSleep } from "../../support/recordingSleep";

const base = { sourcePath: "/mnt/source", module: "pvc-0123456789abcdef", user: "dvm", port: 6443 };

describe("rsyncClientArgs", () => {
  it("emits upstream's flags in upstream's order, as root", () => {
    expect(rsyncClientArgs({ ...base, preserveOwnership: true })).toEqual([
      "--recursive",
      "--links",
      "--perms",
      "--devices",
      "--specials",
      "--times",
      "--owner",
      "--group",
      "--hard-links",
      "--delete",
      "--partial",
      "--human-readable",
      "--info=COPY2,DEL2,REMOVE2,SKIP2,FLIST2,PROGRESS2,STATS2",
      "--numeric-ids",
      "--exclude=/lost+found",
      "/mnt/source/",
      "rsync://dvm@127.0.0.1:6443/pvc-0123456789abcdef/",
    ]);
  });

  it("copies a Block volume's device content into the device of the same name, sending only changed blocks later", () => {
    const args = rsyncClientArgs({ ...base, sourcePath: "/mnt/source/device", blockDevice: true, preserveOwnership: true, delete: true, partial: true });
    expect(args).toEqual([
      "--recursive",
      "--links",
      "--perms",
      "--devices",
      "--specials",
      "--times",
      "--owner",
      "--group",
      "--copy-devices",
      "--write-devices",
      "--ignore-times",
      "--human-readable",
      "--info=COPY2,DEL2,REMOVE2,SKIP2,FLIST2,PROGRESS2,STATS2",
      "--numeric-ids",
      "/mnt/source/device",
      "rsync://dvm@127.0.0.1:6443/pvc-0123456789abcdef/",
    ]);
    expect(() => rsyncClientArgs({ ...base, sourcePath: "/mnt/source/", blockDevice: true, preserveOwnership: true })).toThrow(/sourcePath/);
    expect(rsyncClientArgs({ ...base, sourcePath: "/mnt/source/device", blockDevice: true, wholeFile: true, preserveOwnership: false })).toContain(
      "--whole-file",
    );
  });

  it("leaves ownership out when the receiver cannot chown", () => {
    const args = rsyncClientArgs({ ...base, preserveOwnership: false });
    expect(args).not.toContain("--owner");
    expect(args).not.toContain("--group");
    expect(args).not.toContain("--numeric-ids");
  });

  it("maps every option to its flag, in the upstream positions", () => {
    const args = rsyncClientArgs({
      ...base,
      sourcePath: "/src/",
      host: "::1",
      preserveOwnership: false,
      verify: true,
      bwlimitKiB: 512,
      delete: false,
      partial: false,
      hardLinks: false,
      sparse: true,
      omitDirTimes: true,
      humanReadable: false,
      logFile: "/dev/stdout",
      timeoutSeconds: 300,
      extras: ["--inplace", "--compress-choice=zstd"],
    });
    expect(args).toEqual([
      "--recursive",
      "--links",
      "--perms",
      "--devices",
      "--specials",
      "--times",
      "--bwlimit=512",
      "--log-file=/dev/stdout",
      "--info=COPY2,DEL2,REMOVE2,SKIP2,FLIST2,PROGRESS2,STATS2",
      "--checksum",
      "--sparse",
      "--omit-dir-times",
      "--timeout=300",
      "--inplace",
      "--compress-choice=zstd",
      "--exclude=/lost+found",
      "/src/",
      "rsync://dvm@[::1]:6443/pvc-0123456789abcdef/",
    ]);
  });

  it("never carries the password", () => {
    expect(JSON.stringify(rsyncClientArgs({ ...base, preserveOwnership: true }))).not.toMatch(/password/i);
  });

  it("refuses bad options and dangerous extras, naming the field", () => {
    expect(() => rsyncClientArgs({ ...base, preserveOwnership: true, bwlimitKiB: 0 })).toThrow(/bwlimitKiB/);
    expect(() => rsyncClientArgs({ ...base, preserveOwnership: true, module: "../x" })).toThrow(/module/);
    expect(() => rsyncClientArgs({ ...base, preserveOwnership: true, sourcePath: "source" })).toThrow(/sourcePath/);
    expect(() => rsyncClientArgs({ ...base, preserveOwnership: true, extras: ["-e ssh"] })).toThrow(/extras\[0\]/);
    expect(() => rsyncClientArgs({ ...base, preserveOwnership: true, extras: ["--remove-source-files"] })).toThrow(/not allowed/);
    expect(() => rsyncClientArgs({ ...base, preserveOwnership: true, extras: ["--ok", "--rsh=ssh"] })).toThrow(/extras\[1\].*--rsh/);
    expect(() => rsyncClientArgs({ ...base, preserveOwnership: true, extras: ["--password-file=/x"] })).toThrow(/not allowed/);
    // Nor may an extra override what the controller set (rsync takes the last of two), or switch it off.
    for (const extra of ["--bwlimit=0", "--info=NONE", "--no-hard-links", "--delete-after", "--checksum", "--log-file=/dev/shm/x", "--temp-dir=/etc"])
      expect(() => rsyncClientArgs({ ...base, preserveOwnership: true, extras: [extra] })).toThrow(/extras\[0\].*not allowed/);
  });
});

describe("clientScript", () => {
  const dir = mkdtempSync(join(tmpdir(), "dvm-client-script-"));
  const servers: Server[] = [];
  afterAll(() => {
    for (const s of servers) s.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** A stand-in rsync that records its arguments and exits with the given code. */
  function fakeRsync(code: number): string {
    const path = join(dir, `rsync-${code}`);
    writeFileSync(
      path,
      `#!/bin/sh\nprintf '%s\\n' "$@" > ${join(dir, "args")}\necho "RSYNC_PASSWORD=\${RSYNC_PASSWORD:-unset}" >> ${join(dir, "args")}\necho "rsync error: code ${code}" >&2\nprintf '  1,024 100%%   1.00MB/s\\r' \nexit ${code}\n`,
    );
    chmodSync(path, 0o755);
    return path;
  }

  async function listen(): Promise<number> {
    const server = createServer((socket) => socket.end());
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    return (server.address() as { port: number }).port;
  }

  let stderr = "";
  function run(script: string, binFirst?: string): Promise<number> {
    stderr = "";
    return new Promise((resolve) => {
      const child = spawn("/bin/bash", ["-c", script], {
        env: { PATH: `${binFirst ? `${binFirst}:` : ""}${process.env.PATH ?? ""}`, RSYNC_PASSWORD: "from-env" },
        stdio: ["ignore", "ignore", "pipe"],
      });
      child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")));
      child.on("close", (code) => resolve(code ?? -1));
    });
  }

  it("waits for the port, runs rsync with the arguments, writes the done-file and exits with rsync's code", async () => {
    const port = await listen();
    const done = join(dir, "done-23");
    const script = clientScript({
      args: ["--recursive", "/mnt/my source/", "rsync://dvm@127.0.0.1/m/"],
      rsyncBinary: fakeRsync(23),
      waitPort: port,
      doneFile: done,
      errorFile: join(dir, "err-23"),
      terminationMessageFile: join(dir, "termination-23"),
    });
    expect(await run(script)).toBe(23);
    expect(existsSync(done)).toBe(true);
    // rsync's error closes the log, after its progress: the pod's termination message is its tail.
    expect(stderr.trimEnd().split("\n").at(-1)).toBe("rsync error: code 23");
    // ...and is the termination message, which has no race with the log's last lines.
    expect(readFileSync(join(dir, "termination-23"), "utf8")).toBe("rsync error: code 23\n");
    expect(readFileSync(join(dir, "args"), "utf8")).toBe("--recursive\n/mnt/my source/\nrsync://dvm@127.0.0.1/m/\nRSYNC_PASSWORD=from-env\n");
  });

  it("gives up after waitSeconds when nothing listens, still writing the done-file", async () => {
    const done = join(dir, "done-timeout");
    const script = clientScript({ args: ["x"], rsyncBinary: fakeRsync(0), waitPort: 1, waitSeconds: 1, doneFile: done, errorFile: join(dir, "err-timeout") });
    expect(await run(script)).toBe(STUNNEL_WAIT_TIMEOUT_EXIT_CODE);
    expect(existsSync(done)).toBe(true);
  });

  /** What the client script asks `sleep` for (test/support/recordingSleep.ts); nothing listens, so it polls until waitSeconds. */
  async function sleepsAsked(name: string, wholeSecondsOnly: boolean): Promise<string[]> {
    const sleep = recordingSleep(dir, name, { wholeSecondsOnly });
    const script = clientScript({
      args: ["x"],
      rsyncBinary: fakeRsync(0),
      waitPort: 1,
      waitSeconds: 1,
      doneFile: join(dir, `done-${name}`),
      errorFile: join(dir, `err-${name}`),
    });
    expect(await run(script, sleep.bin)).toBe(STUNNEL_WAIT_TIMEOUT_EXIT_CODE);
    return sleep.asked();
  }

  it("checks for the stunnel sidecar every tenth of a second, not every second (the first byte waited up to 1 s for it)", async () => {
    expect(await sleepsAsked("fraction", false)).toEqual([String(IN_POD_POLL_SECONDS)]);
    expect(IN_POD_POLL_SECONDS).toBeLessThan(1);
  });

  it("falls back to whole seconds where sleep takes no fraction, instead of spinning", async () => {
    expect(await sleepsAsked("whole", true)).toEqual(["1"]);
  });

  it("contains no password and refuses bad input", () => {
    const script = clientScript({ args: ["--a"], waitPort: 6443, doneFile: "/run/d", errorFile: "/run/e" });
    expect(script).toContain("/dev/tcp/127.0.0.1/6443");
    expect(script).toContain("deadline=$((SECONDS + 120))");
    expect(() => clientScript({ args: [], waitPort: 1, doneFile: "/d", errorFile: "/e" })).toThrow(/args/);
    expect(() => clientScript({ args: ["a\nrm -rf /"], waitPort: 1, doneFile: "/d", errorFile: "/e" })).toThrow(/args\[0\]/);
    expect(() => clientScript({ args: ["a"], waitPort: 1, doneFile: "d", errorFile: "/e" })).toThrow(/doneFile/);
  });
});
