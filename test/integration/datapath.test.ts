/**
 * Issue 8: what src/transfer generates moves real bytes, securely. The generated Secret payloads are
 * written where the pods mount them and the pods' own container commands run as local processes:
 * rsync --daemon and stunnel as the server pod, the client script and the stunnel sidecar as a client
 * pod, on loopback, between temporary directories standing in for the PVCs. No mocks.
 */
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import {
  chmodSync,
  chownSync,
  closeSync,
  existsSync,
  linkSync,
  lstatSync,
  lutimesSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  unlinkSync,
  utimesSync,
  writeFileSync,
  writeSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { findFreePort } from "../../infra/dev/local/ports";
import { generateTransferPki, type TransferPki } from "../../src/transfer/certificates";
import { generateRsyncPassword, moduleCredential } from "../../src/transfer/credentials";
import { SECRET_KEY, transferPaths } from "../../src/transfer/paths";
import { parseRsyncProgress } from "../../src/transfer/progress";
import { moduleNameFor } from "../../src/transfer/rsyncd";
import { clientTransferSecretData } from "../../src/transfer/secrets";
import {
  assertDataPathPrograms,
  hasIpv6Loopback,
  type LocalClientOptions,
  LocalProcesses,
  type LocalServerPod,
  runLocalClientPod,
  snapshotTree,
  startLocalServerPod,
  type TreeEntry,
  waitForPort,
} from "../support/datapath";

const NAMESPACE = "app";
const USER = "dvm";
const SERVER_NAME = "rsync-server.dvm.local";
const MiB = 1024 * 1024;
const pvc = (name: string) => ({ namespace: NAMESPACE, name });
const PVC = { data: pvc("data"), sparse: pvc("sparse"), resume: pvc("resume"), bwlimit: pvc("bwlimit"), refused: pvc("refused") };
/** Another tenant's destination PVC, served by that namespace's server pod of the same DVM (an admin DVM across tenant namespaces). */
const TENANT_B = { namespace: "tenant-b", name: "data" };
const OLD = new Date("2020-02-02T02:02:02Z");

let root: string;
let processes: LocalProcesses;
let pki: TransferPki;
let password: string;
let server: LocalServerPod;

beforeAll(async () => {
  assertDataPathPrograms();
  if (process.getuid?.() !== 0) throw new Error("The data path test runs as root: it sets owners, chroots the daemon and starts non-root pods with setuid.");
  root = mkdtempSync(join(tmpdir(), "dvm-datapath-"));
  // Non-root containers below must be able to traverse it, as they can a pod's mount points.
  chmodSync(root, 0o755);
  processes = new LocalProcesses(join(root, "logs"));
  pki = await generateTransferPki({ commonName: "dvm-it", serverDnsNames: [SERVER_NAME] });
  password = generateRsyncPassword();
  server = await startLocalServerPod(processes, {
    root: join(root, "server"),
    namespace: NAMESPACE,
    pvcs: Object.values(PVC),
    runAsRoot: true,
    rsyncSecret: password,
    pki,
  });
});

afterAll(async () => {
  await processes?.stopAll();
  // DVM_KEEP_DATAPATH=1 keeps the trees and every process log (root/logs) for a post-mortem.
  if (root && !process.env.DVM_KEEP_DATAPATH) rmSync(root, { recursive: true, force: true });
  else if (root) console.log(`data path test files kept in ${root}`);
});

/** One client pod attempt into `destination`, as root, with the shared PKI and password. */
function runClient(sourceDir: string, destination: { namespace: string; name: string }, extra: Partial<LocalClientOptions> = {}) {
  return runLocalClientPod(processes, {
    root: join(root, "clients"),
    server,
    namespace: NAMESPACE,
    sourceDir,
    sourcePvc: pvc("source"),
    destinationPvc: destination,
    runAsRoot: true,
    rsyncSecret: password,
    pki,
    ...extra,
  });
}

function write(path: string, content: string | Buffer, mode = 0o644): void {
  mkdirSync(join(path, ".."), { recursive: true });
  writeFileSync(path, content);
  chmodSync(path, mode);
}

/** Sets every modification time below `dir` to OLD, so "times preserved" means something. */
function ageTree(dir: string): void {
  const walk = (path: string) => {
    const st = lstatSync(path);
    if (st.isDirectory()) for (const name of readdirSync(path)) walk(join(path, name));
    if (st.isSymbolicLink()) lutimesSync(path, OLD, OLD);
    else utimesSync(path, OLD, OLD);
  };
  walk(dir);
}

function sparseFile(path: string, size: number, dataAt: number[]): void {
  const fd = openSync(path, "w");
  try {
    for (const offset of dataAt) writeSync(fd, randomBytes(64 * 1024), 0, 64 * 1024, offset);
    // ftruncate extends with a hole.
    spawnSync("truncate", ["-s", String(size), path]);
  } finally {
    closeSync(fd);
  }
}

/** A tree with every kind of thing rsync is asked to carry. */
function makeSourceTree(dir: string): void {
  write(join(dir, "big.bin"), randomBytes(3 * MiB));
  write(join(dir, "exec.sh"), "#!/bin/sh\necho hi\n", 0o755);
  write(join(dir, "secret.txt"), "only for 1234\n", 0o600);
  chownSync(join(dir, "secret.txt"), 1234, 5678);
  write(join(dir, "name with spaces ü.txt"), "unicode and spaces\n");
  write(join(dir, "sub/a.txt"), "hello\n", 0o640);
  write(join(dir, "sub/deeper/b.txt"), "deeper\n");
  linkSync(join(dir, "sub/a.txt"), join(dir, "hard.txt"));
  symlinkSync("sub/a.txt", join(dir, "rel-link"));
  symlinkSync("/etc/hostname", join(dir, "abs-link"));
  symlinkSync("does/not/exist", join(dir, "dangling"));
  mkdirSync(join(dir, "empty"), { mode: 0o750 });
  chmodSync(join(dir, "empty"), 0o750);
  mkdirSync(join(dir, "private"));
  chmodSync(join(dir, "private"), 0o700);
  chownSync(join(dir, "private"), 4321, 4321);
  write(join(dir, "private/owned.txt"), "x");
  chownSync(join(dir, "private/owned.txt"), 4321, 4321);
  // A user directory that happens to be called lost+found is data; only the top-level one is not.
  write(join(dir, "deep/lost+found/keep.txt"), "keep me\n");
  write(join(dir, "lost+found/fs-internal.txt"), "not data\n");
  sparseFile(join(dir, "holes.img"), 8 * MiB, [0]);
  spawnSync("mkfifo", [join(dir, "fifo")]);
  ageTree(dir);
}

const isTopLostFound = (rel: string) => rel === "lost+found";
/** What must match between source and destination: all but block allocation. */
const comparable = (tree: Map<string, TreeEntry>) => new Map([...tree].map(([path, { blocks: _blocks, ...rest }]) => [path, rest]));

describe("rsync through the generated stunnel pair (root server, chroot)", () => {
  let source: string;
  let destination: string;

  beforeAll(() => {
    source = join(root, "source-data");
    makeSourceTree(source);
    destination = server.volumePath(PVC.data);
    // The destination file system's own lost+found, and a file the source no longer has.
    write(join(destination, "lost+found/dest-internal.txt"), "fs\n");
    write(join(destination, "stale.txt"), "gone at the source\n");
  });

  it("copies files, modes, owners, times, symlinks, hard links, empty dirs and FIFOs; deletes what the source lacks", async () => {
    const run = await runClient(source, PVC.data);
    expect(run.rsyncExit, run.output).toEqual({ code: 0, signal: null });
    // The sidecar saw the done-file and exited on its own.
    expect(run.doneFileWritten).toBe(true);
    expect(run.sidecarExit).toEqual({ code: 0, signal: null });

    const want = snapshotTree(source, isTopLostFound);
    const got = snapshotTree(destination, isTopLostFound);
    expect(comparable(got)).toEqual(comparable(want));
    // Spelled out, the parts most likely to regress:
    expect(got.get("abs-link")?.target).toBe("/etc/hostname");
    expect(got.get("rel-link")?.target).toBe("sub/a.txt");
    expect(got.get("hard.txt")?.links).toEqual(["hard.txt", "sub/a.txt"]);
    expect(got.get("secret.txt")).toMatchObject({ uid: 1234, gid: 5678, mode: 0o600 });
    expect(got.get("empty")).toMatchObject({ type: "dir", mode: 0o750 });
    expect(got.get("fifo")?.type).toBe("fifo");
    expect(got.get("deep/lost+found/keep.txt")?.type).toBe("file");
    expect(got.get("big.bin")?.mtime).toBe(OLD.getTime() / 1000);
    expect(got.has("stale.txt")).toBe(false);
    // The top-level lost+found is neither sent nor deleted.
    expect(existsSync(join(destination, "lost+found/fs-internal.txt"))).toBe(false);
    expect(readFileSync(join(destination, "lost+found/dest-internal.txt"), "utf8")).toBe("fs\n");
    // Without --sparse the hole is written out as zeros (the sparse test below shows the option).
    expect(statSync(join(destination, "holes.img")).blocks * 512).toBeGreaterThanOrEqual(8 * MiB);

    // The progress parser on this run's real output.
    const regularFiles = [...want].filter(([, e]) => e.type === "file");
    // Hard-linked content counts once.
    const distinctBytes = regularFiles.filter(([path, e]) => !e.links || e.links[0] === path).reduce((sum, [, e]) => sum + (e.size ?? 0), 0);
    expect(run.progress.finished).toBe(true);
    expect(run.progress.percent).toBe(100);
    expect(run.progress.rate).toMatch(/^[\d.]+[kMG]B\/s$/);
    // Hard-linked files travel once: one of the pair is "transferred".
    expect(run.progress.filesTransferred).toBe(regularFiles.length - 1);
    expect(run.progress.totalFiles).toBe(want.size + 1);
    expect(run.progress.deletedFiles).toBe(1);
    // --human-readable prints 4 significant digits: compare within 0.5%.
    expect(run.progress.literalBytes).toBeGreaterThan(distinctBytes * 0.995);
    expect(run.progress.literalBytes).toBeLessThan(distinctBytes * 1.005);
    expect(run.progress.bytesTransferred).toBeGreaterThan(distinctBytes * 0.995);
    expect(run.progress.matchedBytes).toBe(0);
  });

  it("a second run sends only what changed and propagates deletions", async () => {
    write(join(source, "sub/deeper/b.txt"), "changed content, longer than before\n");
    unlinkSync(join(source, "name with spaces ü.txt"));
    const run = await runClient(source, PVC.data);
    expect(run.rsyncExit, run.output).toEqual({ code: 0, signal: null });
    expect(run.progress).toMatchObject({ finished: true, percent: 100, filesTransferred: 1, deletedFiles: 1, matchedBytes: 0 });
    expect(run.progress.literalBytes).toBe("changed content, longer than before\n".length);
    expect(comparable(snapshotTree(destination, isTopLostFound))).toEqual(comparable(snapshotTree(source, isTopLostFound)));
    // (Non-ASCII bytes in names are escaped in the log when the container has no UTF-8 locale.)
    expect(run.output).toMatch(/^deleting name with spaces /m);
  });

  it("recreates holes with the sparse option", async () => {
    const dir = join(root, "source-sparse");
    mkdirSync(dir);
    sparseFile(join(dir, "disk.img"), 64 * MiB, [0, 32 * MiB, 64 * MiB - 64 * 1024]);
    const run = await runClient(dir, PVC.sparse, { rsync: { sparse: true } });
    expect(run.rsyncExit, run.output).toEqual({ code: 0, signal: null });
    const copy = join(server.volumePath(PVC.sparse), "disk.img");
    expect(statSync(copy).size).toBe(64 * MiB);
    expect(statSync(copy).blocks * 512).toBeLessThan(4 * MiB);
    expect(snapshotTree(server.volumePath(PVC.sparse)).get("disk.img")?.sha256).toBe(snapshotTree(dir).get("disk.img")?.sha256);
  });

  it("a transfer killed halfway resumes from the partial file", async () => {
    const dir = join(root, "source-resume");
    write(join(dir, "large.bin"), randomBytes(24 * MiB));
    const full = snapshotTree(dir).get("large.bin");
    // Slow enough (4 MiB/s) to be caught in the middle; the pod is deleted at >= 25%.
    const killed = await runClient(dir, PVC.resume, {
      rsync: { bwlimitKiB: 4096 },
      deleteWhen: (output) => (parseRsyncProgress(output).percent ?? 0) >= 25,
    });
    // rsync's own code for "killed by a signal" (20), passed through by the client script.
    expect(killed.rsyncExit.code, killed.output).toBe(20);
    expect(killed.doneFileWritten).toBe(true);
    const partial = statSync(join(server.volumePath(PVC.resume), "large.bin"));
    expect(partial.size).toBeGreaterThan(0);
    expect(partial.size).toBeLessThan(24 * MiB);

    const resumed = await runClient(dir, PVC.resume);
    expect(resumed.rsyncExit, resumed.output).toEqual({ code: 0, signal: null });
    expect(snapshotTree(server.volumePath(PVC.resume)).get("large.bin")?.sha256).toBe(full?.sha256);
    // The kept part was matched, not sent again.
    expect(resumed.progress.matchedBytes).toBeGreaterThan(partial.size * 0.9);
    expect(resumed.progress.literalBytes).toBeLessThan(24 * MiB - partial.size * 0.9);
    expect(resumed.progress.percent).toBe(100);
  });

  it("honours the bandwidth limit (rsync's own figures)", async () => {
    const dir = join(root, "source-bwlimit");
    write(join(dir, "payload.bin"), randomBytes(2 * MiB));
    const limitKiB = 512;
    const unlimited = await runClient(dir, PVC.bwlimit);
    expect(unlimited.rsyncExit, unlimited.output).toEqual({ code: 0, signal: null });
    rmSync(join(server.volumePath(PVC.bwlimit), "payload.bin"));
    const limited = await runClient(dir, PVC.bwlimit, { rsync: { bwlimitKiB: limitKiB } });
    expect(limited.rsyncExit, limited.output).toEqual({ code: 0, signal: null });
    const limit = limitKiB * 1024;
    expect(limited.progress.averageBytesPerSecond).toBeLessThanOrEqual(limit * 1.5);
    expect(limited.progress.rateBytesPerSecond).toBeLessThanOrEqual(limit * 1.5);
    expect(unlimited.progress.averageBytesPerSecond).toBeGreaterThan(limit * 2);
    expect(limited.progress.elapsedSeconds).toBeGreaterThanOrEqual(3);
  });
});

describe("what the tunnel and the daemon refuse", () => {
  let source: string;
  let tenantB: LocalServerPod;
  beforeAll(async () => {
    source = join(root, "source-refused");
    write(join(source, "file.txt"), "must not arrive\n");
    // The same migration's server pod in tenant B's namespace: same PKI, same migration secret.
    tenantB = await startLocalServerPod(processes, {
      root: join(root, "server-tenant-b"),
      namespace: TENANT_B.namespace,
      pvcs: [TENANT_B],
      runAsRoot: true,
      rsyncSecret: password,
      pki,
    });
  });
  const nothingArrived = () => expect(readdirSync(server.volumePath(PVC.refused))).toEqual([]);

  it("a wrong password", async () => {
    const run = await runClient(source, PVC.refused, { tamper: (data) => ({ ...data, [SECRET_KEY.rsyncPassword]: generateRsyncPassword() }) });
    expect(run.rsyncExit.code).toBe(5);
    expect(run.progress).toMatchObject({ daemonError: expect.stringMatching(/^auth failed on module pvc-/), errorCode: 5 });
    expect(server.rsync.output()).toMatch(/auth failed on module pvc-\w+ from \S+ \(127\.0\.0\.1\) for pvc-\w+: password mismatch/);
    expect(run.sidecarExit.code).toBe(0);
    nothingArrived();
  });

  it("another module's credential: tenant A's client Secret cannot write into tenant B's module", async () => {
    const tenantA = moduleCredential(password, moduleNameFor(PVC.data));
    // Tenant A's own client Secret (its module's credential and the migration's client certificate), dialling B's endpoint.
    const run = await runClient(source, TENANT_B, { credential: tenantA, server: tenantB });
    expect(run.rsyncExit.code).toBe(5);
    expect(run.progress).toMatchObject({ daemonError: expect.stringMatching(/^auth failed on module pvc-/), errorCode: 5 });
    expect(tenantB.rsync.output()).toMatch(
      new RegExp(`auth failed on module ${moduleNameFor(TENANT_B)} from \\S+ \\(127\\.0\\.0\\.1\\) for ${tenantA.user}: (unauthorized user|no matching rule)`),
    );
    // On one server pod too (two source namespaces, one destination namespace): a module admits its own user only.
    const sameServer = await runClient(source, PVC.refused, { credential: tenantA });
    expect(sameServer.rsyncExit.code).toBe(5);
    expect(server.rsync.output()).toMatch(
      new RegExp(`auth failed on module ${moduleNameFor(PVC.refused)} from .* for ${tenantA.user}: (unauthorized user|no matching rule)`),
    );
    nothingArrived();
    // The same user with B's password (A guessing it) is refused as well: the user, not only the password, must match.
    const guessed = await runClient(source, TENANT_B, {
      server: tenantB,
      credential: { user: tenantA.user, password: moduleCredential(password, moduleNameFor(TENANT_B)).password },
    });
    expect(guessed.rsyncExit.code).toBe(5);
    expect(readdirSync(tenantB.volumePath(TENANT_B))).toEqual([]);
    // B's own credential is admitted (the refusals above are the credential's, not the set-up's).
    const own = await runClient(source, TENANT_B, { server: tenantB });
    expect(own.rsyncExit, own.output).toEqual({ code: 0, signal: null });
    expect(readdirSync(tenantB.volumePath(TENANT_B))).toEqual(["file.txt"]);
  });

  it("a download, even with the module's own credential: the modules are write only", async () => {
    write(join(tenantB.volumePath(TENANT_B), "tenant-b-only.txt"), "tenant B's data\n");
    const credential = moduleCredential(password, moduleNameFor(TENANT_B));
    // A client stunnel as the client pod's sidecar runs it, with B's own client Secret.
    const configDir = join(root, "pull", "config");
    mkdirSync(configDir, { recursive: true });
    const localPort = await findFreePort();
    const data = clientTransferSecretData({
      password: credential.password,
      pki,
      endpointHost: "127.0.0.1",
      endpointPort: tenantB.stunnelPort,
      checkHost: SERVER_NAME,
      localPort,
      paths: transferPaths({ configDir }),
    });
    for (const [key, value] of Object.entries(data)) writeFileSync(join(configDir, key), value, { mode: 0o600 });
    const stunnel = processes.start("pull stunnel", ["stunnel", join(configDir, SECRET_KEY.stunnelConf)]);
    await waitForPort(localPort, "127.0.0.1", 10_000, stunnel);
    const into = join(root, "pull", "into");
    mkdirSync(into, { recursive: true });
    const url = `rsync://${credential.user}@127.0.0.1:${localPort}/${moduleNameFor(TENANT_B)}/`;
    const env = { ...process.env, RSYNC_PASSWORD: credential.password };
    for (const args of [["-r", url, `${into}/`], [url]]) {
      const pulled = spawnSync("rsync", ["--contimeout=5", "--timeout=10", ...args], { env, encoding: "utf8", timeout: 30_000 });
      expect(pulled.status, pulled.stderr).not.toBe(0);
      expect(pulled.stderr).toMatch(/module is write only/);
      expect(pulled.stdout).not.toContain("tenant-b-only.txt");
      expect(pulled.stdout).not.toContain("file.txt");
    }
    expect(readdirSync(into)).toEqual([]);
    stunnel.signal("SIGTERM");
    await stunnel.exited;
  });

  it("a client certificate from another CA (the server verifies its peer)", async () => {
    const other = await generateTransferPki({ commonName: "intruder", serverDnsNames: [SERVER_NAME] });
    const before = server.stunnel.output().length;
    const run = await runClient(source, PVC.refused, {
      tamper: (data) => ({ ...data, [SECRET_KEY.cert]: other.clientCertPem, [SECRET_KEY.key]: other.clientKeyPem }),
    });
    expect(run.rsyncExit.code).not.toBe(0);
    expect(server.stunnel.output().slice(before)).toMatch(/Rejected by CERT at depth=0: CN=intruder rsync client|certificate verify failed/);
    nothingArrived();
  });

  it("the server's own certificate used as a client certificate (extended key usage is enforced)", async () => {
    const before = server.stunnel.output().length;
    const run = await runClient(source, PVC.refused, {
      tamper: (data) => ({ ...data, [SECRET_KEY.cert]: pki.serverCertPem, [SECRET_KEY.key]: pki.serverKeyPem }),
    });
    expect(run.rsyncExit.code).not.toBe(0);
    expect(server.stunnel.output().slice(before)).toMatch(/unsuitable certificate purpose|certificate verify failed/);
    nothingArrived();
  });

  it("a server that does not carry the expected name (the client verifies its peer)", async () => {
    const run = await runClient(source, PVC.refused, { checkHost: "elsewhere.dvm.local" });
    expect(run.rsyncExit.code).not.toBe(0);
    expect(run.sidecarOutput).toMatch(/No matching host name found|Rejected by CERT at depth=0: CN=dvm-it rsync server/);
    nothingArrived();
  });

  it("plain rsync to the TLS port", () => {
    const result = spawnSync("rsync", ["--contimeout=5", "--timeout=5", "-r", `${source}/`, `rsync://${USER}@127.0.0.1:${server.stunnelPort}/x/`], {
      env: { ...process.env, RSYNC_PASSWORD: password },
      encoding: "utf8",
      timeout: 20_000,
    });
    expect(result.status).not.toBe(0);
    nothingArrived();
  });

  it("anything but TLS 1.3, while TLS 1.3 with the client certificate is what is negotiated", () => {
    const dir = join(root, "openssl");
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, "ca.crt"), pki.caCertPem);
    writeFileSync(join(dir, "client.crt"), pki.clientCertPem);
    writeFileSync(join(dir, "client.key"), pki.clientKeyPem, { mode: 0o600 });
    const sClient = (...args: string[]) =>
      spawnSync(
        "openssl",
        [
          "s_client",
          "-connect",
          `127.0.0.1:${server.stunnelPort}`,
          "-servername",
          SERVER_NAME,
          "-verify_hostname",
          SERVER_NAME,
          "-CAfile",
          join(dir, "ca.crt"),
          "-verify_return_error",
          "-brief",
          ...args,
        ],
        { input: "", encoding: "utf8", timeout: 20_000 },
      );
    const tls13 = sClient("-tls1_3", "-cert", join(dir, "client.crt"), "-key", join(dir, "client.key"));
    expect(tls13.stderr).toContain("Protocol version: TLSv1.3");
    expect(tls13.stderr).toContain("Verification: OK");
    const tls12 = sClient("-tls1_2", "-cert", join(dir, "client.crt"), "-key", join(dir, "client.key"));
    expect(tls12.status).not.toBe(0);
    expect(tls12.stderr).not.toContain("Protocol version: TLSv1.2");
    // Every transfer so far ran over TLS 1.3, per the server's own log.
    const log = server.stunnel.output();
    expect(log).toMatch(/TLSv1\.3 ciphersuite: TLS_\w+/);
    expect(log).not.toMatch(/TLSv1\.2 ciphersuite/);
  });

  it("the stunnel logs carry no key material and the password appears nowhere", () => {
    for (const log of [server.stunnel.output(), server.rsync.output()]) {
      expect(log).not.toContain("PRIVATE KEY");
      expect(log).not.toContain(password);
    }
  });
});

describe("non-root server and client (no uid/gid switch, no chroot), over IPv6 loopback", () => {
  const UID = 1000;
  let nonRoot: LocalServerPod;
  let endpointHost = "::1";
  const volume = pvc("nonroot");

  beforeAll(async () => {
    // Also proves the generated IPv6 forms (stunnel wants ":::6443", not "[::]:6443").
    if (!(await hasIpv6Loopback())) {
      console.warn("datapath: no IPv6 loopback on this host; the non-root pod uses IPv4 instead");
      endpointHost = "127.0.0.1";
    }
    nonRoot = await startLocalServerPod(processes, {
      root: join(root, "server-nonroot"),
      namespace: NAMESPACE,
      pvcs: [volume],
      runAsRoot: false,
      rsyncSecret: password,
      pki,
      uid: UID,
      gid: UID,
      stunnelAcceptHost: endpointHost === "::1" ? "::" : "127.0.0.1",
    });
  });

  it("moves data, modes and times; files belong to the daemon's user; symlinks stay inside the volume", async () => {
    const dir = join(root, "source-nonroot");
    write(join(dir, "a.txt"), "a\n", 0o640);
    write(join(dir, "tool.sh"), "#!/bin/sh\n", 0o755);
    write(join(dir, "d/b.bin"), randomBytes(300 * 1024), 0o644);
    symlinkSync("d/b.bin", join(dir, "rel-link"));
    symlinkSync("/etc/hostname", join(dir, "abs-link"));
    chmodSync(join(dir, "a.txt"), 0o644);
    ageTree(dir);
    const run = await runLocalClientPod(processes, {
      root: join(root, "clients-nonroot"),
      server: nonRoot,
      namespace: NAMESPACE,
      sourceDir: dir,
      sourcePvc: pvc("source"),
      destinationPvc: volume,
      runAsRoot: false,
      rsyncSecret: password,
      pki,
      uid: UID,
      gid: UID,
      endpointHost,
    });
    expect(run.rsyncExit, run.output).toEqual({ code: 0, signal: null });
    expect(run.progress).toMatchObject({ finished: true, percent: 100, filesTransferred: 3 });
    expect(nonRoot.stunnel.output()).toMatch(endpointHost === "::1" ? /accepted connection from ::1/ : /accepted connection from 127\.0\.0\.1/);
    const got = snapshotTree(nonRoot.volumePath(volume));
    const want = snapshotTree(dir);
    for (const [path, entry] of want) {
      const copy = got.get(path);
      expect(copy, path).toBeDefined();
      expect({ ...copy, uid: 0, gid: 0, blocks: 0, target: undefined }, path).toEqual({ ...entry, uid: 0, gid: 0, blocks: 0, target: undefined });
      expect(copy?.uid, path).toBe(UID);
    }
    expect(got.get("rel-link")?.target).toBe("d/b.bin");
    // rsync sanitizes symlinks arriving in a module it cannot chroot into: the leading "/" goes, so the
    // link cannot point outside the volume. Only a root server (chroot) keeps absolute links.
    expect(got.get("abs-link")?.target).toBe("etc/hostname");
    // The secrets file was read from the daemon's private copy, not the shared Secret volume.
    expect(lstatSync(join(nonRoot.paths.scratchDir, "rsyncd.secrets")).uid).toBe(UID);
    expect(lstatSync(join(nonRoot.paths.scratchDir, "rsyncd.secrets")).mode & 0o777).toBe(0o400);
  });
});
