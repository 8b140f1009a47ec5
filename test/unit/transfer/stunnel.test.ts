import { spawnSync } from "node:child_process";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { inspect } from "node:util";
import { beforeAll, describe, expect, it } from "vitest";
import { generateTransferPki, type TransferPki } from "../../../src/transfer/certificates";
import { IN_POD_POLL_SECONDS } from "../../../src/transfer/configText";
import { clientTransferSecretData } from "../../../src/transfer/secrets";
import { ProxyCredentials, stunnelClientConfig, stunnelServerConfig, stunnelSidecarScript } from "../../../src/transfer/stunnel";
import { recordingSleep } from "../../support/recordingSleep";

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

describe("stunnelClientConfig through an HTTP CONNECT proxy", () => {
  const proxy = { host: "proxy.corp.example", port: 3128 };

  it("dials the proxy, CONNECTs to the server, and still verifies and names the server", () => {
    const config = stunnelClientConfig({
      acceptPort: 6443,
      connectHost: "dvm-rsync-ns.apps.example.com",
      connectPort: 443,
      checkHost: "rsync-server.dvm.local",
      proxy,
      ...files,
    });
    expect(section(config, "rsync").slice(0, 8)).toEqual([
      "client = yes",
      "accept = 127.0.0.1:6443",
      "connect = proxy.corp.example:3128",
      "protocol = connect",
      "protocolHost = dvm-rsync-ns.apps.example.com:443",
      "verifyChain = yes",
      "checkHost = rsync-server.dvm.local",
      "sni = dvm-rsync-ns.apps.example.com",
    ]);
    expect(config).not.toContain("protocolUsername");
    expect(config).not.toContain("protocolPassword");
  });

  it("to an address: checkIP of the server, no SNI at all (never the proxy's name), IPv6 in brackets for CONNECT", () => {
    const byIp = section(stunnelClientConfig({ acceptPort: 1, connectHost: "198.18.0.11", connectPort: 30443, proxy, ...files }), "rsync");
    expect(byIp).toContain("protocolHost = 198.18.0.11:30443");
    expect(byIp).toContain("checkIP = 198.18.0.11");
    expect(byIp).toContain("sni =");
    expect(byIp.join("\n")).not.toMatch(/(checkHost|checkIP|sni) = proxy/);
    const v6 = section(
      stunnelClientConfig({ acceptPort: 1, connectHost: "fd00::7", connectPort: 30443, proxy: { host: "fd00::1", port: 8080 }, ...files }),
      "rsync",
    );
    expect(v6).toContain("connect = fd00::1:8080");
    expect(v6).toContain("protocolHost = [fd00::7]:30443");
  });

  it("sends basic credentials when the proxy has them", () => {
    const config = stunnelClientConfig({
      acceptPort: 1,
      connectHost: "10.0.0.7",
      connectPort: 30443,
      proxy: { ...proxy, credentials: new ProxyCredentials("dvm", "s3cret;#pw") },
      ...files,
    });
    expect(section(config, "rsync")).toEqual(
      expect.arrayContaining(["protocolAuthentication = basic", "protocolUsername = dvm", "protocolPassword = s3cret;#pw"]),
    );
  });

  it("refuses proxy values that would break the file, naming the field and never echoing the password", () => {
    const withProxy = (p: Record<string, unknown>) => () =>
      stunnelClientConfig({ acceptPort: 1, connectHost: "h", connectPort: 1, proxy: { ...proxy, ...p }, ...files });
    expect(withProxy({ host: "proxy\nverifyChain = no" })).toThrow(/proxy\.host/);
    expect(withProxy({ host: "a b" })).toThrow(/proxy\.host/);
    expect(withProxy({ port: 0 })).toThrow(/proxy\.port/);
    expect(withProxy({ port: 70000 })).toThrow(/proxy\.port/);
    expect(withProxy({ credentials: new ProxyCredentials("a:b", "pw") })).toThrow(/proxy\.username.*':'/);
    expect(withProxy({ credentials: new ProxyCredentials("a\nb", "pw") })).toThrow(/proxy\.username/);
    let error: unknown;
    try {
      withProxy({ credentials: new ProxyCredentials("dvm", "hunter2\nverifyChain = no") })();
    } catch (e) {
      error = e;
    }
    expect(String(error)).toMatch(/proxy\.password: must not contain control characters or line breaks/);
    expect(String(error)).not.toContain("hunter2");
  });

  it("keeps the password out of JSON and util.inspect", () => {
    const credentials = new ProxyCredentials("dvm", "hunter2");
    expect(credentials.password()).toBe("hunter2");
    expect(JSON.stringify({ proxy: { ...proxy, credentials } })).not.toContain("hunter2");
    expect(inspect({ proxy: { ...proxy, credentials } }, { depth: 10 })).not.toContain("hunter2");
  });
});

describe("clientTransferSecretData through a proxy", () => {
  let pki: TransferPki;
  beforeAll(async () => {
    pki = await generateTransferPki({ commonName: "dvm-t", serverDnsNames: ["rsync-server.dvm.local"] });
  });

  it("puts the proxy (and its credentials) in stunnel.conf, and nowhere else", () => {
    const secret = clientTransferSecretData({
      password: "rsync-pw",
      pki,
      endpointHost: "198.18.0.11",
      endpointPort: 31234,
      checkHost: "rsync-server.dvm.local",
      proxy: { host: "198.18.0.200", port: 3128, credentials: new ProxyCredentials("dvm", "hunter2") },
    });
    expect(section(secret["stunnel.conf"]!, "rsync").slice(2, 10)).toEqual([
      "connect = 198.18.0.200:3128",
      "protocol = connect",
      "protocolHost = 198.18.0.11:31234",
      "protocolAuthentication = basic",
      "protocolUsername = dvm",
      "protocolPassword = hunter2",
      "verifyChain = yes",
      "checkHost = rsync-server.dvm.local",
    ]);
    const others = Object.entries(secret).filter(([key]) => key !== "stunnel.conf");
    expect(others.map(([, value]) => value).join("")).not.toContain("hunter2");
    const direct = clientTransferSecretData({ password: "rsync-pw", pki, endpointHost: "198.18.0.11", endpointPort: 31234 })["stunnel.conf"];
    expect(direct).toContain("connect = 198.18.0.11:31234\n");
    expect(direct).not.toContain("protocol");
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

  it("looks for the done-file every tenth of a second, not every second (the client pod's end waited up to 1 s for it)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "dvm-sidecar-"));
    try {
      // A stunnel that runs until stopped, and a sleep that records what it was asked and plays the
      // rsync container writing the done-file.
      const stunnel = join(dir, "stunnel");
      writeFileSync(stunnel, "#!/bin/sh\nexec /bin/sleep 30\n");
      chmodSync(stunnel, 0o755);
      const done = join(dir, "done");
      const sleep = recordingSleep(dir, "sidecar", { alsoRun: `touch ${done}` });
      const script = stunnelSidecarScript({ configPath: join(dir, "stunnel.conf"), doneFile: done, stunnelBinary: stunnel });
      const exit = spawnSync("/bin/sh", ["-c", script], { env: { PATH: `${sleep.bin}:${process.env.PATH ?? ""}` }, timeout: 20_000 });
      expect(exit.status).toBe(0);
      expect(sleep.asked()).toEqual([String(IN_POD_POLL_SECONDS)]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
