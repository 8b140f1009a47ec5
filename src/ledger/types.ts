/**
 * The phase ledger: one entry per (DVM uid, phase, generation). A phase completes at most once per
 * entry; the runner claims the entry before it runs a phase body and records the outcome with the
 * claim's attempt number as a fencing token.
 */
import type { PhaseName } from "../dvm/itinerary";
import type { Condition, ConditionCategory, DvmStatus } from "../dvm/types";

export interface LedgerKey {
  uid: string;
  phase: PhaseName;
  generation: number;
}

export interface DvmRef {
  namespace: string;
  name: string;
}

/** Held by one invocation while it runs a phase body; `attempt` is the fencing token. */
export interface Claim {
  key: LedgerKey;
  attempt: number;
  leaseExpiresAt: number;
  /** The previous holder's lease had expired while it was RUNNING (it crashed or stalled). */
  takeover: boolean;
}

/** "failed" means the migration fails and continues on the failure itinerary. */
export type PhaseResult = "advanced" | "failed";

export interface RecordedOutcome {
  result: PhaseResult;
  nextPhase: PhaseName;
  errors?: string[];
  /**
   * The status fields the body decided (per-PVC results, pod lists), recorded with the completion so a
   * repair after a crash before the status write re-applies exactly what the body decided.
   */
  statusUpdate?: Partial<DvmStatus>;
  /** The category of the Failed condition when result is "failed" (default Critical). */
  category?: ConditionCategory;
  /** Conditions the body raised with its outcome (e.g. files vanished), set durable by the transition. */
  warnings?: Omit<Condition, "lastTransitionTime">[];
}

export interface RecordedOutcomeRecord extends RecordedOutcome {
  finishedAt: number;
}

export type ClaimResult =
  | { kind: "claimed"; claim: Claim }
  /** The phase already completed for this generation: apply the recorded outcome, do not run it again. */
  | { kind: "completed"; outcome: RecordedOutcomeRecord; attempts: number }
  /** Another invocation holds a live lease: stop, it will finish or its lease will expire. */
  | { kind: "held"; attempt: number; leaseExpiresAt: number };

export type LedgerState = "RUNNING" | "WAITING" | "RETRYING" | "COMPLETED";

/**
 * One claim of an entry, kept so a timeline can draw one bar per execution. Appended by the claim write
 * itself; the write that ends the attempt fills in how it ended, or drops the record when it only adds
 * noise (a later poll of a wait phase that just waited, failures beyond the first MAX_CLAIM_RECORDS).
 * A record with no `end` that is not the last one is an attempt that crashed and was taken over.
 */
export interface ClaimRecord {
  /** Claim time, ms since the epoch. */
  at: number;
  attempt?: number;
  takeover?: boolean;
  end?: ClaimEnd;
  endedAt?: number;
}

export type ClaimEnd = "completed" | "failed" | "waited";

export interface LedgerEntry {
  key: LedgerKey;
  state: LedgerState;
  attempts: number;
  takeovers: number;
  waits: number;
  failures: number;
  startedAt: number;
  finishedAt?: number;
  elapsedSeconds?: number;
  outcome?: RecordedOutcomeRecord;
  lastError?: string;
  dvm?: DvmRef;
  /** While RUNNING: when the holder's lease ends (after that, another invocation may take over). */
  leaseExpiresAt?: number;
  /** The claims worth drawing, oldest first (see ClaimRecord); absent on entries written before they existed. */
  claims?: ClaimRecord[];
}

export interface ClaimOptions {
  /** How long the claim stays exclusive; after that another invocation may take over. */
  leaseMs: number;
  dvm?: DvmRef;
}

export interface PhaseLedger {
  claim(key: LedgerKey, opts: ClaimOptions): Promise<ClaimResult>;
  complete(claim: Claim, outcome: RecordedOutcome): Promise<RecordedOutcomeRecord>;
  /**
   * Heartbeat: extends the lease of a claim still held by this attempt to now + leaseMs and returns the
   * new expiry. Throws LostClaimError when the attempt no longer holds the entry (taken over, settled).
   */
  renew(claim: Claim, leaseMs: number): Promise<number>;
  /** The attempt failed with a transient error: record it, drop the lease, entry stays claimable. */
  fail(claim: Claim, error: string): Promise<void>;
  /** A wait phase said "not yet": drop the lease, entry stays claimable (counts a wait). */
  release(claim: Claim): Promise<void>;
  /** All entries of one DVM, oldest first. */
  history(uid: string): Promise<LedgerEntry[]>;
  /**
   * Entries never expire while their DVM exists. retire() starts the retention period of every entry of
   * a DVM that is gone (called by the deletion path once nothing of it runs any more).
   */
  retire(uid: string): Promise<void>;
}
