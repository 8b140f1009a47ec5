/**
 * RunRsyncOperations: one rsync client pod per volume per attempt on the source, retried up to the
 * backoff limit, with progress collected into the progress records and the DVM status. The pods
 * themselves are the record of attempts (the newest attempt label wins), so a repeated poll or a
 * repeated body after a crash decides the same thing and adopts what exists: no generateName.
 */

import { LABEL } from "../contracts/labels";
import { CONDITION, type ConditionInput } from "../dvm/conditions";
import { MAX_ERROR_TEXT_BYTES } from "../dvm/limits";
import type { TransferSettings } from "../dvm/transferPolicy";
import { DEFAULT_BACKOFF_LIMIT, type PodProgress, type RsyncOperation } from "../dvm/types";
import { KINDS, type PodObject, type PvcObject, refOf } from "../kube/objects";
import { mapConcurrently } from "../lib/concurrency";
import { definedFields } from "../lib/definedFields";
import { truncateUtf8 } from "../lib/textBounds";
import {
  liveFigures,
  moduleNameFor,
  onlyRootFolderAttributesFailed,
  parseRsyncProgress,
  type RsyncProgress,
  rsyncClientPod,
  rsyncRetry,
  type TransferFigures,
  totalFigures,
  type VerificationReport,
  verificationReport,
} from "../transfer";
import { isBlockVolume } from "./blockVolumes";
import { clientPodName, progressName, transferLabels } from "./names";
import { transferPodSettings } from "./podSettings";
import { finalRsyncError } from "./rsyncFailure";
import { serverGroupOf } from "./serverGroups";
import { ensureServerPodRunning } from "./serverPods";
import { sourcePodAffinity } from "./sourcePlacement";
import { warnWhenWaitingLong } from "./timing";
import { clientSecretName } from "./transferConfig";
import { advance, type PhaseBody, type PhaseContext, type StatusUpdate, wait } from "./types";
import { formatPvc, specField, type VolumePair } from "./volumes";

export const CLIENT_ROLE = "rsync-client";
const PENDING_WARN_AFTER_MS = 10 * 60_000;
const LOG_TAIL_LINES = 20;
/** rsync's "partial transfer due to vanished source files": everything that still existed was copied. */
export const RSYNC_VANISHED_EXIT_CODE = 24;
/**
 * Enough of a finished attempt's log for rsync's statistics and its error lines (stderr, which the client
 * script prints last), e.g. the "file has vanished" lines of a large volume.
 */
const FINISHED_LOG_LINES = 10_000;
/** What the client script keeps of rsync's error lines as the termination message (rsyncClient.ts). */
const TERMINATION_MESSAGE_BYTES = 4_096;

/** "queued": no client pod yet, because spec.transfer.maxConcurrentVolumes others are in flight. */
type VolumeState = "succeeded" | "failed" | "running" | "pending" | "unknown" | "queued";

interface VolumeReport {
  pair: VolumePair;
  attempt: number;
  state: VolumeState;
  /** The newest client pod; "" while queued. */
  pod: string;
  progress?: RsyncProgress;
  /** Bytes, total, percent, rate, time left (src/transfer/figures.ts). */
  figures?: TransferFigures;
  /** Once the attempt ended: what rsync sent, skipped, lost and failed. */
  verification?: VerificationReport;
  error?: string;
  /** The transfer ended with exit code 24: files vanished; how many, when rsync's output says. */
  vanished?: { count: number | undefined };
  /** Exit code 23 for the destination root folder's own times or mode only: everything inside arrived. */
  rootFolderAttributes?: true;
}

export function backOffLimit(ctx: Pick<PhaseContext, "spec">): number {
  // 0 means unset, as upstream.
  return ctx.spec.backOffLimit || DEFAULT_BACKOFF_LIMIT;
}

/** rsync's options for one volume: the DVM's transfer settings, and the volume's own verify. */
export function rsyncOptionsFor(transfer: TransferSettings, pair: Pick<VolumePair, "verify">) {
  return {
    verify: pair.verify ?? transfer.verify,
    delete: transfer.delete,
    partial: transfer.partial,
    hardLinks: transfer.hardLinks,
    ...(transfer.bandwidthLimitKiBPerSecond !== undefined ? { bwlimitKiB: transfer.bandwidthLimitKiBPerSecond } : {}),
    extras: transfer.extraOptions,
    // Exact byte counts in rsync's statistics (the verification report and the bytes in the status),
    // not three significant digits.
    humanReadable: false,
  };
}

export async function clientPodFor(ctx: PhaseContext, pair: VolumePair, attempt: number) {
  const block = await isBlockVolume(ctx, pair);
  const affinity = await sourcePodAffinity(ctx, pair.from);
  return rsyncClientPod({
    name: clientPodName(ctx.dvm, pair, attempt),
    namespace: pair.from.namespace,
    labels: { ...transferLabels(ctx.dvm, CLIENT_ROLE), [LABEL.volume]: pair.id, [LABEL.attempt]: String(attempt) },
    ...transferPodSettings(ctx),
    configSecretName: clientSecretName(ctx, pair),
    sourcePvc: { ...pair.from, ...(block ? { block: true } : {}) },
    ...(affinity ? { affinity } : {}),
    destinationPvc: pair.to,
    // The module's own user (src/transfer/credentials.ts): its password is the only one in the client Secret.
    user: moduleNameFor(pair.to),
    ...(ctx.transfer.resources ? { rsyncResources: ctx.transfer.resources } : {}),
    rsync: { ...rsyncOptionsFor(ctx.transfer, pair), ...(block && (await createdByThisMigration(ctx, pair)) ? { wholeFile: true } : {}) },
  });
}

/**
 * The destination PVC was created by this DVM (not adopted from an earlier Stage): a new device holds
 * nothing worth comparing, so a Block volume's first pass sends the content whole, and later Stages
 * compare blocks and send only those that changed.
 */
async function createdByThisMigration(ctx: PhaseContext, pair: VolumePair): Promise<boolean> {
  const target = await ctx.clusters.destination.get<PvcObject>(refOf("PersistentVolumeClaim", pair.to.namespace, pair.to.name));
  return target?.metadata.labels?.[LABEL.dvmUid] === ctx.dvm.uid;
}

function attemptOf(pod: PodObject): number {
  const value = Number(pod.metadata.labels?.[LABEL.attempt]);
  return Number.isInteger(value) && value > 0 ? value : 0;
}

function rsyncTermination(pod: PodObject) {
  return pod.status?.containerStatuses?.find((c) => c.name === "rsync")?.state?.terminated;
}

function terminationMessage(pod: PodObject): string {
  const terminated = rsyncTermination(pod);
  const parts = [
    terminated ? `exit code ${terminated.exitCode}` : undefined,
    terminated?.reason,
    rsyncErrorLines(terminated?.message ?? ""),
    pod.status?.message,
  ].filter(Boolean);
  // The pod's message is the kubelet's free text: bounded before it enters a record.
  return parts.length > 0 ? truncateUtf8(parts.join(": "), MAX_ERROR_TEXT_BYTES) : "the rsync client pod failed";
}

/**
 * rsync's own error lines ("rsync: ...", "rsync error: ...", and "@ERROR: ..." the daemon sent), the last
 * few; else the message's last lines.
 */
function rsyncErrorLines(message: string): string {
  const lines = message
    .trim()
    .split("\n")
    .map((l) => l.split("\r").at(-1)!.trim())
    .filter(Boolean);
  const errors = lines.filter((l) => /^(rsync( error)?|@ERROR):/.test(l));
  return (errors.length > 0 ? errors.slice(-3) : lines.slice(-2)).join(" ");
}

async function readProgress(ctx: PhaseContext, pod: PodObject, tailLines = LOG_TAIL_LINES): Promise<RsyncProgress | undefined> {
  try {
    const text = await ctx.clusters.source.podLogs(pod.metadata.namespace ?? "", pod.metadata.name, "rsync", tailLines);
    return text ? parseRsyncProgress(text) : undefined;
  } catch (error) {
    // Progress is informative only: an unreadable log must never stall or fail the transfer.
    ctx.log.debug("could not read rsync progress", { pod: pod.metadata.name, error: String(error) });
    return undefined;
  }
}

function clientPodsOf(ctx: PhaseContext, pair: VolumePair): Promise<PodObject[]> {
  return ctx.clusters.source.list<PodObject>(KINDS.Pod, pair.from.namespace, {
    [LABEL.dvmUid]: ctx.dvm.uid,
    [LABEL.volume]: pair.id,
    [LABEL.role]: CLIENT_ROLE,
  });
}

async function startVolume(ctx: PhaseContext, pair: VolumePair): Promise<VolumeReport> {
  const pod = await clientPodFor(ctx, pair, 1);
  await ctx.clusters.source.ensure(pod);
  return { pair, attempt: 1, state: "pending", pod: pod.metadata.name };
}

/** The volume's transfer so far, from its client pods (at least one, with an attempt label). */
async function driveVolume(ctx: PhaseContext, pair: VolumePair, limit: number, pods: PodObject[]): Promise<VolumeReport> {
  const latest = pods.sort((a, b) => attemptOf(b) - attemptOf(a))[0]!;
  const attempt = attemptOf(latest);
  const report = { pair, attempt, pod: latest.metadata.name };
  const checksum = rsyncOptionsFor(ctx.transfer, pair).verify;
  const lost = lostAttempt(latest);
  if (lost) return attempt >= limit ? { ...report, state: "failed", error: lost } : nextAttempt(ctx, pair, pods, report, lost);
  switch (latest.status?.phase) {
    case "Succeeded": {
      const recorded = recordedResult(ctx, pair, attempt);
      if (recorded) return { ...report, state: "succeeded", progress: { percent: 100, finished: true }, ...recorded };
      const progress: RsyncProgress = { ...(await readProgress(ctx, latest, FINISHED_LOG_LINES)), percent: 100, finished: true };
      return { ...report, state: "succeeded", progress, ...endOf(progress, checksum) };
    }
    case "Failed": {
      const terminated = rsyncTermination(latest);
      if (terminated?.exitCode === RSYNC_VANISHED_EXIT_CODE) return vanishedReport(ctx, report, latest, checksum);
      const message = terminated?.message ?? "";
      if (onlyRootFolderAttributesFailed(terminated?.exitCode, message, Buffer.byteLength(message) < TERMINATION_MESSAGE_BYTES)) {
        ctx.log.info("rsync could not set the destination root folder's times or mode; everything in it arrived", { pvc: formatPvc(pair.from) });
        const progress: RsyncProgress = { ...(await readProgress(ctx, latest, FINISHED_LOG_LINES)), percent: 100, finished: true };
        return { ...report, state: "succeeded", progress, ...endOf(progress, checksum), rootFolderAttributes: true };
      }
      const error = terminationMessage(latest);
      const progress = await readProgress(ctx, latest, FINISHED_LOG_LINES);
      const ended = endOf(progress, checksum);
      const mismatches = progress?.checksumMismatches ?? 0;
      // With verification on, content that arrived different from the source is a finding, not a glitch.
      if (checksum && mismatches > 0)
        return {
          ...report,
          state: "failed",
          ...ended,
          error: `${mismatches} file${mismatches === 1 ? "" : "s"} failed rsync's checksum verification: ${error}`,
        };
      // A failure the next attempt would repeat ends the volume now, not after backOffLimit attempts.
      const retry = rsyncRetry(rsyncTermination(latest)?.exitCode, rsyncTermination(latest)?.message ?? "");
      if (attempt >= limit || !retry.retry) return { ...report, state: "failed", ...ended, error: await finalRsyncError(ctx, pair, error, retry, latest) };
      return nextAttempt(ctx, pair, pods, report, error);
    }
    case "Running": {
      const progress = await readProgress(ctx, latest);
      return { ...report, state: "running", ...(progress ? { progress, figures: liveFigures(progress) } : {}) };
    }
    case "Pending":
    case undefined:
      return { ...report, state: "pending" };
    default:
      return { ...report, state: "unknown" };
  }
}

/**
 * Why an attempt will not end by itself: its client pod is being deleted before it finished. The
 * controller deletes only finished attempts, so someone else did: the taint manager evicting it from a
 * node that stopped answering (after the pod's toleration of node.kubernetes.io/unreachable, 300 s by
 * default), a drain, a user. On a node that never comes back such a pod stays Terminating and Running
 * for ever, so it is not waited for: the next attempt starts (it runs once the volume's node can take it).
 */
function lostAttempt(pod: PodObject): string | undefined {
  const phase = pod.status?.phase;
  if (!pod.metadata.deletionTimestamp || phase === "Succeeded" || phase === "Failed") return undefined;
  const node = pod.spec?.nodeName ? ` on node ${pod.spec.nodeName}` : "";
  const disruption = pod.status?.conditions?.find((c) => c.type === "DisruptionTarget" && c.status === "True");
  const why = disruption ? ` (${[disruption.reason, disruption.message].filter(Boolean).join(": ")})` : "";
  // The condition's message is the cluster's free text: bounded before it enters a record.
  return truncateUtf8(`the rsync client pod ${pod.metadata.name}${node} was deleted before it finished${why}`, MAX_ERROR_TEXT_BYTES);
}

/** Starts attempt + 1 of a volume whose attempt failed or was lost with `error`, once its server runs. */
async function nextAttempt(
  ctx: PhaseContext,
  pair: VolumePair,
  pods: PodObject[],
  report: Pick<VolumeReport, "pair" | "attempt" | "pod">,
  error: string,
): Promise<VolumeReport> {
  const { source } = ctx.clusters;
  const { attempt } = report;
  // A lost server (deleted, evicted) is what failed the attempt: bring it back before the next one,
  // or the retries would burn out against a closed port.
  const server = await ensureServerPodRunning(ctx, serverGroupOf(ctx, pair));
  if (server !== "running")
    return { ...report, state: "pending", error: `${error}; waiting for the rsync server pod (${server}) before attempt ${attempt + 1}` };
  const next = await clientPodFor(ctx, pair, attempt + 1);
  await source.ensure(next);
  // Only once the next attempt exists: the newest pod always records how far the retries got.
  for (const old of pods.filter((p) => attemptOf(p) <= attempt && !p.metadata.deletionTimestamp))
    await source.delete({ ...KINDS.Pod, namespace: pair.from.namespace, name: old.metadata.name }, old.metadata.uid ? { uid: old.metadata.uid } : {});
  ctx.log.info("rsync attempt failed; retrying", { pvc: formatPvc(pair.from), attempt, error });
  return { pair, attempt: attempt + 1, state: "pending", pod: next.metadata.name };
}

/** The figures and the verification report of an attempt that ended, from its log. */
function endOf(progress: RsyncProgress | undefined, checksum: boolean): Pick<VolumeReport, "figures" | "verification"> {
  const verification = verificationReport(progress, { checksum });
  return { figures: liveFigures(progress), ...(verification ? { verification } : {}) };
}

/**
 * A succeeded attempt's figures and report as an earlier poll recorded them in the status: its log (up
 * to FINISHED_LOG_LINES) is read once, not on every poll until the last volume is done.
 */
function recordedResult(ctx: PhaseContext, pair: VolumePair, attempt: number): Pick<VolumeReport, "figures" | "verification"> | undefined {
  const op = ctx.status.rsyncOperations?.find((o) => o.pvcReference.namespace === pair.from.namespace && o.pvcReference.name === pair.from.name);
  if (!op?.succeeded || op.currentAttempt !== attempt || !op.verification) return undefined;
  const { pvcReference: _ref, currentAttempt: _attempt, succeeded: _succeeded, failed: _failed, queued: _queued, verification, ...figures } = op;
  return { figures: definedFields(figures), verification };
}

/**
 * Exit code 24: files vanished between rsync's file list and their transfer, which is normal on a live
 * volume. Everything that still existed was copied, so the volume succeeded, with a warning that counts
 * the vanished files (from the log, else from the termination message, which holds the log's end).
 */
async function vanishedReport(
  ctx: PhaseContext,
  report: Pick<VolumeReport, "pair" | "attempt" | "pod">,
  pod: PodObject,
  checksum: boolean,
): Promise<VolumeReport> {
  const fromLog = await readProgress(ctx, pod, FINISHED_LOG_LINES);
  const message = rsyncTermination(pod)?.message;
  const fromMessage = message ? parseRsyncProgress(message).vanishedFiles : undefined;
  const counts = [fromLog?.vanishedFiles, fromMessage].filter((n): n is number => n !== undefined);
  const count = counts.length > 0 ? Math.max(...counts) : undefined;
  ctx.log.info("rsync finished with vanished source files", { pvc: formatPvc(report.pair.from), vanished: count ?? "unknown" });
  const progress: RsyncProgress = { ...fromLog, ...(count !== undefined ? { vanishedFiles: count } : {}), percent: 100, finished: true };
  return { ...report, state: "succeeded", progress, ...endOf(progress, checksum), vanished: { count } };
}

/** One Warn condition naming every PVC whose transfer lost files that vanished, with their count. */
export function vanishedWarning(reports: readonly Pick<VolumeReport, "pair" | "vanished">[]): ConditionInput | undefined {
  const vanished = reports.filter((r) => r.vanished);
  if (vanished.length === 0) return undefined;
  const parts = vanished.map((r) => {
    const count = r.vanished!.count;
    const files = count === undefined ? "an unknown number of files" : `${count} file${count === 1 ? "" : "s"}`;
    return `${formatPvc(r.pair.from)}: ${files} vanished during the transfer`;
  });
  return {
    type: CONDITION.RsyncFilesVanished,
    status: "True",
    category: "Warn",
    reason: "SourceFilesVanished",
    message: `rsync exit code 24 (files deleted while they were copied; everything else was transferred): ${parts.join("; ")}`,
    durable: true,
  };
}

/**
 * One Warn condition naming every PVC whose copy is complete but for its destination root folder's own
 * times or mode, which only that folder's owner may set (an unprivileged daemon on a volume it did not make).
 */
export function rootFolderWarning(reports: readonly Pick<VolumeReport, "pair" | "rootFolderAttributes">[]): ConditionInput | undefined {
  const affected = reports.filter((r) => r.rootFolderAttributes);
  if (affected.length === 0) return undefined;
  return {
    type: CONDITION.RsyncRootFolderAttributesNotSet,
    status: "True",
    category: "Warn",
    reason: "RootFolderNotOwned",
    message:
      `rsync exit code 23 for the destination volume's root folder only: its modification time or mode could not be set by the transfer pods' user, which does not own it; every file and folder in it was copied: ` +
      `${affected.map((r) => `${formatPvc(r.pair.from)} to ${formatPvc(r.pair.to)}`).join("; ")}. Set spec.transferIdentity (or, in an admin namespace, spec.runAsRoot) to keep them too`,
    durable: true,
  };
}

function podProgress(report: VolumeReport): PodProgress {
  const p = report.progress;
  return {
    name: report.pod,
    namespace: report.pair.from.namespace,
    pvcRef: report.pair.from,
    ...(p?.percent !== undefined ? { lastObservedProgressPercent: `${p.percent}%` } : {}),
    ...(p?.rate ? { lastObservedTransferRate: p.rate } : {}),
    ...(p?.elapsedSeconds !== undefined ? { totalElapsedTime: `${p.elapsedSeconds}s` } : {}),
  };
}

function statusOf(reports: VolumeReport[]): StatusUpdate {
  const list = (state: VolumeState) => reports.filter((r) => r.state === state).map(podProgress);
  const rsyncOperations: RsyncOperation[] = reports.map((r) => ({
    pvcReference: r.pair.from,
    currentAttempt: r.attempt,
    ...(r.state === "succeeded" ? { succeeded: true } : {}),
    ...(r.state === "failed" ? { failed: true } : {}),
    ...(r.state === "queued" ? { queued: true } : {}),
    ...r.figures,
    ...(r.verification ? { verification: r.verification } : {}),
  }));
  return {
    rsyncOperations,
    successfulPods: list("succeeded"),
    failedPods: list("failed"),
    runningPods: list("running"),
    pendingPods: list("pending"),
    unknownPods: list("unknown"),
    progress: totalFigures(reports.map((r) => ({ ...r.figures, done: r.state === "succeeded" || r.state === "failed" }))),
  };
}

async function recordProgress(ctx: PhaseContext, report: VolumeReport): Promise<void> {
  const p = report.progress;
  try {
    await ctx.clusters.host.patchStatus(
      { ...KINDS.DirectVolumeMigrationProgress, namespace: ctx.dvm.namespace, name: progressName(ctx.dvm, report.pair) },
      {
        ...(report.pod ? { podName: report.pod } : {}),
        podNamespace: report.pair.from.namespace,
        attempt: report.attempt,
        phase: report.state,
        ...(p?.percent !== undefined ? { lastObservedProgressPercent: `${p.percent}%`, totalProgressPercentage: `${p.percent}%` } : {}),
        ...(p?.rate ? { lastObservedTransferRate: p.rate } : {}),
        ...report.figures,
        ...(report.verification ? { verification: report.verification } : {}),
        ...(report.error ? { logMessage: report.error } : {}),
      },
    );
  } catch (error) {
    ctx.log.debug("could not record progress", { record: progressName(ctx.dvm, report.pair), error: String(error) });
  }
}

const holdsSlot = (report: VolumeReport) => report.state === "running" || report.state === "pending" || report.state === "unknown";

/**
 * Volumes polled at once. A poll makes two or three calls per volume (list its client pods, read a log,
 * patch its progress record): at MAX_PVCS_PER_DVM volumes about 300 calls, in about 38 rounds of 8, so
 * even at a second per call a poll ends well inside the lease (docs/security.md, "Size limits").
 */
export const VOLUME_POLL_CONCURRENCY = 8;

/**
 * Every volume's report, in spec order. Volumes that already have a client pod are driven first (an
 * unfinished one holds its slot); then volumes without one start, in spec order, while fewer than
 * spec.transfer.maxConcurrentVolumes are in flight, and the rest stay queued for a later poll. At most
 * VOLUME_POLL_CONCURRENCY volumes are polled at once, and none is begun after the body's deadline.
 */
async function driveVolumes(ctx: PhaseContext): Promise<VolumeReport[]> {
  const limit = backOffLimit(ctx);
  const signal = ctx.lease?.signal;
  const polled = await mapConcurrently(
    ctx.volumes,
    VOLUME_POLL_CONCURRENCY,
    async (pair): Promise<VolumeReport | VolumePair> => {
      const pods = await clientPodsOf(ctx, pair);
      return pods.some((pod) => attemptOf(pod) > 0) ? driveVolume(ctx, pair, limit, pods) : pair;
    },
    signal,
  );
  const reports = polled.filter((p): p is VolumeReport => "pair" in p);
  const notStarted = polled.filter((p): p is VolumePair => !("pair" in p));
  const free = Math.max(0, ctx.transfer.maxConcurrentVolumes - reports.filter(holdsSlot).length);
  const started = await mapConcurrently(notStarted.slice(0, free), VOLUME_POLL_CONCURRENCY, (pair) => startVolume(ctx, pair), signal);
  const queued = notStarted.slice(free).map((pair): VolumeReport => ({ pair, attempt: 0, state: "queued", pod: "" }));
  return [...reports, ...started, ...queued].sort((a, b) => a.pair.index - b.pair.index);
}

export const runRsyncOperations: PhaseBody = async (ctx) => {
  const reports = await driveVolumes(ctx);
  await mapConcurrently(reports, VOLUME_POLL_CONCURRENCY, (report) => recordProgress(ctx, report), ctx.lease?.signal);
  const status = statusOf(reports);
  const endWarnings = [vanishedWarning(reports), rootFolderWarning(reports)].filter((w): w is ConditionInput => w !== undefined);
  const open = reports.filter((r) => r.state !== "succeeded" && r.state !== "failed");
  if (open.length > 0) {
    const pending = open.filter((r) => r.state === "pending").map((r) => `${r.pair.from.namespace}/${r.pod}`);
    const warnings =
      pending.length === 0
        ? []
        : warnWhenWaitingLong(
            ctx,
            {
              type: CONDITION.RsyncClientPodsPending,
              reason: "PodStuckInContainerCreating",
              message: `rsync client pods pending for more than 10 minutes: ${pending.join(", ")}`,
            },
            PENDING_WARN_AFTER_MS,
          );
    const queued = open.filter((r) => r.state === "queued").length;
    const reason = `${open.length - queued} of ${reports.length} volumes transferring${queued > 0 ? `, ${queued} queued (spec.transfer.maxConcurrentVolumes ${ctx.transfer.maxConcurrentVolumes})` : ""}`;
    return wait(reason, { status, warnings: [...warnings, ...endWarnings] });
  }
  const failed = reports.filter((r) => r.state === "failed");
  if (failed.length > 0) {
    return {
      kind: "fail",
      category: "Critical",
      status,
      ...(endWarnings.length > 0 ? { warnings: endWarnings } : {}),
      errors: failed.map(
        (r) =>
          `${specField(r.pair)}: rsync of ${formatPvc(r.pair.from)} to ${formatPvc(r.pair.to)} failed after ${r.attempt} attempt${r.attempt === 1 ? "" : "s"}: ${r.error}`,
      ),
    };
  }
  return endWarnings.length > 0 ? { kind: "advance", status, warnings: endWarnings } : advance(status);
};
