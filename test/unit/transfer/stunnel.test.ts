import { describe, expect, it } from "vitest";
import { stunnelClientConfig, stunnelServerConfig, stunnelSidecarScript } from "../../../src/transfer/stunnel";

const files = { certPath: "/etc/dvm-transfer/tls.crt", keyPath: "/etc/dvm-transfer/tls.key", caPath: "/etc/dvm-transfer/ca.crt" };

/** The `key = value` lines of one section ("" = global), in order. */
function section(config: string, name: string): string[] {
  const out: string[] = [];
  let current = "";
  for (const line of config.split("\n")) {
    if (line.startsWith(";") || line.trim() === "") continue;
    const header = /^\[(.+)\]$/.exec(line);
    if (header) current = header[1] ?? "";
    else if (current === name) out.push(line);
  }
  return out;
}

describe("stunnelServerConfig", () => {
  const config = stunnelServerConfig({ acceptPort: 6443, connectPort: 8873, ...files });

  it("runs in the foreground without pid file or syslog, logging at info", () => {
    expect(section(config, "")).toEqual(["foreground = yes", "pid =", "syslog = no", "debug = info"]);
  });

  it("accepts TLS 1.3 only from clients with a certificate of the CA and forwards to the local daemon", () => {
    expect(section(config, "rsync")).toEqual([
      "accept = 6443",
      "connect = 127.0.0.1:8873",
      "verifyChain = yes",
      "requireCert = yes",
      "cert = /etc/dvm-transfer/tls.crt",
      "key = /etc/dvm-transfer/tls.key",
      "CAfile = /etc/dvm-transfer/ca.crt",
      "sslVersionMin = TLSv1.3",
      "TIMEOUTclose = 0",
      "socket = l:TCP_NODELAY=1",
      "socket = r:TCP_NODELAY=1",
    ]);
    expect(config).not.toMatch(/verify\s*=\s*0|sslVersion = TLSv1\.2/);
  });

  it("takes bind address, pid file, log file, level and service name", () => {
    const custom = stunnelServerConfig({
      acceptHost: "127.0.0.1",
      acceptPort: 1,
      connectHost: "::1",
      connectPort: 2,
      pidFile: "/tmp/s.pid",
      foreground: false,
      logLevel: "notice",
      logFile: "/tmp/s.log",
      serviceName: "fs",
      ...files,
    });
    expect(section(custom, "")).toEqual(["foreground = no", "pid = /tmp/s.pid", "syslog = no", "output = /tmp/s.log", "debug = notice"]);
    expect(section(custom, "fs").slice(0, 2)).toEqual(["accept = 127.0.0.1:1", "connect = ::1:2"]);
    // stunnel splits at the last colon and resolves "[::]" as a name: no brackets.
    expect(stunnelServerConfig({ acceptHost: "::", acceptPort: 6443, connectPort: 2, ...files })).toContain("accept = :::6443\n");
  });

  it("refuses values that would break the file, naming the option", () => {
    expect(() => stunnelServerConfig({ acceptPort: 0, connectPort: 1, ...files })).toThrow(/acceptPort/);
    expect(() => stunnelServerConfig({ acceptPort: 1, connectPort: 1, ...files, certPath: "/x\nverifyChain = no" })).toThrow(/certPath.*line breaks/);
    expect(() => stunnelServerConfig({ acceptPort: 1, connectPort: 1, ...files, keyPath: "relative.key" })).toThrow(/keyPath.*absolute/);
    expect(() => stunnelServerConfig({ acceptPort: 1, connectPort: 1, ...files, connectHost: "a b" })).toThrow(/connectHost/);
    expect(() => stunnelServerConfig({ acceptPort: 1, connectPort: 1, ...files, serviceName: "x]" })).toThrow(/serviceName/);
  });
});

describe("stunnelClientConfig", () => {
  it("listens on loopback, verifies the chain, pins the server name and sends the dialled name as SNI", () => {
    const config = stunnelClientConfig({
      acceptPort: 6443,
      connectHost: "dvm-rsync-ns.apps.example.com",
      connectPort: 443,
      checkHost: "rsync-server.dvm.local",
      ...files,
    });
    expect(section(config, "rsync")).toEqual([
      "client = yes",
      "accept = 127.0.0.1:6443",
      "connect = dvm-rsync-ns.apps.example.com:443",
      "verifyChain = yes",
      "checkHost = rsync-server.dvm.local",
      "sni = dvm-rsync-ns.apps.example.com",
      "cert = /etc/dvm-transfer/tls.crt",
      "key = /etc/dvm-transfer/tls.key",
      "CAfile = /etc/dvm-transfer/ca.crt",
      "sslVersionMin = TLSv1.3",
      "TIMEOUTclose = 0",
      "socket = l:TCP_NODELAY=1",
      "socket = r:TCP_NODELAY=1",
    ]);
  });

  it("checks the dialled name by default, as checkIP for an address", () => {
    const byName = stunnelClientConfig({ acceptPort: 1, connectHost: "rsync.ns.svc", connectPort: 6443, ...files });
    expect(byName).toContain("checkHost = rsync.ns.svc\n");
    const byIp = stunnelClientConfig({ acceptPort: 1, connectHost: "10.0.0.7", connectPort: 30443, ...files });
    expect(byIp).toContain("checkIP = 10.0.0.7\n");
    expect(byIp).not.toContain("sni =");
  });
});

describe("stunnelSidecarScript", () => {
  it("runs stunnel until the done-file appears, quoting paths", () => {
    const script = stunnelSidecarScript({ configPath: "/etc/dvm transfer/stunnel.conf", doneFile: "/run/dvm-transfer/rsync-client-done" });
    expect(script).toContain("stunnel '/etc/dvm transfer/stunnel.conf' &");
    expect(script).toContain("while [ ! -e /run/dvm-transfer/rsync-client-done ]; do");
    expect(script).toMatch(/exit 0\n$/);
    expect(() => stunnelSidecarScript({ configPath: "x", doneFile: "/d" })).toThrow(/configPath/);
  });
});
