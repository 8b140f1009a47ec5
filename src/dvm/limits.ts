import { boundedTexts } from "../lib/textBounds";

/**
 * How large a DVM may be, and how large each free text the controller records may be, so that every
 * record stays inside its store's limit with room. The arithmetic is in docs/security.md ("Size limits");
 * in short, at the worst the CRD allows (every name at its maximum length, every PVC failed):
 *   - the DVM object in etcd (1.5 MiB per request): spec about 1.1 KB per PVC, status about 3.4 KB per
 *     PVC, plus bounded conditions and errors: about 0.6 MB at MAX_PVCS_PER_DVM;
 *   - a ledger item in DynamoDB (400 KB): the completion of RunRsyncOperations records about 1.5 KB per
 *     PVC of status and one error of at most MAX_ERROR_TEXT_BYTES per failed PVC: about 0.27 MB;
 *   - the Lambda payload (6 MB) carries a reconcile request and a run result, never the DVM.
 */

/** The most PVCs one DVM may move (spec.persistentVolumeClaims maxItems, in the CRD and the parser). */
export const MAX_PVCS_PER_DVM = 100;

/**
 * spec.persistentVolumeClaimSelector's label selector: at most this many matchLabels, matchExpressions,
 * and values in one expression (a user-written list, bounded like every other).
 */
export const MAX_SELECTOR_LABELS = 32;
export const MAX_SELECTOR_EXPRESSIONS = 16;
export const MAX_SELECTOR_VALUES = 32;

/** One error text in a status, a ledger item or an event: a PVC's rsync failure, a retried phase's error. */
export const MAX_ERROR_TEXT_BYTES = 1_024;

/** One condition's message (a condition may list many PVCs, e.g. the vanished-files warning). */
export const MAX_CONDITION_MESSAGE_BYTES = 4_096;

/** Entries of status.errors and of a recorded outcome's errors: one per PVC at most, plus room. */
export const MAX_RECORDED_ERRORS = MAX_PVCS_PER_DVM + 28;

/**
 * The most workloads (Deployments, StatefulSets, ReplicaSets, CronJobs) one DVM quiesces, each listed in
 * status.quiescedApplications (about 0.4 KB an entry at the longest names): a CutOver whose volumes more
 * mount fails before any is scaled down.
 */
export const MAX_QUIESCED_APPLICATIONS = 100;

/** Length bounds of the spec's strings that name no Kubernetes object (those are 63 or 253). */
export const MAX_IMAGE_REFERENCE_LENGTH = 512;

/** Error texts as a status, a condition or a ledger item records them: bounded in count and in bytes. */
export function boundedErrors(errors: readonly string[]): string[] {
  return boundedTexts(errors, { maxCount: MAX_RECORDED_ERRORS, maxBytes: MAX_ERROR_TEXT_BYTES });
}
