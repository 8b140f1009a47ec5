/**
 * A phase is one function from a context to an outcome, as a controller-runtime reconciler is.
 * The runner, not the phase, deals with the ledger, the status write and retries.
 */

import type { PhaseLease } from "../contracts/lease";
import type { ItineraryName, PhaseName } from "../dvm/itinerary";
import type { TransferSettings } from "../dvm/transferPolicy";
import type { Condition, DvmSpec, DvmStatus } from "../dvm/types";
import type { MigrationClusters } from "../kube/cluster";
import type { Clock } from "../lib/clock";
import type { Logger } from "../lib/log";
import type { VolumePair } from "./volumes";

export interface DvmIdentity {
  name: string;
  namespace: string;
  uid: string;
  generation: number;
}

export interface PhaseContext {
  dvm: DvmIdentity;
  spec: DvmSpec;
  /** The status as read fresh at the start of this invocation. */
  status: DvmStatus;
  itinerary: ItineraryName;
  phase: PhaseName;
  clusters: MigrationClusters;
  /** The volumes to move, in transfer direction (already swapped for a rollback). */
  volumes: VolumePair[];
  /** The image of the transfer pods, as the operator's migration policy allows (src/dvm/policy.ts). */
  transferImage: string;
  /** rsync's options, parallelism and resources: spec.transfer within the operator's transfer policy. */
  transfer: TransferSettings;
  /**
   * Whether the DVM lives in an admin namespace (src/dvm/policy.ts); absent: it does not. A tenant's DVM
   * quiesces workloads in its own namespace only.
   */
  adminNamespace?: boolean;
  /** The ledger attempt number of this execution (a fencing token; 1 on the first). */
  attempt: number;
  clock: Clock;
  log: Logger;
  /**
   * The lease this execution holds (absent outside the runner, e.g. the CLI's cleanup). A body that
   * legitimately runs long calls `renew()` between steps; its `signal` aborts at the deadline.
   */
  lease?: PhaseLease;
}

/**
 * What removing a migration's transfer objects needs: the DVM, its spec and status, its clusters and
 * volumes. A DVM's deletion (src/runner/deletion.ts) runs outside any phase and builds only this.
 */
export type CleanupScope = Pick<PhaseContext, "dvm" | "spec" | "status" | "clusters" | "volumes" | "adminNamespace" | "clock" | "log">;

/** Status fields a phase may set; the runner merges them into the status it writes. */
export type StatusUpdate = Partial<
  Pick<
    DvmStatus,
    | "rsyncOperations"
    | "successfulPods"
    | "failedPods"
    | "runningPods"
    | "pendingPods"
    | "unknownPods"
    | "skippedVolumes"
    | "progress"
    | "targetSizes"
    | "selectedPersistentVolumeClaims"
    | "quiescedApplications"
  >
>;

export type PhaseOutcome =
  /**
   * The phase is done; the runner records it and moves the DVM to the next step. Warnings given here are
   * kept past the phase change (durable), recorded with the completion like the status update.
   */
  | { kind: "advance"; status?: StatusUpdate; warnings?: Omit<Condition, "lastTransitionTime">[] }
  /** Not yet: poll again after `afterMs` (or on the next event). Warnings are re-asserted each poll. */
  | { kind: "wait"; reason: string; afterMs?: number; status?: StatusUpdate; warnings?: Omit<Condition, "lastTransitionTime">[] }
  /** The migration cannot succeed: go to the failure itinerary with these errors (each names its subject). */
  | { kind: "fail"; errors: string[]; category?: "Critical" | "Warn"; status?: StatusUpdate; warnings?: Omit<Condition, "lastTransitionTime">[] };

export type PhaseBody = (ctx: PhaseContext) => Promise<PhaseOutcome>;

export const advance = (status?: StatusUpdate): PhaseOutcome => (status ? { kind: "advance", status } : { kind: "advance" });
export const wait = (reason: string, extra: Omit<Extract<PhaseOutcome, { kind: "wait" }>, "kind" | "reason"> = {}): PhaseOutcome => ({
  kind: "wait",
  reason,
  ...extra,
});
