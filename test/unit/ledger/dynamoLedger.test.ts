/**
 * DynamoPhaseLedger's own logic with a stub client: what it sends, how it reads a refused condition,
 * and how errors surface. The behaviour against a real DynamoDB is in test/integration/ledger.test.ts.
 */

import { type AttributeValue, ConditionalCheckFailedException, type UpdateItemCommand } from "@aws-sdk/client-dynamodb";
import { describe, expect, it } from "vitest";
import { DynamoPhaseLedger, type LedgerDynamoClient } from "../../../src/aws/ledger";
import { type Claim, LostClaimError, OutcomeTooLargeError } from "../../../src/ledger";
import { InvalidLedgerKeyError, LedgerError, LedgerUnavailableError } from "../../../src/ledger/errors";
import type { LedgerKey } from "../../../src/ledger/types";

type Item = Record<string, AttributeValue>;
type Reply = { output?: object; error?: unknown };

function stubClient(replies: Reply[]) {
  const sent: UpdateItemCommand["input"][] = [];
  const client = {
    send: async (command: { input: UpdateItemCommand["input"] }) => {
      sent.push(command.input);
      const reply = replies.shift() ?? { output: {} };
      if (reply.error) throw reply.error;
      return reply.output;
    },
  } as unknown as LedgerDynamoClient;
  return { client, sent };
}

const NOW = 1_750_000_000_000;
const key: LedgerKey = { uid: "uid-1", phase: "CreateDestinationPVCs", generation: 4 };
const claim: Claim = { key, attempt: 2, leaseExpiresAt: NOW + 1_000, takeover: false };
const refused = (item?: Item) =>
  new ConditionalCheckFailedException({ message: "The conditional request failed", $metadata: { httpStatusCode: 400 }, Item: item });
const throttled = () => Object.assign(new Error("slow down"), { name: "ThrottlingException", $metadata: { httpStatusCode: 400 } });
const num = (value: number) => ({ N: String(value) });

function ledgerOn(replies: Reply[], retryAttempts = 5) {
  const { client, sent } = stubClient(replies);
  const slept: number[] = [];
  const ledger = new DynamoPhaseLedger({
    client,
    tableName: "ledger",
    now: () => NOW,
    newHolderToken: () => "holder-1",
    retry: { attempts: retryAttempts, sleep: async (ms) => void slept.push(ms), random: () => 0.5 },
  });
  return { ledger, sent, slept };
}

describe("DynamoPhaseLedger.claim", () => {
  it("is one conditional UpdateItem on (uid, generation#phase) with the lease, no TTL and the refusing item requested", async () => {
    const { ledger, sent } = ledgerOn([
      { output: { Attributes: { attempt: num(1), leaseExpiresAt: num(NOW + 5_000), takeovers: num(0), takeoversBeforeClaim: num(0) } } },
    ]);
    const result = await ledger.claim(key, { leaseMs: 5_000, dvm: { namespace: "ns", name: "dvm" } });
    expect(result).toEqual({ kind: "claimed", claim: { key, attempt: 1, leaseExpiresAt: NOW + 5_000, takeover: false } });
    expect(sent).toHaveLength(1);
    const input = sent[0]!;
    expect(input.Key).toEqual({ uid: { S: "uid-1" }, phaseKey: { S: "0000000004#CreateDestinationPVCs" } });
    expect(input.ConditionExpression).toBe("attribute_not_exists(#uid) OR (#state <> :completed AND (#state <> :running OR #leaseExpiresAt < :now))");
    expect(input.ReturnValuesOnConditionCheckFailure).toBe("ALL_OLD");
    expect(input.ExpressionAttributeValues).toMatchObject({
      ":now": num(NOW),
      ":leaseExpiresAt": num(NOW + 5_000),
      ":dvm": { M: { namespace: { S: "ns" }, name: { S: "dvm" } } },
    });
    // A live DVM's entry never expires: the claim takes off any TTL an older version wrote.
    expect(input.UpdateExpression).toMatch(/REMOVE #expiresAt$/);
    // Every #name used is declared and nothing else (DynamoDB rejects unused names).
    const used = new Set([...`${input.ConditionExpression} ${input.UpdateExpression}`.matchAll(/#\w+/g)].map((m) => m[0]));
    expect(new Set(Object.keys(input.ExpressionAttributeNames ?? {}))).toEqual(used);
  });

  it("reports a takeover when the write raised the takeover count", async () => {
    const { ledger } = ledgerOn([
      { output: { Attributes: { attempt: num(3), leaseExpiresAt: num(NOW + 5_000), takeovers: num(2), takeoversBeforeClaim: num(1) } } },
    ]);
    expect(await ledger.claim(key, { leaseMs: 5_000 })).toMatchObject({ kind: "claimed", claim: { attempt: 3, takeover: true } });
  });

  it("reads a refusal on a COMPLETED entry as the recorded outcome, without a second request", async () => {
    const { ledger, sent } = ledgerOn([
      {
        error: refused({
          state: { S: "COMPLETED" },
          attempt: num(2),
          outcome: { M: { result: { S: "failed" }, nextPhase: { S: "MigrationFailed" }, finishedAt: num(NOW - 10), errors: { L: [{ S: "no PVCs" }] } } },
        }),
      },
    ]);
    expect(await ledger.claim(key, { leaseMs: 5_000 })).toEqual({
      kind: "completed",
      attempts: 2,
      outcome: { result: "failed", nextPhase: "MigrationFailed", finishedAt: NOW - 10, errors: ["no PVCs"] },
    });
    expect(sent).toHaveLength(1);
  });

  it("reads a refusal on a live lease as held, with the holder's attempt and expiry", async () => {
    const { ledger } = ledgerOn([
      { error: refused({ state: { S: "RUNNING" }, attempt: num(7), leaseExpiresAt: num(NOW + 99), holder: { S: "someone-else" } }) },
    ]);
    expect(await ledger.claim(key, { leaseMs: 5_000 })).toEqual({ kind: "held", attempt: 7, leaseExpiresAt: NOW + 99 });
  });

  it("recognises its own claim when a retried request is refused by the write its first try made", async () => {
    const { ledger, sent, slept } = ledgerOn([
      { error: Object.assign(new Error("socket hang up"), { code: "ECONNRESET" }) },
      {
        error: refused({
          state: { S: "RUNNING" },
          attempt: num(1),
          leaseExpiresAt: num(NOW + 5_000),
          holder: { S: "holder-1" },
          takeovers: num(0),
          takeoversBeforeClaim: num(0),
        }),
      },
    ]);
    expect(await ledger.claim(key, { leaseMs: 5_000 })).toEqual({
      kind: "claimed",
      claim: { key, attempt: 1, leaseExpiresAt: NOW + 5_000, takeover: false },
    });
    expect(sent).toHaveLength(2);
    expect(slept).toEqual([12]);
  });

  it("fails loudly when a refusal carries no item instead of guessing", async () => {
    const { ledger } = ledgerOn([{ error: refused(undefined) }]);
    await expect(ledger.claim(key, { leaseMs: 5_000 })).rejects.toThrow(/returned no item/);
  });

  it("rejects a bad key or lease before sending anything", async () => {
    const { ledger, sent } = ledgerOn([]);
    await expect(ledger.claim({ ...key, phase: "Completed" }, { leaseMs: 5_000 })).rejects.toBeInstanceOf(InvalidLedgerKeyError);
    await expect(ledger.claim(key, { leaseMs: 0 })).rejects.toThrow(/leaseMs/);
    await expect(ledger.claim(key, { leaseMs: Number.NaN })).rejects.toThrow(/leaseMs/);
    expect(sent).toHaveLength(0);
  });

  it("retries throttling, then surfaces LedgerUnavailableError when it never stops", async () => {
    const { ledger, sent, slept } = ledgerOn([{ error: throttled() }, { error: throttled() }, { error: throttled() }], 3);
    const attempt = ledger.claim(key, { leaseMs: 5_000 });
    await expect(attempt).rejects.toBeInstanceOf(LedgerUnavailableError);
    await expect(attempt).rejects.toMatchObject({ attempts: 3 });
    expect(sent).toHaveLength(3);
    expect(slept).toEqual([12, 25]);
  });

  it("wraps a non-transient error in LedgerError with the cause, without retrying", async () => {
    const missing = Object.assign(new Error("Requested resource not found"), { name: "ResourceNotFoundException", $metadata: { httpStatusCode: 400 } });
    const { ledger, sent } = ledgerOn([{ error: missing }]);
    const attempt = ledger.claim(key, { leaseMs: 5_000 });
    await expect(attempt).rejects.toBeInstanceOf(LedgerError);
    await expect(attempt).rejects.toMatchObject({ cause: missing, message: expect.stringContaining("ResourceNotFoundException") });
    expect(sent).toHaveLength(1);
  });
});

describe("DynamoPhaseLedger.complete / fail / release", () => {
  it("complete() is fenced by the claim's attempt and stores the outcome and timings, no TTL", async () => {
    const { ledger, sent } = ledgerOn([{ output: {} }]);
    const record = await ledger.complete(claim, { result: "advanced", nextPhase: "CreateRsyncEndpoint" });
    expect(record).toEqual({ result: "advanced", nextPhase: "CreateRsyncEndpoint", finishedAt: NOW });
    const input = sent[0]!;
    expect(input.ConditionExpression).toBe("#state = :running AND #attempt = :attempt");
    expect(input.ExpressionAttributeValues).toMatchObject({ ":attempt": num(2), ":now": num(NOW) });
    expect(input.UpdateExpression).toContain("#elapsedMs = :now - #startedAt");
    expect(input.UpdateExpression).not.toContain("expiresAt");
  });

  it("complete() throws LostClaimError naming the current holder when fenced out", async () => {
    const { ledger } = ledgerOn([{ error: refused({ state: { S: "RUNNING" }, attempt: num(3), leaseExpiresAt: num(NOW + 1) }) }]);
    const attempt = ledger.complete(claim, { result: "advanced", nextPhase: "CreateRsyncEndpoint" });
    await expect(attempt).rejects.toBeInstanceOf(LostClaimError);
    await expect(attempt).rejects.toMatchObject({ key, attempt: 2, current: { attempt: 3, state: "RUNNING" } });
  });

  it("complete() returns the stored outcome when its own earlier try already completed the entry", async () => {
    const stored = { M: { result: { S: "advanced" }, nextPhase: { S: "CreateRsyncEndpoint" }, finishedAt: num(NOW - 5) } };
    const { ledger } = ledgerOn([{ error: refused({ state: { S: "COMPLETED" }, attempt: num(2), outcome: stored }) }]);
    expect(await ledger.complete(claim, { result: "advanced", nextPhase: "CreateRsyncEndpoint" })).toEqual({
      result: "advanced",
      nextPhase: "CreateRsyncEndpoint",
      finishedAt: NOW - 5,
    });
  });

  it("complete() validates the outcome before writing", async () => {
    const { ledger, sent } = ledgerOn([]);
    await expect(ledger.complete(claim, { result: "done" as never, nextPhase: "CreateRsyncEndpoint" })).rejects.toThrow(/result/);
    await expect(ledger.complete(claim, { result: "advanced", nextPhase: "Nowhere" as never })).rejects.toThrow(/nextPhase/);
    expect(sent).toHaveLength(0);
  });

  it("complete() refuses an outcome too large for a DynamoDB item before sending anything, naming its size", async () => {
    const { ledger, sent } = ledgerOn([]);
    // One error per PVC of a 1,000-PVC DVM at 1 KB each: past the 400 KB item limit.
    const errors = Array.from({ length: 1_000 }, (_, i) => `spec.persistentVolumeClaims[${i}]: ${"e".repeat(1_000)}`);
    const oversize = ledger.complete(claim, { result: "failed", nextPhase: "MigrationFailed", errors });
    await expect(oversize).rejects.toBeInstanceOf(OutcomeTooLargeError);
    await expect(oversize).rejects.toThrow(/the phase's outcome takes \d+ bytes, more than the 350000 a ledger record holds/);
    expect(sent).toHaveLength(0);
    // Within the bound it is written as before.
    await ledger.complete(claim, { result: "failed", nextPhase: "MigrationFailed", errors: errors.slice(0, 100) });
    expect(sent).toHaveLength(1);
  });

  it("release() and fail() drop the lease, count, and are idempotent for their own attempt", async () => {
    const { ledger, sent } = ledgerOn([
      { output: {} },
      { error: refused({ state: { S: "WAITING" }, attempt: num(2) }) },
      { output: {} },
      { error: refused({ state: { S: "RETRYING" }, attempt: num(2) }) },
    ]);
    await ledger.release(claim);
    await ledger.release(claim);
    await ledger.fail(claim, "x".repeat(10_000));
    await ledger.fail(claim, "again");
    expect(sent[0]!.UpdateExpression).toMatch(/#waits = #waits \+ :one/);
    expect(sent[0]!.UpdateExpression).toMatch(/REMOVE #leaseExpiresAt/);
    expect(sent[2]!.UpdateExpression).toMatch(/#failures = #failures \+ :one/);
    const lastError = sent[2]!.ExpressionAttributeValues![":lastError"]!.S!;
    expect(Buffer.byteLength(lastError)).toBeLessThanOrEqual(4_000);
    expect(lastError.endsWith("…")).toBe(true);
  });

  it("release() by a fenced-out attempt throws LostClaimError, also when the entry is gone", async () => {
    const { ledger } = ledgerOn([{ error: refused({ state: { S: "WAITING" }, attempt: num(3) }) }, { error: refused(undefined) }]);
    await expect(ledger.release(claim)).rejects.toMatchObject({ current: { attempt: 3, state: "WAITING" } });
    await expect(ledger.release(claim)).rejects.toMatchObject({ name: "LostClaimError", current: undefined });
  });
});
