/**
 * Runs the generated transfer pods as local processes: the containers' own `command`s, with the
 * generated Secret payload written where the pod would mount it (same items, same file mode as the
 * kubelet would use), temporary directories standing in for PVCs and emptyDirs, and the pod's env
 * resolved from the Secret. Nothing is rewritten on the way, so what passes here is what the pods run.
 */

import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  chmodSync,
  chownSync,
  closeSync,
  existsSync,
  fchmodSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  writeFileSync,
} from "node:fs";
import { connect, createServer } from "node:net";
import { join } from "node:path";
import { findFreePort } from "../../infra/dev/local/ports";
import type { PvcRef } from "../../src/contracts/pvcRef";
import type { TransferPki } from "../../src/transfer/certificates";
import { moduleCredential, type RsyncCredential } from "../../src/transfer/credentials";
import { moduleMountPath, type TransferPaths, transferPaths } from "../../src/transfer/paths";
import { type RsyncClientPodOptions, rsyncClientPod, rsyncServerPod, type TransferPod } from "../../src/transfer/pods";
import { parseRsyncProgress, type RsyncProgress } from "../../src/transfer/progress";
import { moduleNameFor } from "../../src/transfer/rsyncd";
import { clientTransferSecretData, serverTransferSecretData } from "../../src/transfer/secrets";

const PROGRAMS: Array<[string, string[]]> = [
  ["rsync", ["--version"]],
  ["stunnel", ["-version"]],
  ["openssl", ["version"]],
  ["bash", ["--version"]],
];

/** Fails (never skips) when a program of the data path is missing. */
export function assertDataPathPrograms(): void {
  const missing = PROGRAMS.filter(([cmd, args]) => spawnSync(cmd, args, { stdio: "ignore" }).error !== undefined).map(([cmd]) => cmd);
  if (missing.length > 0) {
    throw new Error(
      `The data path tests run the real programs, and ${missing.join(", ")} ${missing.length > 1 ? "are" : "is"} not installed. Install them: apt-get update && apt-get install -y rsync stunnel4 openssl bash`,
    );
  }
}

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface LocalProcess {
  readonly name: string;
  readonly pid: number;
  readonly exited: Promise<Exit>;
  output(): string;
  running(): boolean;
  signal(signal: NodeJS.Signals): void;
}

/**
 * Every process a test starts, each in its own process group so stopping it stops its children.
 * Output goes to a log file, as a container runtime's does: a file (unlike Node's socket-pair pipes)
 * can be reopened through /dev/stdout, which the generated rsyncd.conf does. Mode 0666 so that a
 * non-root container can reopen it too.
 */
export class LocalProcesses {
  private readonly all: LocalProcess[] = [];
  private count = 0;

  /**
   * `wrap` turns a command into the one actually started (the data path bench puts each process into a
   * network namespace and a cgroup of its own that way); the process's name and log stay the command's.
   */
  constructor(
    private readonly logDir: string,
    private readonly wrap: (argv: string[]) => string[] = (argv) => argv,
  ) {}

  start(name: string, argv: string[], options: { env?: Record<string, string>; uid?: number; gid?: number } = {}): LocalProcess {
    if (argv.length === 0) throw new Error(`${name}: empty command`);
    const [command, ...args] = this.wrap(argv);
    if (!command) throw new Error(`${name}: empty command`);
    mkdirSync(this.logDir, { recursive: true });
    const logFile = join(this.logDir, `${++this.count}-${name.replace(/[^A-Za-z0-9-]+/g, "-")}.log`);
    const fd = openSync(logFile, "a", 0o666);
    fchmodSync(fd, 0o666);
    let child: ChildProcess;
    try {
      child = spawn(command, args, {
        detached: true,
        stdio: ["ignore", fd, fd],
        env: { PATH: process.env.PATH ?? "/usr/sbin:/usr/bin:/sbin:/bin", ...options.env },
        ...(options.uid !== undefined ? { uid: options.uid } : {}),
        ...(options.gid !== undefined ? { gid: options.gid } : {}),
      });
    } finally {
      closeSync(fd);
    }
    const pid = child.pid;
    if (pid === undefined) throw new Error(`${name}: could not start ${command}`);
    let alive = true;
    const exited = new Promise<Exit>((resolve) => {
      child.once("exit", (code, signal) => {
        alive = false;
        resolve({ code, signal });
      });
    });
    const proc: LocalProcess = {
      name,
      pid,
      exited,
      output: () => readFileSync(logFile, "utf8"),
      running: () => alive,
      signal: (signal) => {
        if (!alive) return;
        try {
          process.kill(-pid, signal);
        } catch {
          // already gone
        }
      },
    };
    this.all.push(proc);
    return proc;
  }

  async stopAll(): Promise<void> {
    const live = this.all.filter((p) => p.running());
    for (const p of live) p.signal("SIGKILL");
    await Promise.all(live.map((p) => Promise.race([p.exited, sleep(5000)])));
  }
}

export async function waitForPort(port: number, host = "127.0.0.1", timeoutMs = 10_000, process?: LocalProcess): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const open = await new Promise<boolean>((resolve) => {
      const socket = connect({ port, host }, () => {
        socket.destroy();
        resolve(true);
      });
      socket.once("error", () => resolve(false));
    });
    if (open) return;
    if (process && !process.running()) throw new Error(`${process.name} exited before listening on ${port}:\n${process.output()}`);
    if (Date.now() > deadline)
      throw new Error(`nothing listens on ${host}:${port} after ${timeoutMs} ms${process ? `; ${process.name} said:\n${process.output()}` : ""}`);
    await sleep(50);
  }
}

/** Whether this host has IPv6 loopback (containers often have IPv6 switched off). */
export function hasIpv6Loopback(): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(false));
    server.listen(0, "::1", () => server.close(() => resolve(true)));
  });
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

function container(pod: TransferPod, name: string) {
  const found = pod.spec.containers.find((c) => c.name === name);
  if (!found?.command) throw new Error(`pod ${pod.metadata.name} has no container ${name} with a command`);
  return found;
}

/** Writes the Secret volume as the kubelet would: the projected items only, with the volume's defaultMode. */
export function writeSecretVolume(pod: TransferPod, data: Record<string, string>, dir: string): void {
  const volume = pod.spec.volumes?.find((v) => v.secret !== undefined);
  if (!volume?.secret) throw new Error(`pod ${pod.metadata.name} mounts no Secret`);
  mkdirSync(dir, { recursive: true });
  const items: Array<{ key: string; path: string; mode?: number }> = volume.secret.items ?? Object.keys(data).map((key) => ({ key, path: key }));
  for (const item of items) {
    const value = data[item.key];
    if (value === undefined) throw new Error(`Secret payload has no key ${item.key}`);
    const file = join(dir, item.path);
    writeFileSync(file, value);
    chmodSync(file, item.mode ?? volume.secret.defaultMode ?? 0o644);
  }
}

/** Creates a directory standing in for an emptyDir (world-writable, like the kubelet's). */
function emptyDir(path: string): string {
  mkdirSync(path, { recursive: true });
  chmodSync(path, 0o777);
  return path;
}

/** The container's env with secretKeyRef values taken from the Secret payload. */
function containerEnv(pod: TransferPod, name: string, data: Record<string, string>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const variable of container(pod, name).env ?? []) {
    const key = variable.valueFrom?.secretKeyRef?.key;
    const value = variable.value ?? (key !== undefined ? data[key] : undefined);
    if (value === undefined) throw new Error(`env ${variable.name} of ${name} does not resolve`);
    env[variable.name] = value;
  }
  return env;
}

export interface LocalServerPod {
  pod: TransferPod;
  secretData: Record<string, string>;
  paths: TransferPaths;
  stunnelPort: number;
  rsyncPort: number;
  rsync: LocalProcess;
  stunnel: LocalProcess;
  /** Where a destination PVC's data lands. */
  volumePath(pvc: PvcRef): string;
}

export interface LocalServerOptions {
  root: string;
  namespace: string;
  pvcs: PvcRef[];
  runAsRoot: boolean;
  /** The migration's rsync secret: each module's credential is derived from it. */
  rsyncSecret: string;
  pki: TransferPki;
  /** Run the containers as this uid/gid (a non-root pod). */
  uid?: number;
  gid?: number;
  /** stunnel's bind address. Default 127.0.0.1: the tests stay on loopback. */
  stunnelAcceptHost?: string;
  /** How to wait for a container's port. Default `waitForPort` (from this process's network namespace). */
  waitForListener?: (port: number, host: string, process: LocalProcess) => Promise<void>;
}

export async function startLocalServerPod(processes: LocalProcesses, options: LocalServerOptions): Promise<LocalServerPod> {
  const paths = transferPaths({
    configDir: join(options.root, "config"),
    scratchDir: emptyDir(join(options.root, "scratch")),
    // Spaces: the generated configs and scripts must carry them through unquoted config values.
    volumeRoot: join(options.root, "persistent volumes"),
  });
  const stunnelPort = await findFreePort();
  const rsyncPort = await findFreePort();
  const secretData = serverTransferSecretData({
    pvcs: options.pvcs,
    rsyncSecret: options.rsyncSecret,
    pki: options.pki,
    runAsRoot: options.runAsRoot,
    stunnelPort,
    rsyncPort,
    stunnelAcceptHost: options.stunnelAcceptHost ?? "127.0.0.1",
    paths,
  });
  const pod = rsyncServerPod({
    name: "rsync-server",
    namespace: options.namespace,
    configSecretName: "rsync-server",
    pvcs: options.pvcs,
    runAsRoot: options.runAsRoot,
    stunnelPort,
    paths,
  });
  writeSecretVolume(pod, secretData, paths.configDir);
  const volumePath = (pvc: PvcRef) => moduleMountPath(paths, moduleNameFor(pvc));
  for (const pvc of options.pvcs) {
    mkdirSync(volumePath(pvc), { recursive: true });
    if (options.uid !== undefined) chownSync(volumePath(pvc), options.uid, options.gid ?? options.uid);
  }
  const identity = { ...(options.uid !== undefined ? { uid: options.uid } : {}), ...(options.gid !== undefined ? { gid: options.gid } : {}) };
  const rsync = processes.start("server rsync", container(pod, "rsync").command ?? [], identity);
  const stunnel = processes.start("server stunnel", container(pod, "stunnel").command ?? [], identity);
  const waitFor = options.waitForListener ?? ((port: number, host: string, process: LocalProcess) => waitForPort(port, host, 10_000, process));
  await waitFor(rsyncPort, "127.0.0.1", rsync);
  const probeHost = options.stunnelAcceptHost === undefined || options.stunnelAcceptHost === "::" ? "127.0.0.1" : options.stunnelAcceptHost;
  await waitFor(stunnelPort, probeHost, stunnel);
  return { pod, secretData, paths, stunnelPort, rsyncPort, rsync, stunnel, volumePath };
}

export interface ClientRun {
  pod: TransferPod;
  /** rsync container (the client script): exit code, and everything it printed. */
  rsyncExit: Exit;
  output: string;
  sidecarExit: Exit;
  sidecarOutput: string;
  progress: RsyncProgress;
  /** Whether the done-file was written (the stunnel sidecar depends on it). */
  doneFileWritten: boolean;
}

let clientRuns = 0;

export interface LocalClientOptions {
  root: string;
  server: LocalServerPod;
  namespace: string;
  sourceDir: string;
  sourcePvc: PvcRef;
  destinationPvc: PvcRef;
  runAsRoot: boolean;
  /** The migration's rsync secret: the client gets the destination module's credential only, as in a cluster. */
  rsyncSecret: string;
  /** Use this credential instead (another module's, a wrong one). */
  credential?: RsyncCredential;
  pki: TransferPki;
  rsync?: RsyncClientPodOptions["rsync"];
  /** The name the client expects on the server certificate. Default: the DNS name the PKI was made for. */
  checkHost?: string;
  /** Where the client's stunnel dials the server. Default 127.0.0.1. */
  endpointHost?: string;
  /** Replace payload keys after generation (a stolen or foreign certificate, a wrong password...). */
  tamper?: (data: Record<string, string>) => Record<string, string>;
  uid?: number;
  gid?: number;
  /** Delete the pod (SIGTERM to both containers) once the rsync output satisfies this. */
  deleteWhen?: (output: string) => boolean;
  timeoutMs?: number;
}

export async function runLocalClientPod(processes: LocalProcesses, options: LocalClientOptions): Promise<ClientRun> {
  const dir = join(options.root, `client-${++clientRuns}`);
  const paths = transferPaths({
    configDir: join(dir, "config"),
    scratchDir: emptyDir(join(dir, "scratch")),
    doneDir: emptyDir(join(dir, "done")),
    sourceMountPath: options.sourceDir,
  });
  const localPort = await findFreePort();
  const credential = options.credential ?? moduleCredential(options.rsyncSecret, moduleNameFor(options.destinationPvc));
  const generated = clientTransferSecretData({
    password: credential.password,
    pki: options.pki,
    endpointHost: options.endpointHost ?? "127.0.0.1",
    endpointPort: options.server.stunnelPort,
    checkHost: options.checkHost ?? "rsync-server.dvm.local",
    localPort,
    paths,
  });
  const secretData = options.tamper ? options.tamper({ ...generated }) : generated;
  const pod = rsyncClientPod({
    name: `rsync-client-${clientRuns}`,
    namespace: options.namespace,
    configSecretName: "rsync-client",
    sourcePvc: options.sourcePvc,
    destinationPvc: options.destinationPvc,
    user: credential.user,
    runAsRoot: options.runAsRoot,
    localPort,
    waitSeconds: 20,
    paths,
    ...(options.rsync ? { rsync: options.rsync } : {}),
  });
  writeSecretVolume(pod, secretData, paths.configDir);
  const identity = { ...(options.uid !== undefined ? { uid: options.uid } : {}), ...(options.gid !== undefined ? { gid: options.gid } : {}) };
  const sidecar = processes.start(`${pod.metadata.name} stunnel`, container(pod, "stunnel").command ?? [], {
    env: containerEnv(pod, "stunnel", secretData),
    ...identity,
  });
  const rsync = processes.start(`${pod.metadata.name} rsync`, container(pod, "rsync").command ?? [], {
    env: containerEnv(pod, "rsync", secretData),
    ...identity,
  });

  const deadline = Date.now() + (options.timeoutMs ?? 90_000);
  let deleted = false;
  while (rsync.running()) {
    if (!deleted && options.deleteWhen?.(rsync.output())) {
      // What the kubelet does on pod deletion: SIGTERM to each container's main process.
      deleted = true;
      process.kill(rsync.pid, "SIGTERM");
      process.kill(sidecar.pid, "SIGTERM");
    }
    if (Date.now() > deadline) {
      rsync.signal("SIGKILL");
      sidecar.signal("SIGKILL");
      throw new Error(`client pod did not finish in time; rsync said:\n${rsync.output()}\nstunnel said:\n${sidecar.output()}`);
    }
    await sleep(20);
  }
  const rsyncExit = await rsync.exited;
  const sidecarExit = await Promise.race([sidecar.exited, sleep(10_000).then(() => ({ code: null, signal: null }) as Exit)]);
  return {
    pod,
    rsyncExit,
    output: rsync.output(),
    sidecarExit,
    sidecarOutput: sidecar.output(),
    progress: parseRsyncProgress(rsync.output()),
    doneFileWritten: existsSync(join(paths.doneDir, "rsync-client-done")),
  };
}

export interface TreeEntry {
  type: "file" | "dir" | "symlink" | "fifo" | "other";
  mode: number;
  uid: number;
  gid: number;
  /** Whole seconds: rsync carries modification times (directories included, with --times). */
  mtime: number;
  size?: number;
  sha256?: string;
  target?: string;
  /** Paths sharing this entry's inode (hard links), including itself. */
  links?: string[];
  /** 512-byte blocks allocated: far below size/512 for a sparse file. */
  blocks?: number;
}

/** Everything rsync is asked to preserve, per relative path; `skip` leaves paths (and below) out. */
export function snapshotTree(root: string, skip: (relative: string) => boolean = () => false): Map<string, TreeEntry> {
  const entries = new Map<string, TreeEntry>();
  const byInode = new Map<number, string[]>();
  const walk = (relative: string) => {
    for (const name of readdirSync(join(root, relative)).sort()) {
      const rel = relative ? `${relative}/${name}` : name;
      if (skip(rel)) continue;
      const path = join(root, rel);
      const st = lstatSync(path);
      const base = { mode: st.mode & 0o7777, uid: st.uid, gid: st.gid, mtime: Math.floor(st.mtimeMs / 1000) };
      if (st.isSymbolicLink()) entries.set(rel, { type: "symlink", ...base, target: readlinkSync(path) });
      else if (st.isDirectory()) {
        entries.set(rel, { type: "dir", ...base });
        walk(rel);
      } else if (st.isFile()) {
        const sha256 = createHash("sha256").update(readFileSync(path)).digest("hex");
        entries.set(rel, { type: "file", ...base, size: st.size, sha256, blocks: st.blocks });
        if (st.nlink > 1) byInode.set(st.ino, [...(byInode.get(st.ino) ?? []), rel]);
      } else entries.set(rel, { type: st.isFIFO() ? "fifo" : "other", ...base });
    }
  };
  walk("");
  for (const group of byInode.values())
    for (const rel of group) {
      const entry = entries.get(rel);
      if (entry) entry.links = [...group].sort();
    }
  return entries;
}
