/**
 * The phase ledger against a real DynamoDB (DynamoDB Local unless AWS_ENDPOINT_URL* points elsewhere).
 * Time is an injected clock, so lease expiry is exact and no test sleeps.
 */

import { DescribeTimeToLiveCommand, GetItemCommand, ScanCommand } from "@aws-sdk/client-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoPhaseLedger, type LedgerDynamoClient } from "../../src/aws/ledger";
import { InvalidLedgerKeyError } from "../../src/ledger/errors";
import { phaseKeyOf } from "../../src/ledger/key";
import type { LedgerKey } from "../../src/ledger/types";
import { dynamoEndpoint, type FreshTable, freshLedgerTable } from "../support/dynamo";
import { claimed, keyFor, ledgerContract, ManualClock } from "../support/ledgerContract";
import { missing } from "../support/requirements";

const LEASE_MS = 10_000;
// Real time as the base: DynamoDB Local runs TTL, so an entry whose expiresAt (clock + retention) lies
// in the real past can vanish in the middle of a test.
const T0 = Date.now();

describe.skipIf(missing("DynamoDB (the dynamo test service)", dynamoEndpoint(), "unset DVM_TEST_SERVICES, or fetch it: bash infra/dev/dynamodb/fetch.sh"))(
  "DynamoPhaseLedger on DynamoDB",
  () => {
    let table: FreshTable;
    const clock = new ManualClock(T0);
    const ledgerWith = (client: LedgerDynamoClient = table.client, now = clock.now) => new DynamoPhaseLedger({ client, tableName: table.tableName, now });

    beforeAll(async () => {
      table = await freshLedgerTable();
    });
    afterAll(async () => {
      await table?.drop();
    });

    ledgerContract((now) => ledgerWith(table.client, now), T0);

    it("rejects bad keys before anything is written", async () => {
      const empty = await freshLedgerTable(table.client);
      try {
        const ledger = new DynamoPhaseLedger({ client: empty.client, tableName: empty.tableName, now: clock.now });
        const bad: Array<[unknown, string]> = [
          [{ uid: "", phase: "Started", generation: 1 }, "uid"],
          [{ phase: "Started", generation: 1 }, "uid"],
          [{ uid: "u", phase: "NoSuchPhase", generation: 1 }, "phase"],
          [{ uid: "u", phase: "Completed", generation: 1 }, "phase"],
          [{ uid: "u", phase: "Started", generation: -1 }, "generation"],
          [{ uid: "u", phase: "Started", generation: 1.5 }, "generation"],
          [{ uid: "u", phase: "Started", generation: "1" }, "generation"],
        ];
        for (const [key, field] of bad) {
          const attempt = ledger.claim(key as LedgerKey, { leaseMs: LEASE_MS });
          await expect(attempt).rejects.toBeInstanceOf(InvalidLedgerKeyError);
          await expect(attempt).rejects.toMatchObject({ field });
          const claim = { key: key as LedgerKey, attempt: 1, leaseExpiresAt: 0, takeover: false };
          await expect(ledger.complete(claim, { result: "advanced", nextPhase: "Completed" })).rejects.toMatchObject({ field });
          await expect(ledger.release(claim)).rejects.toMatchObject({ field });
          await expect(ledger.fail(claim, "x")).rejects.toMatchObject({ field });
        }
        await expect(ledger.history("")).rejects.toMatchObject({ field: "uid" });
        // A Scan is fine here: it is the test looking at the whole (tiny) table, not the ledger.
        const { Count } = await empty.client.send(new ScanCommand({ TableName: empty.tableName, Select: "COUNT" }));
        expect(Count).toBe(0);
      } finally {
        await empty.drop();
      }
    });

    it("never sets the TTL attribute while the DVM exists; retire() starts the retention", async () => {
      const key = keyFor("DeleteRsyncResources");
      const local = new ManualClock(T0);
      const ledger = new DynamoPhaseLedger({ client: table.client, tableName: table.tableName, now: local.now, retentionDays: 7 });
      const read = async () =>
        (
          await table.client.send(
            new GetItemCommand({
              TableName: table.tableName,
              Key: { uid: { S: key.uid }, phaseKey: { S: phaseKeyOf(key) } },
              ConsistentRead: true,
            }),
          )
        ).Item!;

      const first = claimed(await ledger.claim(key, { leaseMs: LEASE_MS }));
      expect((await read()).expiresAt).toBeUndefined();
      local.advance(60_000);
      await ledger.release(first);
      const second = claimed(await ledger.claim(key, { leaseMs: LEASE_MS }));
      await ledger.fail(second, "boom");
      const third = claimed(await ledger.claim(key, { leaseMs: LEASE_MS }));
      await ledger.complete(third, { result: "advanced", nextPhase: "WaitForRsyncResourcesTerminated" });
      expect((await read()).expiresAt).toBeUndefined();

      // The DVM is gone: its entries live for the retention period from now.
      local.advance(60_000);
      await ledger.retire(key.uid);
      expect((await read()).expiresAt).toEqual({ N: String(Math.floor(local.now() / 1000) + 7 * 86_400) });

      const { TimeToLiveDescription } = await table.client.send(new DescribeTimeToLiveCommand({ TableName: table.tableName }));
      expect(TimeToLiveDescription).toMatchObject({ TimeToLiveStatus: "ENABLED", AttributeName: "expiresAt" });
    });

    it("recognises its own write when a response is lost and the request is retried", async () => {
      // Fault injection, not a mock: every request reaches DynamoDB, only the first answer is dropped.
      let dropNextAnswer = false;
      const lossy: LedgerDynamoClient = {
        send: (async (command: Parameters<LedgerDynamoClient["send"]>[0]) => {
          const output = await table.client.send(command);
          if (dropNextAnswer) {
            dropNextAnswer = false;
            throw Object.assign(new Error("socket hang up"), { code: "ECONNRESET" });
          }
          return output;
        }) as LedgerDynamoClient["send"],
      };
      const ledger = new DynamoPhaseLedger({ client: lossy, tableName: table.tableName, now: clock.now, retry: { sleep: async () => {} } });
      const key = keyFor("CreatePVProgressCRs");

      dropNextAnswer = true;
      const claim = claimed(await ledger.claim(key, { leaseMs: LEASE_MS }));
      expect(claim).toMatchObject({ attempt: 1, takeover: false });

      dropNextAnswer = true;
      await ledger.release(claim);
      const again = claimed(await ledger.claim(key, { leaseMs: LEASE_MS }));

      dropNextAnswer = true;
      const outcome = await ledger.complete(again, { result: "advanced", nextPhase: "CreateRsyncTransferPods" });
      expect(outcome).toMatchObject({ result: "advanced", nextPhase: "CreateRsyncTransferPods" });
      expect((await ledger.history(key.uid))[0]).toMatchObject({ state: "COMPLETED", attempts: 2, waits: 1, takeovers: 0 });
    });
  },
);
