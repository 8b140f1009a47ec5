/**
 * The item layout of a ledger entry and its decoding. Written by hand on the low-level client so that
 * every attribute and its type is visible here.
 *
 *   uid (S, partition)  phaseKey (S, sort: "0000000003#Phase")  phase (S)  generation (N)
 *   state (S)  attempt (N, the fencing token)  holder (S, token of the claim call that set `attempt`)
 *   leaseExpiresAt (N ms, only while RUNNING)  startedAt (N ms, first claim)  updatedAt (N ms)
 *   takeovers / waits / failures (N)  settledAttempts (N, = waits + failures, used to count takeovers)
 *   takeoversBeforeClaim (N, takeovers before the current attempt's claim)
 *   finishedAt (N ms)  elapsedMs (N, finishedAt - startedAt)  outcome (M)  lastError (S)  dvm (M)
 *   claims (L of M: at N, attempt N, takeover BOOL, end S, endedAt N; see ClaimRecord)
 *   expiresAt (N, epoch seconds: the TTL attribute; set only once the DVM is gone, see retire())
 * outcome (M): result S, nextPhase S, finishedAt N, errors L of S, statusUpdate S (JSON of the status
 * fields the body decided), category S (of the Failed condition), warnings S (JSON of the conditions it raised)
 */
import type { AttributeValue } from "@aws-sdk/client-dynamodb";
import { z } from "zod";
import { isPhaseName } from "../../dvm/itinerary";
import { ConditionCategorySchema, ConditionSchema, DvmStatusSchema } from "../../dvm/types";
import { LedgerError, OutcomeTooLargeError } from "../../ledger/errors";
import { parsePhaseKey, phaseKeyOf } from "../../ledger/key";
import type { ClaimEnd, ClaimRecord, DvmRef, LedgerEntry, LedgerKey, LedgerState, RecordedOutcome, RecordedOutcomeRecord } from "../../ledger/types";
import { utf8Bytes } from "../../lib/textBounds";

export type Item = Record<string, AttributeValue>;

const STATES: readonly LedgerState[] = ["RUNNING", "WAITING", "RETRYING", "COMPLETED"];

export function itemKey(key: LedgerKey): Item {
  return { uid: { S: key.uid }, phaseKey: { S: phaseKeyOf(key) } };
}

export const s = (value: string): AttributeValue => ({ S: value });
export const n = (value: number): AttributeValue => ({ N: String(value) });

export function encodeDvm(dvm: DvmRef): AttributeValue {
  return { M: { namespace: s(dvm.namespace), name: s(dvm.name) } };
}

export function encodeOutcome(outcome: RecordedOutcomeRecord): AttributeValue {
  const m: Item = { result: s(outcome.result), nextPhase: s(outcome.nextPhase), finishedAt: n(outcome.finishedAt) };
  if (outcome.errors && outcome.errors.length > 0) m.errors = { L: outcome.errors.map(s) };
  if (outcome.statusUpdate && Object.keys(outcome.statusUpdate).length > 0) m.statusUpdate = s(JSON.stringify(outcome.statusUpdate));
  if (outcome.category) m.category = s(outcome.category);
  if (outcome.warnings && outcome.warnings.length > 0) m.warnings = s(JSON.stringify(outcome.warnings));
  return { M: m };
}

/**
 * The most an outcome may take in its item. DynamoDB's limit is 400 KB (409,600 bytes) for the whole
 * item; the rest of it (key, counters, at most MAX_CLAIM_RECORDS + 1 claim records, lastError, the DVM's
 * name) stays below 10 KB. A DVM within the CRD's bounds records at most about 270 KB (src/dvm/limits.ts).
 */
export const MAX_OUTCOME_BYTES = 350_000;

/** DynamoDB's size of an attribute value: UTF-8 bytes of strings and names, about a byte per digit. */
function attributeBytes(value: AttributeValue): number {
  if (value.S !== undefined) return utf8Bytes(value.S);
  if (value.N !== undefined) return value.N.length + 1;
  if (value.BOOL !== undefined || value.NULL !== undefined) return 1;
  if (value.L !== undefined) return 3 + value.L.reduce((sum, v) => sum + 1 + attributeBytes(v), 0);
  if (value.M !== undefined) return 3 + Object.entries(value.M).reduce((sum, [name, v]) => sum + 1 + utf8Bytes(name) + attributeBytes(v), 0);
  return JSON.stringify(value).length;
}

/** Throws OutcomeTooLargeError when the outcome, as stored, would not fit MAX_OUTCOME_BYTES. */
export function checkOutcomeSize(outcome: RecordedOutcomeRecord): void {
  const bytes = attributeBytes(encodeOutcome(outcome));
  if (bytes > MAX_OUTCOME_BYTES) throw new OutcomeTooLargeError(bytes, MAX_OUTCOME_BYTES);
}

export function encodeClaimRecord(record: ClaimRecord): AttributeValue {
  const m: Item = { at: n(record.at) };
  if (record.attempt !== undefined) m.attempt = n(record.attempt);
  if (record.takeover !== undefined) m.takeover = { BOOL: record.takeover };
  if (record.end !== undefined) m.end = s(record.end);
  if (record.endedAt !== undefined) m.endedAt = n(record.endedAt);
  return { M: m };
}

const CLAIM_ENDS: readonly ClaimEnd[] = ["completed", "failed", "waited"];

/** Claim records are informative only: one that does not read is skipped rather than failing history(). */
export function readClaimRecords(item: Item): ClaimRecord[] | undefined {
  const list = item.claims?.L;
  if (!list) return undefined;
  return list.flatMap((value): ClaimRecord[] => {
    const m = value.M;
    const at = Number(m?.at?.N);
    if (!m || !Number.isFinite(at)) return [];
    const record: ClaimRecord = { at };
    if (m.attempt?.N !== undefined) record.attempt = Number(m.attempt.N);
    if (m.takeover?.BOOL !== undefined) record.takeover = m.takeover.BOOL;
    if (CLAIM_ENDS.includes(m.end?.S as ClaimEnd)) record.end = m.end!.S as ClaimEnd;
    if (m.endedAt?.N !== undefined) record.endedAt = Number(m.endedAt.N);
    return [record];
  });
}

function malformed(item: Item, why: string): LedgerError {
  return new LedgerError(`malformed ledger item ${item.uid?.S ?? "?"}/${item.phaseKey?.S ?? "?"}: ${why}`);
}

export function readString(item: Item, name: string): string | undefined {
  return item[name]?.S;
}

export function readNumber(item: Item, name: string): number | undefined {
  const raw = item[name]?.N;
  return raw === undefined ? undefined : Number(raw);
}

function requireNumber(item: Item, name: string): number {
  const value = readNumber(item, name);
  if (value === undefined || Number.isNaN(value)) throw malformed(item, `${name} is missing`);
  return value;
}

export function readState(item: Item): LedgerState {
  const state = readString(item, "state");
  if (!STATES.includes(state as LedgerState)) throw malformed(item, `state ${JSON.stringify(state)}`);
  return state as LedgerState;
}

export function readAttempt(item: Item): number {
  return requireNumber(item, "attempt");
}

export function readLeaseExpiresAt(item: Item): number {
  return readNumber(item, "leaseExpiresAt") ?? 0;
}

export function readOutcome(item: Item): RecordedOutcomeRecord | undefined {
  const m = item.outcome?.M;
  if (!m) return undefined;
  const result = m.result?.S;
  const nextPhase = m.nextPhase?.S;
  if ((result !== "advanced" && result !== "failed") || !isPhaseName(nextPhase)) {
    throw malformed(item, "outcome has no valid result and nextPhase");
  }
  const record: RecordedOutcomeRecord = { result, nextPhase, finishedAt: Number(m.finishedAt?.N ?? 0) };
  const errors = m.errors?.L?.flatMap((e) => (e.S === undefined ? [] : [e.S]));
  if (errors && errors.length > 0) record.errors = errors;
  if (m.statusUpdate?.S !== undefined) record.statusUpdate = readJson(item, "outcome.statusUpdate", m.statusUpdate.S, StatusUpdateSchema);
  if (m.warnings?.S !== undefined) record.warnings = readJson(item, "outcome.warnings", m.warnings.S, WarningsSchema);
  if (m.category?.S !== undefined) {
    const category = ConditionCategorySchema.safeParse(m.category.S);
    if (!category.success) throw malformed(item, `outcome.category ${JSON.stringify(m.category.S)}`);
    record.category = category.data;
  }
  return record;
}

const StatusUpdateSchema = DvmStatusSchema.partial();
const WarningsSchema = z.array(ConditionSchema.omit({ lastTransitionTime: true }));

/** What a completion recorded is replayed into the DVM's status, so it is checked as strictly as a status read. */
function readJson<T>(item: Item, field: string, json: string, schema: z.ZodType<T>): T {
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch {
    throw malformed(item, `${field} is not JSON`);
  }
  const parsed = schema.safeParse(raw);
  if (!parsed.success) throw malformed(item, `${field}: ${parsed.error.issues[0]?.message ?? "invalid"}`);
  return parsed.data;
}

export function decodeEntry(item: Item): LedgerEntry {
  const uid = readString(item, "uid");
  const parsed = parsePhaseKey(readString(item, "phaseKey") ?? "");
  if (!uid || !parsed) throw malformed(item, "key does not parse");
  const entry: LedgerEntry = {
    key: { uid, phase: parsed.phase, generation: parsed.generation },
    state: readState(item),
    attempts: readAttempt(item),
    takeovers: readNumber(item, "takeovers") ?? 0,
    waits: readNumber(item, "waits") ?? 0,
    failures: readNumber(item, "failures") ?? 0,
    startedAt: requireNumber(item, "startedAt"),
  };
  if (entry.state === "RUNNING") entry.leaseExpiresAt = readLeaseExpiresAt(item);
  const finishedAt = readNumber(item, "finishedAt");
  if (finishedAt !== undefined) entry.finishedAt = finishedAt;
  const elapsedMs = readNumber(item, "elapsedMs");
  if (elapsedMs !== undefined) entry.elapsedSeconds = elapsedMs / 1000;
  const outcome = readOutcome(item);
  if (outcome) entry.outcome = outcome;
  const lastError = readString(item, "lastError");
  if (lastError !== undefined) entry.lastError = lastError;
  const dvm = item.dvm?.M;
  if (dvm?.namespace?.S !== undefined && dvm.name?.S !== undefined) {
    entry.dvm = { namespace: dvm.namespace.S, name: dvm.name.S };
  }
  const claims = readClaimRecords(item);
  if (claims) entry.claims = claims;
  return entry;
}

/** Checks a phase body's outcome before it is recorded, naming the bad field. */
export function validateOutcome(outcome: RecordedOutcome): RecordedOutcome {
  if (outcome.result !== "advanced" && outcome.result !== "failed") {
    throw new LedgerError(`invalid phase outcome: result must be "advanced" or "failed" (got ${JSON.stringify(outcome.result)})`);
  }
  if (!isPhaseName(outcome.nextPhase)) {
    throw new LedgerError(`invalid phase outcome: nextPhase ${JSON.stringify(outcome.nextPhase)} is not a phase`);
  }
  if (outcome.errors !== undefined && (!Array.isArray(outcome.errors) || outcome.errors.some((e) => typeof e !== "string"))) {
    throw new LedgerError("invalid phase outcome: errors must be a list of strings");
  }
  if (outcome.warnings !== undefined && !WarningsSchema.safeParse(outcome.warnings).success) {
    throw new LedgerError("invalid phase outcome: warnings must be conditions");
  }
  if (outcome.statusUpdate !== undefined && !StatusUpdateSchema.safeParse(outcome.statusUpdate).success) {
    throw new LedgerError("invalid phase outcome: statusUpdate is not a valid part of a DVM status");
  }
  if (outcome.category !== undefined && !ConditionCategorySchema.safeParse(outcome.category).success) {
    throw new LedgerError(`invalid phase outcome: category ${JSON.stringify(outcome.category)} is not a condition category`);
  }
  return outcome;
}
