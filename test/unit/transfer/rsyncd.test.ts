import { describe, expect, it } from "vitest";
import { moduleNameFor, rsyncdConfig } from "../../../src/transfer/rsyncd";

const base = {
  modules: [{ name: "pvc-0123456789abcdef", path: "/mnt/pvc-0123456789abcdef", comment: "ns/data", authUser: "pvc-0123456789abcdef" }],
  secretsFile: "/tmp/rsyncd.secrets",
};

const settings = (config: string) => config.split("\n").filter((l) => l.includes(" = "));

describe("moduleNameFor", () => {
  it("is a short deterministic hash of namespace/name", () => {
    const name = moduleNameFor({ namespace: "ns", name: "data" });
    expect(name).toMatch(/^pvc-[0-9a-f]{16}$/);
    expect(moduleNameFor({ namespace: "ns", name: "data" })).toBe(name);
    expect(moduleNameFor({ namespace: "ns2", name: "data" })).not.toBe(name);
    expect(moduleNameFor({ namespace: "nsd", name: "ata" })).not.toBe(name);
  });
});

describe("rsyncdConfig", () => {
  it("for a non-root daemon: loopback only, write only, one user per module, no uid/gid, no chroot, verbatim symlinks", () => {
    const config = rsyncdConfig({ ...base, runAsRoot: false });
    expect(settings(config)).toEqual([
      "port = 8873",
      "address = 127.0.0.1",
      "log file = /dev/stdout",
      "reverse lookup = no",
      "hosts allow = 127.0.0.1 ::1",
      "hosts deny = *",
      "secrets file = /tmp/rsyncd.secrets",
      "strict modes = yes",
      "read only = no",
      "write only = yes",
      "list = no",
      "use chroot = no",
      "munge symlinks = no",
      "numeric ids = yes",
      "path = /mnt/pvc-0123456789abcdef",
      "comment = ns/data",
      "auth users = pvc-0123456789abcdef",
    ]);
    expect(config).toContain("\n[pvc-0123456789abcdef]\npath = ");
  });

  it("as root: transfers run as uid/gid 0, chroot on request", () => {
    const config = rsyncdConfig({ ...base, runAsRoot: true, useChroot: true });
    expect(config).toContain("uid = 0\ngid = 0\nuse chroot = yes\n");
    expect(rsyncdConfig({ ...base, runAsRoot: true })).toContain("use chroot = no");
    expect(() => rsyncdConfig({ ...base, runAsRoot: false, useChroot: true })).toThrow(/useChroot/);
  });

  it("takes port, address, hosts, pid file, log file, digest, timeout and read-only", () => {
    const config = rsyncdConfig({
      ...base,
      runAsRoot: false,
      port: 2222,
      address: "::1",
      hostsAllow: ["::1"],
      pidFile: "/tmp/r.pid",
      logFile: "/tmp/r.log",
      authDigest: "sha512",
      timeoutSeconds: 600,
      readOnly: true,
    });
    expect(settings(config)).toEqual(
      expect.arrayContaining([
        "port = 2222",
        "address = ::1",
        "hosts allow = ::1",
        "pid file = /tmp/r.pid",
        "log file = /tmp/r.log",
        "auth digest = sha512",
        "timeout = 600",
        "read only = yes",
      ]),
    );
  });

  it("writes one section per module", () => {
    const config = rsyncdConfig({
      ...base,
      runAsRoot: false,
      modules: [
        { name: "a", path: "/mnt/a", authUser: "a" },
        { name: "b", path: "/mnt/b", authUser: "b" },
      ],
    });
    expect(config).toContain("[a]\npath = /mnt/a\nauth users = a\n");
    expect(config).toContain("[b]\npath = /mnt/b\nauth users = b\n");
    // No global user: a module admits its own user only.
    expect(config.slice(0, config.indexOf("[a]"))).not.toContain("auth users");
  });

  it("refuses % anywhere rsync would expand %VAR% (its %% escape does not protect %VAR%)", () => {
    expect(() => rsyncdConfig({ ...base, runAsRoot: false, modules: [{ name: "a", path: "/mnt/%HOME%/a", authUser: "a" }] })).toThrow(/modules\[0\]\.path.*%/);
    expect(() => rsyncdConfig({ ...base, runAsRoot: false, secretsFile: "/tmp/100%" })).toThrow(/secretsFile/);
    expect(() => rsyncdConfig({ ...base, runAsRoot: false, modules: [{ name: "a", path: "/a", comment: "50%", authUser: "a" }] })).toThrow(/comment/);
  });

  it("refuses what would change the file's meaning, naming the field", () => {
    expect(() => rsyncdConfig({ ...base, runAsRoot: false, modules: [] })).toThrow(/modules/);
    expect(() => rsyncdConfig({ ...base, runAsRoot: false, modules: [{ name: "a]", path: "/a", authUser: "a" }] })).toThrow(/modules\[0\]\.name/);
    expect(() =>
      rsyncdConfig({
        ...base,
        runAsRoot: false,
        modules: [
          { name: "a", path: "/a", authUser: "a" },
          { name: "a", path: "/b", authUser: "a" },
        ],
      }),
    ).toThrow(/modules\[1\]\.name.*twice/);
    expect(() => rsyncdConfig({ ...base, runAsRoot: false, modules: [{ name: "a", path: "/a\nuid = 0", authUser: "a" }] })).toThrow(/modules\[0\]\.path/);
    expect(() => rsyncdConfig({ ...base, runAsRoot: false, modules: [{ name: "a", path: "/a\\", authUser: "a" }] })).toThrow(/backslash/);
    expect(() => rsyncdConfig({ ...base, runAsRoot: false, modules: [{ name: "a", path: "/outer/./inner", authUser: "a" }] })).toThrow(/\/\.\//);
    expect(() => rsyncdConfig({ ...base, runAsRoot: false, modules: [{ name: "a", path: "relative", authUser: "a" }] })).toThrow(/absolute/);
    expect(() => rsyncdConfig({ ...base, runAsRoot: false, modules: [{ name: "a", path: "/a", authUser: "a b" }] })).toThrow(/modules\[0\]\.authUser/);
    expect(() => rsyncdConfig({ ...base, runAsRoot: false, hostsAllow: [] })).toThrow(/hostsAllow/);
    expect(() => rsyncdConfig({ ...base, runAsRoot: false, port: 70000 })).toThrow(/port/);
    expect(() => rsyncdConfig({ ...base, runAsRoot: false, timeoutSeconds: -1 })).toThrow(/timeoutSeconds/);
  });
});
