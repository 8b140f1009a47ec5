/**
 * The four data paths bench/datapath.ts compares, each set up between the same two network namespaces
 * (source: the sending side, destination: the receiving side) with all its processes in one cgroup:
 *
 * - plain: an rsync daemon in the destination namespace, rsync pushing to it, no encryption. The
 *   daemon's configuration and the client's arguments are ours (src/transfer), with the daemon bound
 *   to the destination's address instead of loopback.
 * - ours: the generated transfer pods' processes (test/support/datapath.ts runs their container
 *   commands with the generated Secret payload): rsync daemon + stunnel server, stunnel client, and
 *   rsync with the generated arguments. Mutually verified TLS 1.3.
 * - volsync: VolSync's rsync-tls mover (backube/volsync, mover-rsync-tls/server.sh and client.sh):
 *   stunnel with a pre-shared key (`ciphers = PSK`, no TLS version set) on both ends, the server
 *   stunnel starting `rsync --server --daemon` per connection (`exec`), and its two rsync passes
 *   (`-aAhHSxz` over the top-level entries, then `-rx --delete` for removed files). Its configuration
 *   text is copied here from those scripts; only `foreground = yes` (instead of a pid file) differs,
 *   so the bench can stop it.
 * - pv-migrate: pv-migrate's rsync over OpenSSH (utkuozdemir/pv-migrate, rsync/cmd.go and
 *   docker/sshd): sshd in the source namespace, the rsync job in the destination pulling with
 *   `-av --info=progress2,misc0,flist0 --no-inc-recursive -z -e "ssh -o StrictHostKeyChecking=no
 *   -o UserKnownHostsFile=/dev/null -o ConnectTimeout=5"` (its default `--compress`), as root. Debian's
 *   openssh-server/openssh-client here (pv-migrate's images are Alpine's); `UsePAM no`.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmodSync, mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { findFreePort } from "../infra/dev/local/ports";
import type { TransferPki } from "../src/transfer/certificates";
import { moduleCredential, rsyncSecretsFile } from "../src/transfer/credentials";
import { transferPaths } from "../src/transfer/paths";
import { rsyncClientPod } from "../src/transfer/pods";
import { RSYNC_PASSWORD_ENV, rsyncClientArgs } from "../src/transfer/rsyncClient";
import { moduleNameFor, rsyncdConfig } from "../src/transfer/rsyncd";
import { clientTransferSecretData } from "../src/transfer/secrets";
import { LocalProcesses, startLocalServerPod, writeSecretVolume } from "../test/support/datapath";
import { type Namespace, type NamespacePair, type PathCgroup, placedIn, waitInNamespace } from "./isolation";

export type PathName = "plain" | "ours" | "volsync" | "pv-migrate";

export interface DataPath {
  name: PathName;
  /** What runs, in a few words, with the negotiated cipher once known. */
  describe(): string;
  cgroup: PathCgroup;
  /** Where the data lands; emptied before every transfer. */
  destination: string;
  /** One full transfer of a source folder (default: the data set) into the empty destination. */
  transfer(source?: string): Promise<void>;
  stop(): Promise<void>;
}

export interface PathContext {
  root: string;
  /** The data set: a folder whose content is copied. */
  source: string;
  namespaces: NamespacePair;
  cgroup(name: string): PathCgroup;
  pki: TransferPki;
  /** The migration's rsync secret (ours and plain derive the module credential from it). */
  password: string;
  runAsRoot: boolean;
}

const VOLUME = { namespace: "bench", name: "data" };
const TRANSFER_TIMEOUT_MS = 30 * 60_000;

/** Both ends of one path: processes started in their namespace and the path's cgroup. */
function ends(ctx: PathContext, name: PathName) {
  const cgroup = ctx.cgroup(name);
  const logs = join(ctx.root, "logs", name);
  const { source, destination } = ctx.namespaces;
  return {
    cgroup,
    sender: new LocalProcesses(join(logs, "source"), placedIn(source, cgroup)),
    receiver: new LocalProcesses(join(logs, "destination"), placedIn(destination, cgroup)),
  };
}

/** Runs a command to its end; its output is in the path's log folder. */
async function run(processes: LocalProcesses, name: string, argv: string[], env: Record<string, string> = {}): Promise<void> {
  const proc = processes.start(name, argv, { env });
  const timer = setTimeout(() => proc.signal("SIGKILL"), TRANSFER_TIMEOUT_MS);
  const exit = await proc.exited;
  clearTimeout(timer);
  if (exit.code !== 0) throw new Error(`${name} exited ${exit.code ?? exit.signal}:\n${proc.output().slice(-4000)}`);
}

function emptyFolder(path: string): string {
  mkdirSync(path, { recursive: true });
  for (const name of readdirSync(path)) rmSync(join(path, name), { recursive: true, force: true });
  return path;
}

function secretFile(path: string, text: string): string {
  writeFileSync(path, text, { mode: 0o600 });
  chmodSync(path, 0o600);
  return path;
}

const waitFor = (ns: Namespace) => (port: number, host: string, process: Parameters<typeof waitInNamespace>[3]) => waitInNamespace(ns, port, host, process);

export async function plainPath(ctx: PathContext): Promise<DataPath> {
  const { cgroup, sender, receiver } = ends(ctx, "plain");
  const dir = join(ctx.root, "plain");
  const destination = emptyFolder(join(dir, "volume"));
  const module = moduleNameFor(VOLUME);
  const credential = moduleCredential(ctx.password, module);
  const port = 8873;
  const config = join(dir, "rsyncd.conf");
  writeFileSync(
    config,
    rsyncdConfig({
      port,
      address: ctx.namespaces.destination.address,
      hostsAllow: [ctx.namespaces.source.address],
      modules: [{ name: module, path: destination, authUser: credential.user }],
      secretsFile: secretFile(join(dir, "rsyncd.secrets"), rsyncSecretsFile([credential])),
      runAsRoot: ctx.runAsRoot,
    }),
  );
  const daemon = receiver.start("rsync daemon", ["rsync", "--daemon", "--no-detach", `--config=${config}`]);
  await waitInNamespace(ctx.namespaces.destination, port, ctx.namespaces.destination.address, daemon);
  const args = (sourcePath: string) =>
    rsyncClientArgs({ sourcePath, module, user: credential.user, host: ctx.namespaces.destination.address, port, preserveOwnership: ctx.runAsRoot });
  return {
    name: "plain",
    describe: () => "rsync daemon <- rsync, our arguments, no encryption",
    cgroup,
    destination,
    transfer: (source = ctx.source) => run(sender, "rsync", ["rsync", ...args(source)], { [RSYNC_PASSWORD_ENV]: credential.password }),
    stop: async () => {
      await sender.stopAll();
      await receiver.stopAll();
    },
  };
}

export async function oursPath(ctx: PathContext): Promise<DataPath> {
  const { cgroup, sender, receiver } = ends(ctx, "ours");
  const dir = join(ctx.root, "ours");
  const { source: src, destination: dst } = ctx.namespaces;
  const server = await startLocalServerPod(receiver, {
    root: join(dir, "server"),
    namespace: VOLUME.namespace,
    pvcs: [VOLUME],
    runAsRoot: ctx.runAsRoot,
    rsyncSecret: ctx.password,
    pki: ctx.pki,
    stunnelAcceptHost: dst.address,
    waitForListener: waitFor(dst),
  });
  const credential = moduleCredential(ctx.password, moduleNameFor(VOLUME));
  // The client pod's stunnel sidecar and rsync arguments, from the generated client Secret and pod.
  const paths = transferPaths({ configDir: join(dir, "client/config"), doneDir: join(dir, "client/done"), scratchDir: join(dir, "client/scratch") });
  const localPort = await findFreePort();
  const data = clientTransferSecretData({
    password: credential.password,
    pki: ctx.pki,
    endpointHost: dst.address,
    endpointPort: server.stunnelPort,
    checkHost: "rsync-server.dvm.local",
    localPort,
    paths,
  });
  const pod = rsyncClientPod({
    name: "bench",
    namespace: VOLUME.namespace,
    configSecretName: "bench",
    sourcePvc: VOLUME,
    destinationPvc: VOLUME,
    user: credential.user,
    runAsRoot: ctx.runAsRoot,
    localPort,
    paths,
  });
  writeSecretVolume(pod, data, paths.configDir);
  const stunnel = sender.start("stunnel client", ["stunnel", join(paths.configDir, "stunnel.conf")]);
  await waitInNamespace(src, localPort, "127.0.0.1", stunnel);
  const args = (sourcePath: string) =>
    rsyncClientArgs({ sourcePath, module: moduleNameFor(VOLUME), user: credential.user, port: localPort, preserveOwnership: ctx.runAsRoot });
  return {
    name: "ours",
    describe: () => `stunnel, mutually verified ${negotiated(server.stunnel.output())}; rsync daemon <- rsync`,
    cgroup,
    destination: emptyFolder(server.volumePath(VOLUME)),
    transfer: (source = ctx.source) => run(sender, "rsync", ["rsync", ...args(source)], { [RSYNC_PASSWORD_ENV]: credential.password }),
    stop: async () => {
      await sender.stopAll();
      await receiver.stopAll();
    },
  };
}

/** "TLSv1.3 TLS_AES_256_GCM_SHA384" from stunnel's log of the first connection. */
function negotiated(log: string): string {
  const match = /(TLSv1\.[0-3]) ciphersuite: (\S+)/.exec(log);
  return match ? `${match[1]} ${match[2]}` : "TLS (not yet negotiated)";
}

const VOLSYNC_STUNNEL_GLOBAL = [
  "; Global options",
  "debug = debug",
  // VolSync: "foreground = no" and a pid file; in the foreground here so the bench can stop it.
  "foreground = yes",
  "socket = l:SO_KEEPALIVE=1",
  "socket = l:TCP_KEEPIDLE=180",
  "socket = r:SO_KEEPALIVE=1",
  "socket = r:TCP_KEEPIDLE=180",
  "syslog = no",
  "",
];

export async function volsyncPath(ctx: PathContext): Promise<DataPath> {
  const { cgroup, sender, receiver } = ends(ctx, "volsync");
  const dir = join(ctx.root, "volsync");
  mkdirSync(dir, { recursive: true });
  const { source: src, destination: dst } = ctx.namespaces;
  const destination = emptyFolder(join(dir, "data"));
  const psk = secretFile(join(dir, "psk.txt"), `volsync:${randomBytes(32).toString("hex")}\n`);
  const rsyncdConf = join(dir, "rsyncd.conf");
  // server.sh's rsyncd.conf, privileged mover (uid 0), without the control module.
  writeFileSync(
    rsyncdConf,
    [
      `pid = ${join(dir, "rsyncd.pid")}`,
      "address = 127.0.0.1",
      `log file = ${join(dir, "rsyncd.log")}`,
      "max verbosity = 10",
      "use chroot = false",
      "numeric ids = true",
      "munge symlinks = false",
      "open noatime = true",
      "reverse lookup = false",
      "transfer logging = true",
      "read only = false",
      ...(ctx.runAsRoot ? ["uid = 0", "gid = *"] : []),
      "",
      "[data]",
      "comment = PVC data",
      `path = ${destination}`,
      "",
    ].join("\n"),
  );
  const serverPort = 8000;
  const serverConf = join(dir, "stunnel-server.conf");
  writeFileSync(
    serverConf,
    [
      ...VOLSYNC_STUNNEL_GLOBAL,
      "[rsync]",
      "ciphers = PSK",
      `PSKsecrets = ${psk}`,
      `accept = ${dst.address}:${serverPort}`,
      "client = no",
      "exec = /usr/bin/rsync",
      `execargs = rsync --server --daemon --config=${rsyncdConf} .`,
      "",
    ].join("\n"),
  );
  const localPort = 9000;
  const clientConf = join(dir, "stunnel-client.conf");
  writeFileSync(
    clientConf,
    [
      ...VOLSYNC_STUNNEL_GLOBAL,
      "[rsync]",
      "ciphers = PSK",
      `PSKsecrets = ${psk}`,
      `accept = 127.0.0.1:${localPort}`,
      "client = yes",
      `connect = ${dst.address}:${serverPort}`,
      "",
    ].join("\n"),
  );
  const serverStunnel = receiver.start("stunnel server", ["stunnel", serverConf]);
  await waitInNamespace(dst, serverPort, dst.address, serverStunnel);
  const clientStunnel = sender.start("stunnel client", ["stunnel", clientConf]);
  await waitInNamespace(src, localPort, "127.0.0.1", clientStunnel);
  const target = `rsync://127.0.0.1:${localPort}/data`;
  return {
    name: "volsync",
    describe: () => `stunnel, pre-shared key, ${negotiated(serverStunnel.output())}; rsync --server --daemon per connection <- rsync -z, 2 passes`,
    cgroup,
    destination,
    transfer: async (source = ctx.source) => {
      // client.sh: "${SOURCE}/*" (dotglob), then a delete-only pass at the folder level.
      const entries = readdirSync(source).map((name) => join(source, name));
      await run(sender, "rsync pass 1", ["rsync", "-aAhHSxz", "--exclude=lost+found", "--itemize-changes", "--info=stats2,misc2", ...entries, target]);
      await run(sender, "rsync pass 2", [
        "rsync",
        "-rx",
        "--exclude=lost+found",
        "--ignore-existing",
        "--ignore-non-existing",
        "--delete",
        "--itemize-changes",
        "--info=stats2,misc2",
        `${source}/`,
        target,
      ]);
    },
    stop: async () => {
      await sender.stopAll();
      await receiver.stopAll();
    },
  };
}

export async function pvMigratePath(ctx: PathContext): Promise<DataPath> {
  const { cgroup, sender, receiver } = ends(ctx, "pv-migrate");
  const dir = join(ctx.root, "pv-migrate");
  mkdirSync(dir, { recursive: true });
  const { source: src, destination: dst } = ctx.namespaces;
  const destination = emptyFolder(join(dir, "dest"));
  const keygen = (file: string) => execFileSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", "dvm-bench", "-f", file], { stdio: "ignore" });
  keygen(join(dir, "host_key"));
  keygen(join(dir, "client_key"));
  execFileSync("cp", [join(dir, "client_key.pub"), join(dir, "authorized_keys")]);
  // sshd refuses to start without its privilege separation folder.
  mkdirSync("/run/sshd", { recursive: true, mode: 0o755 });
  const port = 2222;
  const sshdConfig = join(dir, "sshd_config");
  writeFileSync(
    sshdConfig,
    [
      // docker/sshd/sshd_config: Port, no passwords, root login; UsePAM no here (no PAM stack needed).
      `Port ${port}`,
      `ListenAddress ${src.address}`,
      `HostKey ${join(dir, "host_key")}`,
      "PasswordAuthentication no",
      "KbdInteractiveAuthentication no",
      "PermitRootLogin yes",
      "UsePAM no",
      `AuthorizedKeysFile ${join(dir, "authorized_keys")}`,
      "StrictModes no",
      "PidFile none",
      "",
    ].join("\n"),
  );
  const sshd = sender.start("sshd", ["/usr/sbin/sshd", "-D", "-e", "-f", sshdConfig]);
  await waitInNamespace(src, port, src.address, sshd);
  const ssh = `ssh -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o ConnectTimeout=5 -p ${port} -i ${join(dir, "client_key")}`;
  const cipher = sshCipher(dst, ssh.split(" "), `root@${src.address}`);
  return {
    name: "pv-migrate",
    describe: () => `rsync over OpenSSH (${cipher}), rsync -z pulling from sshd's rsync --server --sender`,
    cgroup,
    destination,
    transfer: (source = ctx.source) =>
      run(receiver, "rsync", [
        "rsync",
        "-av",
        "--info=progress2,misc0,flist0",
        "--no-inc-recursive",
        "-e",
        ssh,
        "-z",
        `root@${src.address}:${source}/`,
        `${destination}/`,
      ]),
    stop: async () => {
      await receiver.stopAll();
      await sender.stopAll();
    },
  };
}

/** The cipher OpenSSH negotiates between these two ends (one `ssh -v true`, outside the measurement). */
function sshCipher(ns: Namespace, ssh: string[], target: string): string {
  const probe = spawnSync("nsenter", [`--net=/run/netns/${ns.name}`, "--", ...ssh, "-v", target, "true"], { encoding: "utf8" });
  if (probe.status !== 0) throw new Error(`ssh to the bench's sshd failed (${probe.status}):\n${probe.stderr}`);
  return /kex: client->server cipher: (\S+)/.exec(probe.stderr)?.[1] ?? "cipher not reported";
}
