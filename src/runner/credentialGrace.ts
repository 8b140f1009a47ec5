/**
 * How long a migration waits for a cluster credential that is missing or refused. A kubeconfig Secret
 * rotated by delete and re-create is missing for a moment, and a token being renewed may be refused
 * (401) for a moment: neither may fail a migration. A credential that stays wrong must, after a bounded
 * time: the first failure is recorded in a durable condition whose lastTransitionTime later failures
 * keep (a retry does not restart the clock), and the condition goes once a phase body ran with its
 * clusters. A phase that gave up keeps it, so that each cleanup step after the deadline gives up at once,
 * naming what it could not remove.
 */
import { MigrationInputError } from "../contracts/inputError";
import { LABEL } from "../contracts/labels";
import { CONDITION, type ConditionInput, findCondition, removeCondition } from "../dvm/conditions";
import type { Condition, DvmSpec, DvmStatus } from "../dvm/types";
import { KubeApiError } from "../kube/errors";
import { ClusterCredentialsUnavailableError } from "../kube/resolver";
import { uniqueNamespaces, volumePairs } from "../phases/volumes";

/** Default of RunnerOptions.credentialGraceMs. */
export const DEFAULT_CREDENTIAL_GRACE_MS = 5 * 60_000;

/** What is wrong with a cluster credential, when `error` says one is missing or refused; else undefined. */
export function credentialProblem(error: unknown): string | undefined {
  if (error instanceof ClusterCredentialsUnavailableError) return error.errors.join("; ");
  // The message names the cluster and the call ("destination: list Pod in shop: Unauthorized"), never the credential.
  if (error instanceof KubeApiError && error.statusCode === 401) return `${error.message} (401: the cluster refused the credential)`;
  return undefined;
}

/** When the current run of credential failures began (ms since the epoch), if one is recorded. */
export function credentialFailureSince(status: DvmStatus): number | undefined {
  const recorded = findCondition(status.conditions, CONDITION.ClusterCredentialsUnavailable);
  if (recorded?.status !== "True" || recorded.lastTransitionTime === undefined) return undefined;
  const since = Date.parse(recorded.lastTransitionTime);
  return Number.isNaN(since) ? undefined : since;
}

export function credentialGraceExpired(status: DvmStatus, nowMs: number, graceMs: number): boolean {
  const since = credentialFailureSince(status);
  return since !== undefined && nowMs - since >= graceMs;
}

/** The conditions with this failure recorded; the first failure's time is kept whatever the message. */
export function noteCredentialFailure(conditions: readonly Condition[], problem: string, graceMs: number, nowIso: string): Condition[] {
  const existing = findCondition(conditions, CONDITION.ClusterCredentialsUnavailable);
  const since = existing?.status === "True" && existing.lastTransitionTime ? existing.lastTransitionTime : nowIso;
  const deadline = new Date(Date.parse(since) + graceMs).toISOString();
  const condition: Condition = {
    type: CONDITION.ClusterCredentialsUnavailable,
    status: "True",
    category: "Warn",
    reason: "CredentialsUnavailable",
    message: `${problem}. Retrying; the migration fails at ${deadline} (${Math.round(graceMs / 1000)} s after the first failure) unless the credential works again.`,
    durable: true,
    lastTransitionTime: since,
  };
  return [...removeCondition(conditions, CONDITION.ClusterCredentialsUnavailable), condition];
}

/** After a body ran with its clusters resolved (and gave up on none): the credentials work again. */
export function clearCredentialFailure(status: DvmStatus): DvmStatus {
  if (!findCondition(status.conditions, CONDITION.ClusterCredentialsUnavailable)) return status;
  return { ...status, conditions: removeCondition(status.conditions ?? [], CONDITION.ClusterCredentialsUnavailable) };
}

export function gaveUpMessage(problem: string, since: number, graceMs: number): string {
  return `${problem}: still failing ${Math.round(graceMs / 1000)} s after the first failure at ${new Date(since).toISOString()}; the migration is failed`;
}

/**
 * Cleanup cannot reach a cluster: what it leaves behind, so that someone can remove it. Transfer
 * objects (server and client pods, the endpoint, transfer Secrets with keys) carry the DVM's uid and
 * the transfer label, in the source and target namespaces.
 */
export function cleanupLeftCondition(
  dvm: { uid: string },
  spec: Pick<DvmSpec, "persistentVolumeClaims" | "persistentVolumeClaimSelector">,
  status: Pick<DvmStatus, "selectedPersistentVolumeClaims">,
  problem: string,
): ConditionInput {
  const pairs = volumePairs(spec, status, "VolumeMigration");
  const from = uniqueNamespaces(pairs.map((p) => p.from));
  const to = uniqueNamespaces(pairs.map((p) => p.to));
  const selector = `${LABEL.dvmUid}=${dvm.uid},${LABEL.transfer}=true`;
  return {
    type: CONDITION.CleanupIncomplete,
    status: "True",
    category: "Warn",
    reason: "CredentialsUnavailable",
    message:
      `Cleanup gave up (${problem}). Left behind: the transfer objects labelled ${selector} (pods, the endpoint Service or Route, ` +
      `transfer Secrets holding TLS keys) in namespaces ${from.join(", ") || "-"} of the source cluster and ${to.join(", ") || "-"} of the destination; delete them with that selector.`,
    durable: true,
  };
}

/** Thrown on the failure itinerary once the grace is over and the clusters still cannot be resolved. */
export class CleanupGaveUpError extends MigrationInputError {
  constructor(
    errors: string[],
    readonly left: ConditionInput,
  ) {
    super(errors);
  }
}
