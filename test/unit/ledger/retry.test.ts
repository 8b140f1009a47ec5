import { ConditionalCheckFailedException } from "@aws-sdk/client-dynamodb";
import { describe, expect, it } from "vitest";
import { isTransientDynamoError } from "../../../src/ledger";
import { LedgerUnavailableError } from "../../../src/ledger/errors";
import { backoffDelayMs, DEFAULT_RETRY_POLICY, type RetryPolicy, withTransientRetry } from "../../../src/ledger/retry";

const awsError = (name: string, status?: number) => Object.assign(new Error(name), { name, $metadata: status === undefined ? {} : { httpStatusCode: status } });

describe("isTransientDynamoError", () => {
  it.each([
    "ProvisionedThroughputExceededException",
    "ThrottlingException",
    "RequestLimitExceeded",
    "InternalServerError",
    "ServiceUnavailable",
    "TimeoutError",
  ])("retries %s", (name) => {
    expect(isTransientDynamoError(awsError(name, 400))).toBe(true);
  });

  it("retries any 5xx and 429, whatever the name", () => {
    expect(isTransientDynamoError(awsError("SomethingNew", 503))).toBe(true);
    expect(isTransientDynamoError(awsError("SomethingNew", 500))).toBe(true);
    expect(isTransientDynamoError(awsError("SomethingNew", 429))).toBe(true);
  });

  it("retries dropped connections, also when wrapped", () => {
    expect(isTransientDynamoError(Object.assign(new Error("socket hang up"), { code: "ECONNRESET" }))).toBe(true);
    expect(isTransientDynamoError(Object.assign(new Error("refused"), { code: "ECONNREFUSED" }))).toBe(true);
    expect(isTransientDynamoError(new Error("fetch failed", { cause: Object.assign(new Error("x"), { code: "UND_ERR_SOCKET" }) }))).toBe(true);
  });

  it.each([
    ["ValidationException", 400],
    ["ResourceNotFoundException", 400],
    ["AccessDeniedException", 400],
    ["UnrecognizedClientException", 400],
  ])("does not retry %s", (name, status) => {
    expect(isTransientDynamoError(awsError(name, status))).toBe(false);
  });

  it("never retries a failed condition: it is an answer, not a fault", () => {
    const ccf = new ConditionalCheckFailedException({ message: "The conditional request failed", $metadata: { httpStatusCode: 400 } });
    expect(isTransientDynamoError(ccf)).toBe(false);
    // Even if a proxy dressed it up as a server error.
    expect(isTransientDynamoError(awsError("ConditionalCheckFailedException", 500))).toBe(false);
  });

  it("does not retry things that are not errors", () => {
    expect(isTransientDynamoError(undefined)).toBe(false);
    expect(isTransientDynamoError("ThrottlingException")).toBe(false);
  });
});

describe("backoffDelayMs", () => {
  const policy = { baseDelayMs: 25, maxDelayMs: 1_000 };
  it("doubles the ceiling per retry up to the cap (full jitter below it)", () => {
    const ceiling = (retry: number) => backoffDelayMs(retry, { ...policy, random: () => 0.999999 });
    expect([1, 2, 3, 4, 5, 6, 7, 8].map(ceiling)).toEqual([24, 49, 99, 199, 399, 799, 999, 999]);
    expect(backoffDelayMs(5, { ...policy, random: () => 0 })).toBe(0);
    expect(backoffDelayMs(3, { ...policy, random: () => 0.5 })).toBe(50);
  });
});

describe("withTransientRetry", () => {
  function recordingPolicy(overrides: Partial<RetryPolicy> = {}): RetryPolicy & { slept: number[] } {
    const slept: number[] = [];
    return { ...DEFAULT_RETRY_POLICY, random: () => 0.5, sleep: async (ms) => void slept.push(ms), ...overrides, slept };
  }

  it("retries transient errors with growing delays and returns the first success", async () => {
    const policy = recordingPolicy();
    let calls = 0;
    const result = await withTransientRetry(
      "claim",
      async () => {
        calls++;
        if (calls < 4) throw awsError("ThrottlingException", 400);
        return "ok";
      },
      policy,
    );
    expect(result).toBe("ok");
    expect(calls).toBe(4);
    expect(policy.slept).toEqual([12, 25, 50]);
  });

  it("gives up after the configured attempts with LedgerUnavailableError carrying the last error", async () => {
    const policy = recordingPolicy({ attempts: 3 });
    const last = awsError("ServiceUnavailable", 503);
    let calls = 0;
    const attempt = withTransientRetry(
      "complete u/Started/1",
      async () => {
        calls++;
        throw last;
      },
      policy,
    );
    await expect(attempt).rejects.toBeInstanceOf(LedgerUnavailableError);
    await expect(attempt).rejects.toMatchObject({ attempts: 3, operation: "complete u/Started/1", cause: last });
    expect(calls).toBe(3);
    expect(policy.slept).toHaveLength(2);
  });

  it("rethrows a non-transient error at once, untouched", async () => {
    const policy = recordingPolicy();
    const fatal = awsError("ValidationException", 400);
    let calls = 0;
    await expect(
      withTransientRetry(
        "claim",
        async () => {
          calls++;
          throw fatal;
        },
        policy,
      ),
    ).rejects.toBe(fatal);
    expect(calls).toBe(1);
    expect(policy.slept).toEqual([]);
  });

  it("treats attempts below 1 as a single try", async () => {
    const policy = recordingPolicy({ attempts: 0 });
    await expect(
      withTransientRetry(
        "x",
        async () => {
          throw awsError("ThrottlingException");
        },
        policy,
      ),
    ).rejects.toMatchObject({ attempts: 1 });
  });
});
