/**
 * What happens when a DVM is deleted (kubectl delete, `dvm cancel`): the DVM carries DVM_FINALIZER, so it
 * stays (with a deletionTimestamp) until this has run to the end:
 *   1. wait until no phase of it holds a live lease: a body that started before the deletion finishes
 *      (or is stopped at its deadline) first, so nothing is created after the cleanup below;
 *   2. delete its transfer objects (pods, Secrets, Services, Routes, progress records) on both clusters,
 *      selected by the DVM's uid, and wait until they are gone;
 *   3. start the retention period of its ledger entries, then release the finalizer.
 * Invocations that claim a phase after the deletion began see the deletionTimestamp on the fresh read
 * that follows every claim and stop (runner.ts), so step 1 sees every body that may still create
 * something. Every step is idempotent: the runner and `dvm cancel` may run it at the same time.
 */

import { MigrationInputError } from "../contracts/inputError";
import { CONDITION, findCondition } from "../dvm/conditions";
import { isAdminNamespace, type MigrationPolicy, policyViolations } from "../dvm/policy";
import { type DirectVolumeMigration, DVM_FINALIZER, type DvmSpec, parseDvmSpec } from "../dvm/types";
import type { MigrationClusters } from "../kube/cluster";
import { retryOnConflict } from "../kube/conflictRetry";
import type { DvmStore } from "../kube/dvmStore";
import { KubeApiError } from "../kube/errors";
import { ClusterCredentialsUnavailableError, type ClusterResolver } from "../kube/resolver";
import type { LedgerEntry, PhaseLedger } from "../ledger";
import type { Clock } from "../lib/clock";
import type { Logger } from "../lib/log";
import { removeTransferResources, waitForTransferResourcesGone } from "../phases/cleanup";
import { inUseValue } from "../phases/pvcUse";
import { restoreApplications } from "../phases/quiesce";
import { quiesceEnabled } from "../phases/quiesceRules";
import type { CleanupScope } from "../phases/types";
import { volumePairs } from "../phases/volumes";
import { cleanupLeftCondition, DEFAULT_CREDENTIAL_GRACE_MS } from "./credentialGrace";
import { MAX_CLOCK_SKEW_MS } from "./lease";

export interface DeletionDeps {
  store: DvmStore;
  ledger: PhaseLedger;
  clusters: ClusterResolver;
  clock: Clock;
  log: Logger;
  /**
   * The controller's migration policy: a spec it refuses is never followed, not even to clean up (its
   * Secrets are not read). Absent for `dvm cancel`, which acts with its user's own credentials.
   */
  policy?: MigrationPolicy;
  /** How long a missing kubeconfig Secret is waited for, from the deletionTimestamp; default 5 minutes. */
  credentialGraceMs?: number;
}

export type DeletionStep =
  /** A phase still holds its lease; try again after `retryAfterMs`. */
  | { kind: "leaseHeld"; phases: string[]; retryAfterMs: number }
  /** The transfer objects were deleted and some are still terminating. */
  | { kind: "terminating"; reason: string }
  /** Nothing of the DVM is left on the clusters; the finalizer is released (or was never there). */
  | { kind: "released" };

export async function continueDeletion(deps: DeletionDeps, dvm: DirectVolumeMigration): Promise<DeletionStep> {
  const { uid } = dvm.metadata;
  const now = deps.clock.now();
  const history = await deps.ledger.history(uid);
  // A lease is live until its end plus the clock skew: its holder's clock may be behind ours.
  const live = history.filter((e) => e.state === "RUNNING" && (e.leaseExpiresAt ?? 0) + MAX_CLOCK_SKEW_MS >= now);
  if (live.length > 0) {
    const until = Math.max(...live.map((e) => (e.leaseExpiresAt ?? 0) + MAX_CLOCK_SKEW_MS));
    return { kind: "leaseHeld", phases: live.map((e) => e.key.phase), retryAfterMs: Math.max(0, until - now) };
  }

  const context = await cleanupContext(deps, dvm);
  if (context === WAIT_FOR_CREDENTIALS) return { kind: "terminating", reason: "waiting for the DVM's kubeconfig Secrets to remove its transfer objects" };
  if (context) {
    await removeTransferResources(context, { progressRecords: true });
    const left = await waitForTransferResourcesGone(context);
    if (left.kind === "wait") return { kind: "terminating", reason: left.reason };
    // Cancelled before it succeeded: the applications it quiesced run again (once: quiesceRules.ts).
    if (restoresOnCancel(context.spec) && !succeeded(dvm, history)) {
      const { problems } = await restoreApplications(
        context,
        context.clusters.source,
        context.volumes.map((v) => v.from),
        inUseValue(context.dvm),
      );
      if (problems.length > 0) deps.log.warn("applications left quiesced: their record cannot be read", { problems: problems.slice(0, 10) });
    }
  }
  await deps.ledger.retire(uid);
  await releaseFinalizer(deps.store, dvm);
  deps.log.info("DVM deleted: transfer objects removed, finalizer released");
  return { kind: "released" };
}

function restoresOnCancel(spec: DvmSpec): boolean {
  return spec.migrationType === "CutOver" && quiesceEnabled(spec);
}

/**
 * The migration succeeded: its status says so, or the ledger recorded the last transfer step done (the
 * status write of Completed may lag behind it). Then the source stays quiesced.
 */
function succeeded(dvm: DirectVolumeMigration, history: readonly LedgerEntry[]): boolean {
  if (findCondition(dvm.status.conditions, CONDITION.Succeeded)?.status === "True") return true;
  return history.some((e) => e.key.phase === "WaitForRsyncResourcesTerminated" && e.outcome?.result === "advanced" && e.outcome.nextPhase === "Completed");
}

const WAIT_FOR_CREDENTIALS = Symbol("wait for credentials");

/**
 * What the cleanup needs (no phase runs: no attempt, image or transfer settings), or undefined when nothing can have been created (or can be
 * reached), or WAIT_FOR_CREDENTIALS while a missing kubeconfig Secret may still come back (a rotation).
 */
async function cleanupContext(deps: DeletionDeps, dvm: DirectVolumeMigration): Promise<CleanupScope | undefined | typeof WAIT_FOR_CREDENTIALS> {
  const parsed = parseDvmSpec(dvm.spec);
  // An invalid spec failed before any phase body ran: nothing was created from it.
  if (!parsed.ok) return undefined;
  const { name, namespace, uid, generation } = dvm.metadata;
  // A refused spec failed before anything was read or created for it, so there is nothing to clean; and
  // its references (another namespace's Secret) are not the DVM's creator's to have followed. When the
  // operator tightened the policy after phases ran, their objects stay on clusters it no longer allows.
  const refused = deps.policy ? policyViolations(namespace, parsed.spec, deps.policy) : [];
  if (refused.length > 0) {
    deps.log.warn("the migration policy refuses the DVM's spec: its references are not followed to clean up", {
      fields: refused.map((v) => v.field),
    });
    return undefined;
  }
  let clusters: MigrationClusters;
  try {
    clusters = await deps.clusters.resolve(namespace, parsed.spec);
  } catch (error) {
    if (!(error instanceof MigrationInputError)) throw error;
    // A Secret deleted and re-created is missing for a moment: wait for it, counted from the deletion.
    const since = Date.parse(dvm.metadata.deletionTimestamp ?? "");
    const graceMs = deps.credentialGraceMs ?? DEFAULT_CREDENTIAL_GRACE_MS;
    if (error instanceof ClusterCredentialsUnavailableError && !(deps.clock.now() - since >= graceMs)) return WAIT_FOR_CREDENTIALS;
    // Its cluster references never resolved (or their Secrets stayed gone): nothing can be reached to clean.
    deps.log.warn("cannot reach the DVM's clusters to remove its transfer objects; releasing it anyway", {
      errors: error.errors,
      left: cleanupLeftCondition(dvm.metadata, parsed.spec, dvm.status, error.message).message,
    });
    return undefined;
  }
  // Source namespaces on the source, target namespaces on the destination: a rollback's objects live in
  // the same places (its clusters and volumes are both swapped), so one direction covers both.
  return {
    dvm: { name, namespace, uid, generation },
    spec: { ...parsed.spec, deleteProgressReportingCRs: true },
    status: dvm.status,
    clusters,
    volumes: volumePairs(parsed.spec, dvm.status, "VolumeMigration"),
    // `dvm cancel` (no policy) acts with its user's own credentials: what they reach, they may restore.
    adminNamespace: deps.policy ? isAdminNamespace(namespace, deps.policy) : true,
    clock: deps.clock,
    log: deps.log,
  };
}

/** Removes DVM_FINALIZER, re-reading on a conflict; a DVM that is already gone is done. */
async function releaseFinalizer(store: DvmStore, dvm: DirectVolumeMigration): Promise<void> {
  await retryOnConflict(async (attempt) => {
    const current = attempt === 1 ? dvm : await store.get(dvm.metadata.namespace, dvm.metadata.name);
    if (!current || current.metadata.uid !== dvm.metadata.uid) return;
    const finalizers = current.metadata.finalizers ?? [];
    if (!finalizers.includes(DVM_FINALIZER)) return;
    try {
      await store.writeFinalizers(
        current,
        finalizers.filter((f) => f !== DVM_FINALIZER),
      );
    } catch (error) {
      if (!(error instanceof KubeApiError && error.isNotFound)) throw error;
    }
  });
}
