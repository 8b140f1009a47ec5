/**
 * Whether another attempt of a failed rsync client can end differently. The next attempt runs the same
 * arguments against the same daemon configuration, the same files and the same identity: a failure
 * caused by any of those repeats exactly (issue 26: twenty identical attempts, two minutes, before the
 * DVM failed), while a failure of the network, the tunnel, a pod or a node may not. Exit codes are
 * rsync's own (rsync(1), EXIT VALUES); the client script adds its own 124 (stunnel never listened).
 */

export type RsyncRetry = { retry: true } | { retry: false; why: string };

/** rsync's and the client script's exit codes whose cause is in the request itself: same input, same end. */
const DETERMINISTIC: Record<number, string> = {
  // The argument list is built from the spec and the policy; the daemon parses the same list again.
  1: "syntax or usage error: the same options fail the same way",
  // Client and daemon come from the same transfer image on both sides of every attempt.
  2: "protocol incompatibility between the client and the daemon",
  // The module path or a source folder cannot be selected (missing, not a directory, not accessible).
  3: "errors selecting input/output files or directories",
  // An option the daemon refuses (refuse options) or the platform cannot do: refused again next time.
  4: "an action the daemon does not support or refuses",
  // The daemon cannot write its log: its configuration, the same next time.
  6: "the daemon could not append to its log file",
  // --max-delete: the same source and destination exceed it again.
  25: "the --max-delete limit stopped deletions",
};

/**
 * A code-5 refusal the daemon sends (@ERROR: ...) that a retry can get past: the connection limit. Every
 * other @ERROR (auth failed, unknown module, chdir failed, access denied) comes from the daemon's
 * configuration or the module's folder, which the next attempt meets unchanged. A code 5 without any
 * @ERROR line (no greeting: the tunnel closed, the server pod restarted) is the network's and is retried.
 */
const TRANSIENT_DAEMON_REFUSALS = [/max connections/i];

/**
 * Code 23 (partial transfer due to error) is retried unless every error line says a permission was missing
 * (EACCES 13, EPERM 1): the same identity meets the same modes and owners next time. Other causes of 23
 * (an I/O error, a file replaced during the scan) may not repeat.
 */
const PERMISSION_ERROR = /\((?:13|1)\)\s*$/;

/**
 * Retried (no entry above): 10 socket I/O, 11 file I/O (e.g. a full or failing disk, which can be freed),
 * 12 protocol data stream (a connection cut mid-transfer), 13/14 diagnostics and IPC, 20 signal, 21
 * waitpid, 22 memory (another node or a lower load), 30 and 35 timeouts, 124 the stunnel sidecar never
 * listened, 128+n killed by a signal (OOM, eviction, node loss), and any code rsync does not document.
 */
export function rsyncRetry(exitCode: number | undefined, errorText: string): RsyncRetry {
  if (exitCode === undefined) return { retry: true };
  const fixed = DETERMINISTIC[exitCode];
  if (fixed) return { retry: false, why: `rsync exit code ${exitCode} (${fixed})` };
  const lines = errorText
    .split("\n")
    .map((l) => l.split("\r").at(-1)!.trim())
    .filter(Boolean);
  if (exitCode === 5) {
    const refusal = lines.find((l) => l.startsWith("@ERROR"));
    if (refusal && !TRANSIENT_DAEMON_REFUSALS.some((p) => p.test(refusal)))
      return { retry: false, why: `rsync exit code 5: the daemon refused the connection (${refusal})` };
    return { retry: true };
  }
  if (exitCode === 23) {
    const errors = lines.filter((l) => l.startsWith("rsync: "));
    if (errors.length > 0 && errors.every((l) => PERMISSION_ERROR.test(l)))
      return { retry: false, why: "rsync exit code 23 with only permission errors: the same identity meets the same files" };
  }
  return { retry: true };
}

/**
 * rsync's complaint that it could not set the times or the mode of the module's root folder itself ("."):
 * a volume's root belongs to root (or whoever the provisioner is) and only its owner may set them, so an
 * unprivileged daemon meets it on every volume it did not create, local-path's 0777 folders included.
 */
const ROOT_FOLDER_ATTRIBUTES =
  /^rsync: \[generator\] failed to set (?:times|permissions) on "\."(?: \(in [^)]*\))?: (?:Operation not permitted \(1\)|Permission denied \(13\))$/;

/**
 * Code 23 whose only errors are about the root folder's own times or mode: every file and folder inside
 * arrived. `errorText` must hold all of rsync's error lines (the termination message does while they fit
 * in its 4 KiB; `complete` says whether they did).
 */
export function onlyRootFolderAttributesFailed(exitCode: number | undefined, errorText: string, complete: boolean): boolean {
  if (exitCode !== 23 || !complete) return false;
  const errors = errorText
    .split("\n")
    .map((l) => l.split("\r").at(-1)!.trim())
    .filter((l) => l.startsWith("rsync: "));
  return errors.length > 0 && errors.every((l) => ROOT_FOLDER_ATTRIBUTES.test(l));
}
