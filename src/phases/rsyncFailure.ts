/**
 * What the status says when a volume's rsync ends in failure: the client's error, why it is not retried
 * (src/transfer/rsyncExit.ts), the rsync daemon's own reason from the server pod's log, and, for a
 * permission problem of an unprivileged transfer, the spec fields that change who the pods run as.
 */
import { LABEL } from "../contracts/labels";
import { KINDS, type PodObject } from "../kube/objects";
import { daemonErrorLines, moduleNameFor, type RsyncRetry } from "../transfer";
import { SERVER_ROLE } from "./endpoint";
import type { PhaseContext } from "./types";
import type { VolumePair } from "./volumes";

/** Enough of the daemon's log to hold the lines of the last few connections. */
const DAEMON_LOG_TAIL_LINES = 400;
/** As many of a finished client's lines as the status's figures read (rsyncOperations.ts). */
const CLIENT_LOG_TAIL_LINES = 10_000;
const PERMISSION_PROBLEM = /Permission denied \(13\)|Operation not permitted \(1\)|chdir failed/;

/** The daemon's error lines about `pair`'s module, from this DVM's server pods in its namespace. */
export async function daemonReason(ctx: Pick<PhaseContext, "clusters" | "dvm" | "log">, pair: VolumePair): Promise<string[]> {
  const { destination } = ctx.clusters;
  const module = moduleNameFor(pair.to);
  const servers = await destination.list<PodObject>(KINDS.Pod, pair.to.namespace, { [LABEL.dvmUid]: ctx.dvm.uid, [LABEL.role]: SERVER_ROLE });
  for (const server of servers) {
    const log = await destination.podLogs(pair.to.namespace, server.metadata.name, "rsync", DAEMON_LOG_TAIL_LINES).catch((error: unknown) => {
      // The reason is a courtesy: an unreadable log must not hide the client's error.
      ctx.log.debug("could not read the rsync daemon's log", { pod: server.metadata.name, error: String(error) });
      return "";
    });
    const lines = daemonErrorLines(log, module);
    if (lines.length > 0) return lines;
  }
  return [];
}

/** Source files the client could not read, as rsync names them (its sender's open and opendir errors). */
const UNREADABLE = /(?:send_files failed to open|opendir) "([^"]+)"(?: failed)?: Permission denied \(13\)/;
const SOURCE_MOUNT = "/mnt/source/";
const NAMED_UNREADABLE_FILES = 3;
const NAME_CHARS = 120;

/** "N source files ... may not read: "a", "b", "c" and M more", from the client's log; undefined for none. */
export function unreadableFiles(clientLog: string): string | undefined {
  const names = clientLog
    .split("\n")
    .map((line) => UNREADABLE.exec(line)?.[1])
    .filter((name): name is string => name !== undefined)
    .map((name) => (name.startsWith(SOURCE_MOUNT) ? name.slice(SOURCE_MOUNT.length) : name))
    .map((name) => (name.length > NAME_CHARS ? `${name.slice(0, NAME_CHARS - 1)}…` : name));
  if (names.length === 0) return undefined;
  // As rsync printed them (its own escapes, e.g. \#303 for a byte of a non-ASCII name), in quotes.
  const shown = names.slice(0, NAMED_UNREADABLE_FILES).map((n) => `"${n}"`);
  const more = names.length > shown.length ? ` and ${names.length - shown.length} more` : "";
  return `${names.length} source file${names.length === 1 ? "" : "s"} the transfer pods' user may not read: ${shown.join(", ")}${more}`;
}

/**
 * The error a failed volume ends with: `error` (or, when the client could not read source files, how
 * many and which), why it stopped there, the fields to set for a permission problem of an unprivileged
 * transfer, and the daemon's reason; in that order, as the status keeps only the first KiB.
 */
export async function finalRsyncError(
  ctx: Pick<PhaseContext, "clusters" | "dvm" | "log" | "spec">,
  pair: VolumePair,
  error: string,
  retry: RsyncRetry,
  client?: PodObject,
): Promise<string> {
  const daemon = await daemonReason(ctx, pair);
  const unreadable = client && PERMISSION_PROBLEM.test(error) ? unreadableFiles(await clientLog(ctx, client)) : undefined;
  const parts = [unreadable ? `${/^exit code \d+/.exec(error)?.[0] ?? "rsync failed"}: ${unreadable}` : error];
  if (!retry.retry) parts.push(`not retried: ${retry.why}`);
  if (ctx.spec.runAsRoot !== true && PERMISSION_PROBLEM.test([error, ...daemon].join("\n"))) {
    const who = ctx.spec.transferIdentity?.runAsUser !== undefined ? `user ${ctx.spec.transferIdentity.runAsUser}` : "the transfer image's user";
    parts.push(
      `the transfer pods run unprivileged as ${who}: set spec.transferIdentity to the files' owner (runAsUser, runAsGroup; fsGroup lets the kubelet make a new volume writable for it, except on hostPath volumes), or, in an admin namespace, spec.runAsRoot`,
    );
  }
  if (daemon.length > 0) parts.push(`the rsync daemon said: ${daemon.join(" | ")}`);
  return parts.join("; ");
}

/** The finished client's log, or "" when it cannot be read (the list is a courtesy, as the daemon's reason). */
async function clientLog(ctx: Pick<PhaseContext, "clusters" | "log">, pod: PodObject): Promise<string> {
  return ctx.clusters.source.podLogs(pod.metadata.namespace ?? "", pod.metadata.name, "rsync", CLIENT_LOG_TAIL_LINES).catch((error: unknown) => {
    ctx.log.debug("could not read the rsync client's log", { pod: pod.metadata.name, error: String(error) });
    return "";
  });
}
