/**
 * The phase ledger on DynamoDB. Exactly-once completion rests on two conditional writes per phase:
 * claim() takes the entry unless it is COMPLETED or held by a live lease, and complete() succeeds only
 * for the attempt that holds it (the attempt number is the fencing token). No read decides anything:
 * a refused write returns the item that refused it (ReturnValuesOnConditionCheckFailure).
 */

import { randomUUID } from "node:crypto";
import { ConditionalCheckFailedException, QueryCommand, UpdateItemCommand, type UpdateItemCommandInput } from "@aws-sdk/client-dynamodb";
import { LedgerError, LostClaimError } from "../../ledger/errors";
import { validateLedgerKey, validateUid } from "../../ledger/key";
import { DEFAULT_RETRY_POLICY, type RetryPolicy, withTransientRetry } from "../../ledger/retry";
import type {
  Claim,
  ClaimEnd,
  ClaimOptions,
  ClaimResult,
  LedgerEntry,
  LedgerKey,
  LedgerState,
  PhaseLedger,
  RecordedOutcome,
  RecordedOutcomeRecord,
} from "../../ledger/types";
import { errorMessage } from "../../lib/errorMessage";
import { truncateUtf8 } from "../../lib/textBounds";
import type { LedgerDynamoClient } from "./client";
import {
  checkOutcomeSize,
  decodeEntry,
  encodeClaimRecord,
  encodeDvm,
  encodeOutcome,
  type Item,
  itemKey,
  n,
  readAttempt,
  readClaimRecords,
  readLeaseExpiresAt,
  readNumber,
  readOutcome,
  readState,
  readString,
  s,
  validateOutcome,
} from "./codec";

export const DEFAULT_RETENTION_DAYS = 30;
/** lastError is for humans; the cap keeps a huge stack trace from hitting the 400 KB item limit. */
const MAX_ERROR_BYTES = 4_000;
/**
 * Failed attempts past this many keep their counters but not their claim record, so a phase that fails
 * for days cannot grow its item towards the 400 KB limit.
 */
export const MAX_CLAIM_RECORDS = 20;

export interface DynamoLedgerOptions {
  client: LedgerDynamoClient;
  tableName: string;
  /** Milliseconds since the epoch; drives leases and timings. Default Date.now. */
  now?: () => number;
  /** How long entries live once their DVM is gone (retire() sets the TTL attribute expiresAt). Default 30 days. */
  retentionDays?: number;
  /** Backoff for transient DynamoDB errors. Default: 5 tries, 25 ms base, 1 s cap, full jitter. */
  retry?: Partial<RetryPolicy>;
  /** Identifies one claim() call, so a retried claim whose first try succeeded recognises itself. */
  newHolderToken?: () => string;
}

interface Write {
  condition: string;
  update: string;
  values: Item;
  returnValues?: UpdateItemCommandInput["ReturnValues"];
}

/** Where a claim's ClaimRecord sits in the entry's `claims` list, and its claim time. */
interface ClaimRecordRef {
  index: number;
  at: number;
}

type WriteResult = { ok: true; attributes: Item | undefined } | { ok: false; current: Item | undefined };

export class DynamoPhaseLedger implements PhaseLedger {
  private readonly client: LedgerDynamoClient;
  private readonly tableName: string;
  private readonly now: () => number;
  private readonly retentionSeconds: number;
  private readonly retry: RetryPolicy;
  private readonly newHolderToken: () => string;
  /**
   * The claim records of the claims this ledger handed out, so the write that ends an attempt can settle
   * its record by index. Kept beside the Claim (not in it) because Claim is a value callers compare; a
   * claim ended by another ledger instance just leaves its record without an end.
   */
  private readonly claimRecords = new WeakMap<Claim, ClaimRecordRef>();

  constructor(options: DynamoLedgerOptions) {
    if (!options.tableName) throw new LedgerError("DynamoPhaseLedger needs a tableName");
    const retentionDays = options.retentionDays ?? DEFAULT_RETENTION_DAYS;
    if (!(retentionDays > 0)) throw new LedgerError(`retentionDays must be positive (got ${retentionDays})`);
    this.client = options.client;
    this.tableName = options.tableName;
    this.now = options.now ?? Date.now;
    this.retentionSeconds = Math.round(retentionDays * 86_400);
    this.retry = { ...DEFAULT_RETRY_POLICY, ...options.retry };
    this.newHolderToken = options.newHolderToken ?? randomUUID;
  }

  async claim(rawKey: LedgerKey, opts: ClaimOptions): Promise<ClaimResult> {
    const key = validateLedgerKey(rawKey);
    if (!Number.isFinite(opts.leaseMs) || opts.leaseMs <= 0) {
      throw new LedgerError(`claim ${describeKey(key)}: leaseMs must be a positive number (got ${opts.leaseMs})`);
    }
    const now = this.now();
    const holder = this.newHolderToken();
    const values: Item = {
      ":running": s("RUNNING"),
      ":completed": s("COMPLETED"),
      ":now": n(now),
      ":zero": n(0),
      ":one": n(1),
      ":leaseExpiresAt": n(now + opts.leaseMs),
      ":holder": s(holder),
      ":phase": s(key.phase),
      ":generation": n(key.generation),
    };
    let update =
      "SET #state = :running, #attempt = if_not_exists(#attempt, :zero) + :one, #holder = :holder," +
      " #leaseExpiresAt = :leaseExpiresAt, #startedAt = if_not_exists(#startedAt, :now)," +
      // All operands see the item as it was before this write, so `attempt - settledAttempts` is the
      // number of earlier attempts that neither waited nor failed: the ones taken over, this one included
      // if it takes over. That keeps the takeover count exact inside this single write.
      " #takeoversBeforeClaim = if_not_exists(#takeovers, :zero)," +
      " #takeovers = if_not_exists(#attempt, :zero) - if_not_exists(#settledAttempts, :zero)," +
      " #settledAttempts = if_not_exists(#settledAttempts, :zero), #waits = if_not_exists(#waits, :zero)," +
      " #failures = if_not_exists(#failures, :zero), #phase = :phase, #generation = :generation," +
      " #updatedAt = :now," +
      // The claim's own record, for timelines; the write that ends this attempt completes or drops it.
      " #claims = list_append(if_not_exists(#claims, :noClaims), :claimRecord)";
    values[":noClaims"] = { L: [] };
    values[":claimRecord"] = { L: [encodeClaimRecord({ at: now })] };
    if (opts.dvm) {
      update += ", #dvm = :dvm";
      values[":dvm"] = encodeDvm(opts.dvm);
    }
    // A live DVM's entries never expire (retire() starts their retention once it is gone).
    update += " REMOVE #expiresAt";
    const result = await this.write("claim", key, {
      condition: "attribute_not_exists(#uid) OR (#state <> :completed AND (#state <> :running OR #leaseExpiresAt < :now))",
      update,
      values,
      returnValues: "ALL_NEW",
    });
    const claimed = result.ok ? { kind: "claimed" as const, claim: claimFromItem(key, result.attributes) } : lostClaimRace(key, holder, result.current);
    if (claimed.kind === "claimed") {
      const ref = ownClaimRecord(result.ok ? result.attributes : result.current);
      if (ref) this.claimRecords.set(claimed.claim, ref);
    }
    return claimed;
  }

  async complete(claim: Claim, outcome: RecordedOutcome): Promise<RecordedOutcomeRecord> {
    const key = validateLedgerKey(claim.key);
    validateOutcome(outcome);
    const now = this.now();
    const record: RecordedOutcomeRecord = { result: outcome.result, nextPhase: outcome.nextPhase, finishedAt: now };
    if (outcome.errors && outcome.errors.length > 0) record.errors = [...outcome.errors];
    if (outcome.statusUpdate && Object.keys(outcome.statusUpdate).length > 0) record.statusUpdate = outcome.statusUpdate;
    if (outcome.category) record.category = outcome.category;
    if (outcome.warnings && outcome.warnings.length > 0) record.warnings = outcome.warnings;
    // Before the write: DynamoDB would refuse an oversize item with an error no retry can fix.
    checkOutcomeSize(record);
    const ending = endClaimRecord(claim, this.claimRecords.get(claim), "completed", now);
    const result = await this.write("complete", key, {
      condition: "#state = :running AND #attempt = :attempt",
      update:
        "SET #state = :completed, #finishedAt = :now, #elapsedMs = :now - #startedAt, #outcome = :outcome," +
        ` #updatedAt = :now${ending.set} REMOVE #leaseExpiresAt${ending.remove}`,
      values: {
        ":running": s("RUNNING"),
        ":completed": s("COMPLETED"),
        ":attempt": n(claim.attempt),
        ":now": n(now),
        ":outcome": encodeOutcome(record),
        ...ending.values,
      },
    });
    if (result.ok) return record;
    // Our own earlier try went through but its answer was lost: COMPLETED by this very attempt.
    const current = result.current;
    if (current && readState(current) === "COMPLETED" && readAttempt(current) === claim.attempt) {
      return readOutcome(current) ?? record;
    }
    throw lostClaim(key, claim.attempt, current);
  }

  async renew(claim: Claim, leaseMs: number): Promise<number> {
    const key = validateLedgerKey(claim.key);
    if (!Number.isFinite(leaseMs) || leaseMs <= 0) throw new LedgerError(`renew ${describeKey(key)}: leaseMs must be a positive number (got ${leaseMs})`);
    const now = this.now();
    const leaseExpiresAt = now + leaseMs;
    // The attempt number is the fencing token: a renewal after a takeover is refused, never applied.
    // Retrying a renewal whose first try went through is harmless (same condition, a later expiry).
    const result = await this.write("renew", key, {
      condition: "#state = :running AND #attempt = :attempt",
      update: "SET #leaseExpiresAt = :leaseExpiresAt, #updatedAt = :now",
      values: { ":running": s("RUNNING"), ":attempt": n(claim.attempt), ":leaseExpiresAt": n(leaseExpiresAt), ":now": n(now) },
    });
    if (!result.ok) throw lostClaim(key, claim.attempt, result.current);
    return leaseExpiresAt;
  }

  async retire(rawUid: string): Promise<void> {
    const expiresAt = this.expiresAt(this.now());
    await this.setExpiry(rawUid, "retire", "SET #expiresAt = :expiresAt", { ":expiresAt": n(expiresAt) });
  }

  /** One unconditional update of every entry of a DVM (only the TTL attribute changes). */
  private async setExpiry(rawUid: string, operation: string, update: string, values: Item): Promise<void> {
    for (const entry of await this.history(rawUid)) {
      await this.send(operation, describeKey(entry.key), () =>
        this.client.send(
          new UpdateItemCommand({
            TableName: this.tableName,
            Key: itemKey(entry.key),
            // Only existing items: an entry removed meanwhile must not come back as a stub.
            ConditionExpression: "attribute_exists(#uid)",
            UpdateExpression: update,
            ExpressionAttributeNames: attributeNames("#uid", update),
            ...(Object.keys(values).length > 0 ? { ExpressionAttributeValues: values } : {}),
          }),
        ),
      ).catch((error: unknown) => {
        if (!isConditionalCheckFailed(error)) throw error;
      });
    }
  }

  async fail(claim: Claim, error: string): Promise<void> {
    const message = truncateUtf8(String(error), MAX_ERROR_BYTES);
    await this.endAttempt(claim, "RETRYING", "#failures = #failures + :one, #lastError = :lastError", {
      ":lastError": s(message || "(no message)"),
    });
  }

  async release(claim: Claim): Promise<void> {
    await this.endAttempt(claim, "WAITING", "#waits = #waits + :one", {});
  }

  async history(rawUid: string): Promise<LedgerEntry[]> {
    const uid = validateUid(rawUid);
    const entries: LedgerEntry[] = [];
    let startKey: Item | undefined;
    do {
      const page = await this.send("history", uid, () =>
        this.client.send(
          new QueryCommand({
            TableName: this.tableName,
            KeyConditionExpression: "#uid = :uid",
            ExpressionAttributeNames: { "#uid": "uid" },
            ExpressionAttributeValues: { ":uid": s(uid) },
            ConsistentRead: true,
            ExclusiveStartKey: startKey,
          }),
        ),
      );
      for (const item of page.Items ?? []) entries.push(decodeEntry(item));
      startKey = page.LastEvaluatedKey;
    } while (startKey);
    // Sort key order is (generation, phase name); the story of a migration is the order phases started.
    return entries.sort((a, b) => a.startedAt - b.startedAt || a.key.generation - b.key.generation || a.key.phase.localeCompare(b.key.phase));
  }

  /** Drops the lease and leaves the entry claimable, counting why (a wait or a failure). */
  private async endAttempt(claim: Claim, state: "WAITING" | "RETRYING", counters: string, extraValues: Item): Promise<void> {
    const key = validateLedgerKey(claim.key);
    const now = this.now();
    const ending = endClaimRecord(claim, this.claimRecords.get(claim), state === "WAITING" ? "waited" : "failed", now);
    const result = await this.write(state === "WAITING" ? "release" : "fail", key, {
      condition: "#state = :running AND #attempt = :attempt",
      update:
        `SET #state = :state, ${counters}, #settledAttempts = #settledAttempts + :one,` +
        ` #updatedAt = :now${ending.set} REMOVE #leaseExpiresAt${ending.remove}`,
      values: {
        ":running": s("RUNNING"),
        ":state": s(state),
        ":attempt": n(claim.attempt),
        ":one": n(1),
        ":now": n(now),
        ...extraValues,
        ...ending.values,
      },
    });
    if (result.ok) return;
    // Already settled by this attempt (a retried write whose first try went through): nothing to do.
    const current = result.current;
    if (current && readState(current) === state && readAttempt(current) === claim.attempt) return;
    throw lostClaim(key, claim.attempt, current);
  }

  /** One conditional UpdateItem; a refused condition is a result, every other error is thrown. */
  private async write(operation: string, key: LedgerKey, write: Write): Promise<WriteResult> {
    try {
      const output = await this.send(operation, describeKey(key), () =>
        this.client.send(
          new UpdateItemCommand({
            TableName: this.tableName,
            Key: itemKey(key),
            ConditionExpression: write.condition,
            UpdateExpression: write.update,
            ExpressionAttributeNames: attributeNames(write.condition, write.update),
            ExpressionAttributeValues: write.values,
            ReturnValues: write.returnValues ?? "NONE",
            ReturnValuesOnConditionCheckFailure: "ALL_OLD",
          }),
        ),
      );
      return { ok: true, attributes: output.Attributes };
    } catch (error) {
      if (isConditionalCheckFailed(error)) return { ok: false, current: error.Item };
      throw error;
    }
  }

  /** Retries transient errors; wraps anything else that is not already a LedgerError. */
  private async send<T>(operation: string, subject: string, request: () => Promise<T>): Promise<T> {
    try {
      return await withTransientRetry(`${operation} ${subject}`, request, this.retry);
    } catch (error) {
      if (error instanceof LedgerError || isConditionalCheckFailed(error)) throw error;
      throw new LedgerError(`ledger ${operation} ${subject} failed: ${errorMessage(error)}`, { cause: error });
    }
  }

  private expiresAt(now: number): number {
    return Math.floor(now / 1000) + this.retentionSeconds;
  }
}

function claimFromItem(key: LedgerKey, item: Item | undefined): Claim {
  if (!item) throw new LedgerError(`claim ${describeKey(key)}: DynamoDB returned no attributes`);
  return {
    key,
    attempt: readAttempt(item),
    leaseExpiresAt: readLeaseExpiresAt(item),
    takeover: (readNumber(item, "takeovers") ?? 0) > (readNumber(item, "takeoversBeforeClaim") ?? 0),
  };
}

/** The claim write appended its record last; nothing else appends while this attempt holds the entry. */
function ownClaimRecord(item: Item | undefined): ClaimRecordRef | undefined {
  const records = item ? readClaimRecords(item) : undefined;
  const own = records?.[records.length - 1];
  return records && own ? { index: records.length - 1, at: own.at } : undefined;
}

/**
 * The part of an ending write that settles the attempt's claim record: filled in with how it ended, or
 * removed when it adds nothing to a timeline (a later poll that only waited) or would grow the list past
 * MAX_CLAIM_RECORDS (failures). The write's condition (state RUNNING, same attempt) guarantees the list
 * has not changed since the claim, so the index is still right.
 */
function endClaimRecord(claim: Claim, record: ClaimRecordRef | undefined, end: ClaimEnd, now: number): { set: string; remove: string; values: Item } {
  if (!record || !Number.isInteger(record.index) || record.index < 0) return { set: "", remove: "", values: {} };
  const path = `#claims[${record.index}]`;
  const drop = (end === "waited" && record.index > 0) || (end === "failed" && record.index >= MAX_CLAIM_RECORDS);
  if (drop) return { set: "", remove: `, ${path}`, values: {} };
  return {
    set: `, ${path} = :endedClaim`,
    remove: "",
    values: { ":endedClaim": encodeClaimRecord({ at: record.at, attempt: claim.attempt, takeover: claim.takeover, end, endedAt: now }) },
  };
}

/** Reads the refusing item: completed, held by someone else, or held by this very call (a retry). */
function lostClaimRace(key: LedgerKey, holder: string, current: Item | undefined): ClaimResult {
  if (!current) {
    // Only an absent item passes the condition unconditionally, so a refusal always carries one.
    throw new LedgerError(`claim ${describeKey(key)} was refused but DynamoDB returned no item (ReturnValuesOnConditionCheckFailure unsupported?)`);
  }
  const state = readState(current);
  if (state === "COMPLETED") {
    const outcome = readOutcome(current);
    if (!outcome) throw new LedgerError(`claim ${describeKey(key)}: COMPLETED entry has no outcome`);
    return { kind: "completed", outcome, attempts: readAttempt(current) };
  }
  if (state === "RUNNING" && readString(current, "holder") === holder) {
    return { kind: "claimed", claim: claimFromItem(key, current) };
  }
  if (state === "RUNNING") {
    return { kind: "held", attempt: readAttempt(current), leaseExpiresAt: readLeaseExpiresAt(current) };
  }
  throw new LedgerError(`claim ${describeKey(key)} was refused while the entry is ${state}`);
}

function lostClaim(key: LedgerKey, attempt: number, current: Item | undefined): LostClaimError {
  const now: { attempt: number; state: LedgerState } | undefined = current ? { attempt: readAttempt(current), state: readState(current) } : undefined;
  return new LostClaimError(key, attempt, now);
}

function isConditionalCheckFailed(error: unknown): error is ConditionalCheckFailedException {
  return (
    error instanceof ConditionalCheckFailedException ||
    (typeof error === "object" && error !== null && (error as { name?: unknown }).name === "ConditionalCheckFailedException")
  );
}

/** Every attribute goes through a #name so no DynamoDB reserved word (state, name...) can bite. */
function attributeNames(...expressions: string[]): Record<string, string> {
  const names: Record<string, string> = {};
  for (const expression of expressions) {
    for (const [, name] of expression.matchAll(/#(\w+)/g)) names[`#${name}`] = name!;
  }
  return names;
}

function describeKey(key: LedgerKey): string {
  return `${key.uid}/${key.phase}/${key.generation}`;
}
