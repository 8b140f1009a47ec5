/**
 * The rsync client of one source PVC: its argument list (upstream's order, §4.4 of the anchor) and
 * the wrapper script the client pod runs. The password never appears here: rsync reads it from the
 * RSYNC_PASSWORD environment variable, which the pod fills from a Secret.
 */
import { absolutePath, configValue, hostName, hostPort, IN_POD_POLL_SLEEP, shellQuote, TransferConfigError, tcpPort } from "./configText";

/** rsync reads the daemon password from this variable when no --password-file is given. */
export const RSYNC_PASSWORD_ENV = "RSYNC_PASSWORD";

/** What rsync's progress parser needs: whole-transfer progress, final statistics, per-file events. */
export const RSYNC_INFO_FLAGS = "COPY2,DEL2,REMOVE2,SKIP2,FLIST2,PROGRESS2,STATS2";

/** Exit code of the client script when the stunnel sidecar never started listening. */
export const STUNNEL_WAIT_TIMEOUT_EXIT_CODE = 124;

export interface RsyncClientOptions {
  /**
   * The mounted source PVC. A trailing "/" is added: the directory's content is copied, not itself.
   * With `blockDevice`: the device node, copied as one file of the same name.
   */
  sourcePath: string;
  /**
   * A Block volume: rsync reads the device's content (--copy-devices) and writes it into the device of
   * the same name in the module (--write-devices, which implies --inplace, so a later pass sends only
   * the blocks that changed). --ignore-times: a device node's size and time say nothing about its
   * content. --delete, --partial and --hard-links do not apply to one device and are left out.
   */
  blockDevice?: boolean;
  /**
   * --whole-file: send the content without comparing it to what the destination holds. For a Block
   * volume whose destination device is new, where comparing only costs both sides a full read.
   */
  wholeFile?: boolean;
  /** The destination module (see `moduleNameFor`). */
  module: string;
  user: string;
  /** The stunnel client sidecar. Default 127.0.0.1. */
  host?: string;
  port: number;
  /**
   * --owner --group --numeric-ids. Only a receiver running as root can chown, so set this when the
   * server pod runs as root; numeric ids because the pods' /etc/passwd is not the application's.
   */
  preserveOwnership: boolean;
  /** --checksum: compare content, not size and time. Default false. */
  verify?: boolean;
  /** --bwlimit in KiB/s (rsync's unit). Default: no limit. */
  bwlimitKiB?: number;
  /** --delete: files gone from the source are removed at the destination. Default true. */
  delete?: boolean;
  /** --partial: keep partly sent files so a retry resumes them. Default true. */
  partial?: boolean;
  /** --hard-links. Default true. */
  hardLinks?: boolean;
  /** --sparse: recreate holes instead of writing zeros. Default false. */
  sparse?: boolean;
  /** --omit-dir-times, for receivers that may not set directory times. Default false. */
  omitDirTimes?: boolean;
  /** --human-readable (sizes in units of 1000). Default true, as upstream. */
  humanReadable?: boolean;
  /** --log-file=PATH (upstream: /dev/stdout). Default: none; --info output already goes to stdout. */
  logFile?: string;
  /** --timeout: give up after this many seconds without I/O. Default: none. */
  timeoutSeconds?: number;
  /** Further long options (`--name` or `--name=value`), after the generated ones. */
  extras?: string[];
}

// Options that would bypass the tunnel, read secrets or files from elsewhere, act on the daemon's side,
// write outside the module, or delete source data.
const DANGEROUS_OPTIONS = new Set([
  "--rsh",
  "--rsync-path",
  "--password-file",
  "--daemon",
  "--config",
  "--dparam",
  "--remote-option",
  "--remove-source-files",
  "--write-batch",
  "--only-write-batch",
  "--read-batch",
  "--port",
  "--address",
  "--sockopts",
  "--files-from",
  "--exclude-from",
  "--include-from",
  "--filter",
  "--server",
  "--sender",
  "--temp-dir",
  "--partial-dir",
  "--backup-dir",
  "--compare-dest",
  "--copy-dest",
  "--link-dest",
  "--log-file",
  "--log-file-format",
  "--early-input",
  "--copy-devices",
  "--write-devices",
]);

// Options the controller sets itself from the DVM and the operator's policy: an extra must not override
// them (rsync takes the last of two), or a DVM could lift the operator's bandwidth limit, turn off the
// statistics the progress and verification reports read, or change what is copied.
/** What every transfer copies (rsync's -a without the owner, which depends on the transfer identity). */
const COPY_OPTIONS = ["--recursive", "--links", "--perms", "--devices", "--specials", "--times"] as const;

const CONTROLLED_OPTIONS = new Set<string>([
  ...COPY_OPTIONS,
  "--owner",
  "--group",
  "--numeric-ids",
  "--hard-links",
  "--partial",
  "--bwlimit",
  "--human-readable",
  "--info",
  "--debug",
  "--verbose",
  "--quiet",
  "--progress",
  "--stats",
  "--out-format",
  "--itemize-changes",
  "--checksum",
  "--dry-run",
  "--list-only",
  "--archive",
]);

/**
 * Why `--name` may never be an extra option, or undefined when it may (the operator's allow-list then
 * decides). `--no-NAME` and every `--delete…` variant count as the option they switch.
 */
export function reservedRsyncOption(name: string): string | undefined {
  const base = name.startsWith("--no-") ? `--${name.slice("--no-".length)}` : name;
  if (DANGEROUS_OPTIONS.has(base)) return `${name} could bypass the tunnel, reach other files or change the daemon's side`;
  if (CONTROLLED_OPTIONS.has(base) || base.startsWith("--delete") || base === "--del")
    return `${name} is set by the controller from spec.transfer and the operator's policy`;
  return undefined;
}

export function rsyncClientArgs(options: RsyncClientOptions): string[] {
  const source = absolutePath("sourcePath", options.sourcePath);
  if (!/^[A-Za-z0-9._-]+$/.test(options.module)) throw new TransferConfigError("module", `"${options.module}" is not a module name`);
  if (!/^[A-Za-z0-9._-]+$/.test(options.user)) throw new TransferConfigError("user", "must be letters, digits, '.', '_' or '-'");
  const host = hostName("host", options.host ?? "127.0.0.1");
  const port = tcpPort("port", options.port);
  const bwlimit = options.bwlimitKiB;
  if (bwlimit !== undefined && !(Number.isInteger(bwlimit) && bwlimit > 0))
    throw new TransferConfigError("bwlimitKiB", `must be a positive integer, got ${bwlimit}`);
  const timeout = options.timeoutSeconds;
  if (timeout !== undefined && !(Number.isInteger(timeout) && timeout > 0))
    throw new TransferConfigError("timeoutSeconds", `must be a positive integer, got ${timeout}`);
  const extras = (options.extras ?? []).map((extra, i) => checkExtra(i, extra));
  const block = options.blockDevice ?? false;
  if (block && source.endsWith("/")) throw new TransferConfigError("sourcePath", "must name the device node, not a folder, with blockDevice");

  return [
    ...COPY_OPTIONS,
    ...(options.preserveOwnership ? ["--owner", "--group"] : []),
    ...(block ? ["--copy-devices", "--write-devices", "--ignore-times"] : []),
    ...(options.wholeFile ? ["--whole-file"] : []),
    ...((options.hardLinks ?? true) && !block ? ["--hard-links"] : []),
    ...((options.delete ?? true) && !block ? ["--delete"] : []),
    ...((options.partial ?? true) && !block ? ["--partial"] : []),
    ...(bwlimit !== undefined ? [`--bwlimit=${bwlimit}`] : []),
    ...((options.humanReadable ?? true) ? ["--human-readable"] : []),
    ...(options.logFile !== undefined ? [`--log-file=${absolutePath("logFile", options.logFile)}`] : []),
    `--info=${RSYNC_INFO_FLAGS}`,
    // Upstream added these per PVC in the extras position; keep them there.
    ...(options.preserveOwnership ? ["--numeric-ids"] : []),
    ...(options.verify ? ["--checksum"] : []),
    ...(options.sparse ? ["--sparse"] : []),
    ...(options.omitDirTimes ? ["--omit-dir-times"] : []),
    ...(timeout !== undefined ? [`--timeout=${timeout}`] : []),
    ...extras,
    // Anchored: only the file system's own lost+found at the top, not user directories of that name
    // deeper down (upstream's unanchored pattern skipped those silently). Excluded paths are also
    // protected from --delete, so the destination's lost+found stays.
    ...(block ? [] : ["--exclude=/lost+found"]),
    block || source.endsWith("/") ? source : `${source}/`,
    `rsync://${options.user}@${hostPort(host, port)}/${options.module}/`,
  ];
}

function checkExtra(index: number, extra: string): string {
  configValue(`extras[${index}]`, extra);
  const match = /^(--[a-z0-9][a-z0-9-]*)(=.*)?$/.exec(extra);
  if (!match) throw new TransferConfigError(`extras[${index}]`, `"${extra}" must be a long option (--name or --name=value)`);
  const reserved = reservedRsyncOption(match[1] ?? "");
  if (reserved) throw new TransferConfigError(`extras[${index}]`, `${reserved}: not allowed as an extra option`);
  return extra;
}

export interface RsyncClientScriptOptions {
  /** From `rsyncClientArgs`. */
  args: string[];
  /** Default "rsync" (from PATH). */
  rsyncBinary?: string;
  /** The stunnel client sidecar's listener to wait for. Default 127.0.0.1. */
  waitHost?: string;
  waitPort: number;
  /** How long to wait for the sidecar. Default 120 s, as upstream. */
  waitSeconds?: number;
  /** Written when the script ends for any reason, so the stunnel sidecar exits and the pod completes. */
  doneFile: string;
  /**
   * Where rsync's stderr is collected (in the pod's scratch volume) and printed again when it ends: the
   * error lines then close the log, which is what the pod's termination message is cut from. Otherwise
   * thousands of progress updates (one log "line" of \r-separated updates) push the reason out of it.
   */
  errorFile: string;
  /**
   * Where the error lines are also written as the container's termination message. The kubelet reads
   * the log tail at the moment the container exits and can miss the last lines still in flight; the
   * file it reads first has no such race. Default /dev/termination-log (Kubernetes' default path).
   */
  terminationMessageFile?: string;
}

export const RSYNC_CLIENT_DEFAULT_WAIT_SECONDS = 120;

/**
 * The client container's bash script: wait for the local stunnel port, run rsync, write the done-file
 * on every way out, and exit with rsync's own exit code (the progress reader and the retry logic
 * branch on it). SIGTERM is passed on to rsync so a deleted pod stops promptly and keeps its partial
 * file. bash is needed for /dev/tcp: the transfer image has no netcat guarantee.
 */
export function clientScript(options: RsyncClientScriptOptions): string {
  const waitHost = hostName("waitHost", options.waitHost ?? "127.0.0.1");
  const waitPort = tcpPort("waitPort", options.waitPort);
  const waitSeconds = options.waitSeconds ?? RSYNC_CLIENT_DEFAULT_WAIT_SECONDS;
  if (!(Number.isInteger(waitSeconds) && waitSeconds > 0)) throw new TransferConfigError("waitSeconds", "must be a positive integer");
  const doneFile = absolutePath("doneFile", options.doneFile);
  const errorFile = absolutePath("errorFile", options.errorFile);
  const terminationMessageFile = absolutePath("terminationMessageFile", options.terminationMessageFile ?? "/dev/termination-log");
  const binary = configValue("rsyncBinary", options.rsyncBinary ?? "rsync");
  if (options.args.length === 0) throw new TransferConfigError("args", "must not be empty");
  for (const [i, arg] of options.args.entries()) configValue(`args[${i}]`, arg);
  const command = [binary, ...options.args].map(shellQuote).join(" ");

  return [
    "set -u",
    `done_file=${shellQuote(doneFile)}`,
    `error_file=${shellQuote(errorFile)}`,
    "trap 'touch \"$done_file\"' EXIT",
    // Untrapped, a signal would kill bash without running the EXIT trap.
    "trap 'exit 143' TERM",
    "trap 'exit 130' INT",
    `deadline=$((SECONDS + ${waitSeconds}))`,
    `until (exec 3<>/dev/tcp/${waitHost}/${waitPort}) 2>/dev/null; do`,
    '  if [ "$SECONDS" -ge "$deadline" ]; then',
    `    echo "stunnel client did not listen on ${hostPort(waitHost, waitPort)} within ${waitSeconds}s" >&2`,
    `    exit ${STUNNEL_WAIT_TIMEOUT_EXIT_CODE}`,
    "  fi",
    // The sidecar starts with this container and listens within a few hundred ms.
    `  ${IN_POD_POLL_SLEEP}`,
    "done",
    `${command} 2>"$error_file" &`,
    "rsync_pid=$!",
    "trap 'kill -TERM \"$rsync_pid\" 2>/dev/null' TERM INT",
    'wait "$rsync_pid"',
    "rc=$?",
    // A trapped signal interrupts `wait` with 128+n; wait again for rsync's own exit code.
    'if [ "$rc" -gt 128 ]; then wait "$rsync_pid"; rc=$?; fi',
    'cat "$error_file" >&2',
    // The kubelet keeps at most 4 KiB of a termination message: the last of rsync's error lines.
    `if [ "$rc" -ne 0 ]; then tail -c 4096 "$error_file" > ${shellQuote(terminationMessageFile)} 2>/dev/null || true; fi`,
    'exit "$rc"',
    "",
  ].join("\n");
}
