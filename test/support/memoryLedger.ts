/**
 * In-memory PhaseLedger with the same conditional semantics as the DynamoDB one, for unit tests of the
 * runner's decisions. Both pass the same contract suite (test/support/ledgerContract.ts).
 */

import { checkOutcomeSize } from "../../src/aws/ledger/codec";
import type { Claim, ClaimResult, LedgerEntry, PhaseLedger, RecordedOutcome } from "../../src/ledger";
import { LostClaimError } from "../../src/ledger";
import type { ClaimOptions, LedgerKey, RecordedOutcomeRecord } from "../../src/ledger/types";

const keyOf = (k: LedgerKey) => `${k.uid}|${k.generation}|${k.phase}`;

export class MemoryLedger implements PhaseLedger {
  /** `entries`: another MemoryLedger's, for a second view of the same store on another clock. */
  constructor(
    private readonly now: () => number = Date.now,
    readonly entries = new Map<string, LedgerEntry & { leaseExpiresAt: number; expiresAt?: number }>(),
  ) {}

  async claim(key: LedgerKey, opts: ClaimOptions): Promise<ClaimResult> {
    const now = this.now();
    const entry = this.entries.get(keyOf(key));
    if (entry?.state === "COMPLETED") return { kind: "completed", outcome: entry.outcome!, attempts: entry.attempts };
    if (entry?.state === "RUNNING" && entry.leaseExpiresAt >= now) return { kind: "held", attempt: entry.attempts, leaseExpiresAt: entry.leaseExpiresAt };
    const takeover = entry?.state === "RUNNING";
    const next: LedgerEntry & { leaseExpiresAt: number } = {
      key,
      state: "RUNNING" as const,
      attempts: (entry?.attempts ?? 0) + 1,
      takeovers: (entry?.takeovers ?? 0) + (takeover ? 1 : 0),
      waits: entry?.waits ?? 0,
      failures: entry?.failures ?? 0,
      startedAt: entry?.startedAt ?? now,
      leaseExpiresAt: now + opts.leaseMs,
      ...(opts.dvm ? { dvm: opts.dvm } : {}),
    };
    this.entries.set(keyOf(key), next);
    return { kind: "claimed", claim: { key, attempt: next.attempts, leaseExpiresAt: next.leaseExpiresAt, takeover } };
  }

  private held(claim: Claim) {
    const entry = this.entries.get(keyOf(claim.key));
    if (entry?.state !== "RUNNING" || entry.attempts !== claim.attempt) {
      throw new LostClaimError(claim.key, claim.attempt, entry ? { attempt: entry.attempts, state: entry.state } : undefined);
    }
    return entry;
  }

  async complete(claim: Claim, outcome: RecordedOutcome): Promise<RecordedOutcomeRecord> {
    const entry = this.held(claim);
    const finishedAt = this.now();
    const record = { ...outcome, finishedAt };
    // As the DynamoDB ledger: an outcome too large for an item is refused before anything is written.
    checkOutcomeSize(record);
    Object.assign(entry, { state: "COMPLETED", outcome: record, finishedAt, elapsedSeconds: (finishedAt - entry.startedAt) / 1000 });
    return record;
  }

  async renew(claim: Claim, leaseMs: number): Promise<number> {
    const entry = this.held(claim);
    entry.leaseExpiresAt = this.now() + leaseMs;
    return entry.leaseExpiresAt;
  }

  async retire(uid: string): Promise<void> {
    for (const entry of this.entries.values()) if (entry.key.uid === uid) entry.expiresAt = this.now() + 30 * 86_400_000;
  }

  async fail(claim: Claim, error: string): Promise<void> {
    const entry = this.held(claim);
    Object.assign(entry, { state: "RETRYING", failures: entry.failures + 1, lastError: error, leaseExpiresAt: 0 });
  }

  async release(claim: Claim): Promise<void> {
    const entry = this.held(claim);
    Object.assign(entry, { state: "WAITING", waits: entry.waits + 1, leaseExpiresAt: 0 });
  }

  async history(uid: string): Promise<LedgerEntry[]> {
    return [...this.entries.values()].filter((e) => e.key.uid === uid).sort((a, b) => a.startedAt - b.startedAt);
  }
}
