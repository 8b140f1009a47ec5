/**
 * The rsync daemon configuration of the destination's server pod. Traffic reaches the daemon only
 * through the stunnel server in the same pod, so the daemon binds and admits loopback only; each
 * destination PVC is one module, writable (never readable: `write only`) by its own authenticated user.
 */
import { createHash } from "node:crypto";
import { absolutePath, configValue, hostName, renderSettings, TransferConfigError, tcpPort } from "./configText";

export const RSYNC_DAEMON_DEFAULT_PORT = 8873;

export interface RsyncModule {
  /** Module name as the client addresses it (`rsync://user@host/<name>/`); see `moduleNameFor`. */
  name: string;
  /** Where the destination PVC is mounted in the server pod. */
  path: string;
  /** Free text shown nowhere (listing is off); handy when reading the file, e.g. "ns/pvc". */
  comment?: string;
  /** The one rsync user (not a Unix user) admitted into this module; see `moduleCredential`. */
  authUser: string;
  /**
   * The module holds a Block volume's device node: the daemon admits --write-devices here (refused by
   * default), so the client's device content is written into the device. --copy-devices stays refused:
   * nobody may read a device out of the daemon.
   */
  blockDevice?: boolean;
}

export interface RsyncdOptions {
  /** Loopback port stunnel connects to. Default 8873. */
  port?: number;
  /** Bind address. Default 127.0.0.1: nothing outside the pod can reach the plain-text daemon. */
  address?: string;
  /** Client addresses admitted. Default 127.0.0.1 and ::1 (stunnel in the same pod). */
  hostsAllow?: string[];
  modules: RsyncModule[];
  /** Path of the modules' `user:password` file; see `rsyncSecretsFile`. Must not be readable by "other". */
  secretsFile: string;
  /**
   * True when the daemon runs as UID 0 (with CHOWN/FOWNER/DAC_OVERRIDE/SETGID/SETUID): file transfers
   * then run as uid/gid 0 so ownership can be preserved. False: no uid/gid lines, since a non-root
   * daemon cannot switch users, and the transfer runs as the pod's user.
   */
  runAsRoot: boolean;
  /**
   * chroot into each module before transferring. Needs root and CAP_SYS_CHROOT. Only a chrooted module
   * keeps symlink values verbatim: without chroot rsync sanitizes incoming symlinks (drops a leading
   * "/" and leading ".." components) so they cannot point outside the module. Default false.
   */
  useChroot?: boolean;
  /** Default false: the destination is written to. */
  readOnly?: boolean;
  /** Default "/dev/stdout", the container log. */
  logFile?: string;
  /** Default: no pid file (the daemon runs in the foreground as the container's process). */
  pidFile?: string;
  /**
   * Minimum challenge digest ("sha512", "sha256", ...). Needs rsync >= 3.5 on the daemon, so it is
   * off by default; TLS with mutual verification already protects the exchange.
   */
  authDigest?: "sha512" | "sha256" | "sha1" | "md5";
  /** Drop a client idle for this many seconds. Default: never (rsync's default). */
  timeoutSeconds?: number;
}

/**
 * A deterministic module name for a destination PVC: short, free of characters rsync treats specially,
 * and not revealing the PVC name to anyone who can reach the endpoint.
 */
export function moduleNameFor(pvc: { namespace: string; name: string }): string {
  return `pvc-${createHash("sha256").update(`${pvc.namespace}/${pvc.name}`).digest("hex").slice(0, 16)}`;
}

export function rsyncdConfig(options: RsyncdOptions): string {
  if (options.modules.length === 0) throw new TransferConfigError("modules", "at least one module is needed");
  const useChroot = options.useChroot ?? false;
  if (useChroot && !options.runAsRoot) throw new TransferConfigError("useChroot", "chroot needs a daemon running as root");
  const hostsAllow = options.hostsAllow ?? ["127.0.0.1", "::1"];
  for (const [i, host] of hostsAllow.entries()) hostName(`hostsAllow[${i}]`, host);
  if (hostsAllow.length === 0) throw new TransferConfigError("hostsAllow", "must not be empty");
  if (options.timeoutSeconds !== undefined && !(Number.isInteger(options.timeoutSeconds) && options.timeoutSeconds > 0)) {
    throw new TransferConfigError("timeoutSeconds", "must be a positive integer");
  }

  const names = new Set<string>();
  const modules = options.modules.map((module, i) => {
    if (!/^[A-Za-z0-9._-]+$/.test(module.name))
      throw new TransferConfigError(`modules[${i}].name`, `"${module.name}" must be letters, digits, '.', '_' or '-'`);
    if (names.has(module.name)) throw new TransferConfigError(`modules[${i}].name`, `"${module.name}" is used twice`);
    names.add(module.name);
    // "/./" in a module path means "chroot here, serve below": never what a PVC mount means.
    if (module.path.includes("/./")) throw new TransferConfigError(`modules[${i}].path`, "must not contain /./");
    if (!/^[A-Za-z0-9._-]+$/.test(module.authUser)) throw new TransferConfigError(`modules[${i}].authUser`, "must be letters, digits, '.', '_' or '-'");
    return [
      `[${module.name}]`,
      ...renderSettings([
        ["path", literal(`modules[${i}].path`, absolutePath(`modules[${i}].path`, module.path))],
        ["comment", module.comment === undefined ? undefined : literal(`modules[${i}].comment`, configValue(`modules[${i}].comment`, module.comment))],
        // This module's own user: a credential of another module (another volume, another tenant) is refused here.
        ["auth users", module.authUser],
        ["refuse options", module.blockDevice ? "copy-devices !write-devices" : undefined],
      ]),
      "",
    ];
  });

  return [
    "# Generated by the DVM controller (src/transfer/rsyncd.ts). Edits are overwritten.",
    ...renderSettings([
      ["port", tcpPort("port", options.port ?? RSYNC_DAEMON_DEFAULT_PORT)],
      ["address", hostName("address", options.address ?? "127.0.0.1")],
      ["pid file", options.pidFile === undefined ? undefined : literal("pidFile", absolutePath("pidFile", options.pidFile))],
      ["log file", literal("logFile", absolutePath("logFile", options.logFile ?? "/dev/stdout"))],
      // The peer is always stunnel on loopback; a DNS lookup per connection only adds delay.
      ["reverse lookup", "no"],
      // Module parameters below apply to every module.
      ["hosts allow", hostsAllow.join(" ")],
      ["hosts deny", "*"],
      ["secrets file", literal("secretsFile", absolutePath("secretsFile", options.secretsFile))],
      // Only "other" bits are checked (and root ownership when root), so Secret volumes with
      // defaultMode 0440/0400 pass: keep the check rather than turning it off.
      ["strict modes", "yes"],
      ["read only", (options.readOnly ?? false) ? "yes" : "no"],
      // Clients push into the destination; nobody downloads from it (not even with a module's credential).
      ["write only", "yes"],
      ["list", "no"],
      ...(options.runAsRoot
        ? ([
            ["uid", "0"],
            ["gid", "0"],
          ] as const)
        : []),
      ["use chroot", useChroot ? "yes" : "no"],
      // Store symlinks as they are instead of prefixing them with /rsyncd-munged/.
      ["munge symlinks", "no"],
      // Owners travel as numbers: the pods' /etc/passwd says nothing about the application's users.
      ["numeric ids", "yes"],
      ["auth digest", options.authDigest],
      ["timeout", options.timeoutSeconds],
    ]),
    "",
    ...modules.flat(),
  ].join("\n");
}

/**
 * rsync expands %VAR% in string values. Its documented escape (%%) does not protect a %VAR% sequence
 * (rsync 3.5.0 turns "%%HOME%%" into "%/root%"), so a percent sign is refused rather than escaped.
 * Generated paths (/mnt/pvc-<hex>) never contain one.
 */
function literal(field: string, value: string): string {
  if (value.includes("%")) throw new TransferConfigError(field, "must not contain % (rsync expands %VAR% references)");
  return value;
}
