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

/** The error a failed volume ends with: `error`, why it stopped there, the daemon's reason and a hint. */
export async function finalRsyncError(
  ctx: Pick<PhaseContext, "clusters" | "dvm" | "log" | "spec">,
  pair: VolumePair,
  error: string,
  retry: RsyncRetry,
): Promise<string> {
  const daemon = await daemonReason(ctx, pair);
  const parts = [error];
  if (!retry.retry) parts.push(`not retried: ${retry.why}`);
  if (daemon.length > 0) parts.push(`the rsync daemon said: ${daemon.join(" | ")}`);
  if (ctx.spec.runAsRoot !== true && PERMISSION_PROBLEM.test([error, ...daemon].join("\n"))) {
    const who = ctx.spec.transferIdentity?.runAsUser !== undefined ? `user ${ctx.spec.transferIdentity.runAsUser}` : "the transfer image's user";
    parts.push(
      `the transfer pods run unprivileged as ${who}: set spec.transferIdentity to the files' owner (runAsUser, runAsGroup; fsGroup lets the kubelet make a new volume writable for it, except on hostPath volumes), or, in an admin namespace, spec.runAsRoot`,
    );
  }
  return parts.join("; ");
}
