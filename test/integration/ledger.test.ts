/**
 * The phase ledger against a real DynamoDB (DynamoDB Local unless AWS_ENDPOINT_URL* points elsewhere).
 * Time is an injected clock, so lease expiry is exact and no test sleeps.
 */

import { randomUUID } from "node:crypto";
import { DescribeTimeToLiveCommand, GetItemCommand, ScanCommand } from "@aws-sdk/client-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoPhaseLedger, type LedgerDynamoClient } from "../../src/aws/ledger";
import { type Claim, type ClaimResult, InvalidLedgerKeyError, type LedgerKey, LostClaimError, phaseKeyOf } from "../../src/ledger";
import { dynamoEndpoint, type FreshTable, freshLedgerTable } from "../support/dynamo";
import { missing } from "../support/requirements";

const LEASE_MS = 10_000;
// Real time as the base: DynamoDB Local runs TTL, so an entry whose expiresAt (clock + retention) lies
// in the real past can vanish in the middle of a test.
const T0 = Date.now();

class ManualClock {
  constructor(public ms = T0) {}
  readonly now = (): number => this.ms;
  advance(ms: number): void {
    this.ms += ms;
  }
}

function keyFor(phase: LedgerKey["phase"] = "CreateDestinationPVCs", generation = 1): LedgerKey {
  return { uid: randomUUID(), phase, generation };
}

function claimed(result: ClaimResult): Claim {
  if (result.kind !== "claimed") throw new Error(`expected a claim, got ${JSON.stringify(result)}`);
  return result.claim;
}

describe.skipIf(missing("DynamoDB (the dynamo test service)", dynamoEndpoint(), "unset DVM_TEST_SERVICES, or fetch it: bash infra/dev/dynamodb/fetch.sh"))(
  "DynamoPhaseLedger on DynamoDB",
  () => {
    let table: FreshTable;
    const clock = new ManualClock();
    const ledgerWith = (client: LedgerDynamoClient = table.client, now = clock.now) => new DynamoPhaseLedger({ client, tableName: table.tableName, now });

    beforeAll(async () => {
      table = await freshLedgerTable();
    });
    afterAll(async () => {
      await table?.drop();
    });

    it("lets exactly one of 50 concurrent claims win and tells the others who holds it", async () => {
      const key = keyFor();
      // 50 invocations, each with its own ledger (own holder tokens), as 50 Lambdas would.
      const results = await Promise.all(Array.from({ length: 50 }, () => ledgerWith().claim(key, { leaseMs: LEASE_MS })));

      const winners = results.filter((r) => r.kind === "claimed");
      expect(winners).toHaveLength(1);
      const claim = claimed(winners[0]!);
      expect(claim).toEqual({ key, attempt: 1, leaseExpiresAt: clock.now() + LEASE_MS, takeover: false });
      const others = results.filter((r) => r.kind !== "claimed");
      expect(others).toHaveLength(49);
      for (const other of others) expect(other).toEqual({ kind: "held", attempt: 1, leaseExpiresAt: clock.now() + LEASE_MS });
    });

    it("returns the recorded outcome to every claim after completion and never claims again", async () => {
      const key = keyFor("CreateRsyncConfig");
      const ledger = ledgerWith();
      const claim = claimed(await ledger.claim(key, { leaseMs: LEASE_MS }));
      const outcome = await ledger.complete(claim, { result: "advanced", nextPhase: "CreateStunnelConfig" });
      expect(outcome).toEqual({ result: "advanced", nextPhase: "CreateStunnelConfig", finishedAt: clock.now() });

      // Even long after the lease would have expired: COMPLETED is final.
      const later = new ManualClock(clock.now() + 10 * LEASE_MS);
      const results = await Promise.all(Array.from({ length: 20 }, () => ledgerWith(table.client, later.now).claim(key, { leaseMs: LEASE_MS })));
      for (const result of results) expect(result).toEqual({ kind: "completed", outcome, attempts: 1 });

      const [entry] = await ledger.history(key.uid);
      expect(entry).toMatchObject({ state: "COMPLETED", attempts: 1, takeovers: 0, outcome });
    });

    it("records a failed phase with its errors as the outcome", async () => {
      const key = keyFor("CreateDestinationNamespaces");
      const ledger = ledgerWith();
      const claim = claimed(await ledger.claim(key, { leaseMs: LEASE_MS }));
      const outcome = await ledger.complete(claim, { result: "failed", nextPhase: "MigrationFailed", errors: ["namespace quota exceeded"] });
      expect(await ledger.claim(key, { leaseMs: LEASE_MS })).toEqual({ kind: "completed", outcome, attempts: 1 });
      expect(outcome.errors).toEqual(["namespace quota exceeded"]);
    });

    it("lets a claim take over an expired lease with attempt + 1 and fences the previous holder out", async () => {
      const key = keyFor("CreateRsyncTransferPods");
      const local = new ManualClock();
      const ledger = ledgerWith(table.client, local.now);
      const first = claimed(await ledger.claim(key, { leaseMs: LEASE_MS }));

      local.advance(LEASE_MS); // the lease ends at leaseExpiresAt, exclusive: still held at that instant
      expect(await ledger.claim(key, { leaseMs: LEASE_MS })).toEqual({ kind: "held", attempt: 1, leaseExpiresAt: first.leaseExpiresAt });

      local.advance(1);
      const second = claimed(await ledger.claim(key, { leaseMs: LEASE_MS }));
      expect(second).toEqual({ key, attempt: 2, leaseExpiresAt: local.now() + LEASE_MS, takeover: true });

      const lost = ledger.complete(first, { result: "advanced", nextPhase: "WaitForRsyncTransferPodsRunning" });
      await expect(lost).rejects.toBeInstanceOf(LostClaimError);
      await expect(lost).rejects.toMatchObject({ attempt: 1, current: { attempt: 2, state: "RUNNING" } });
      await expect(ledger.release(first)).rejects.toBeInstanceOf(LostClaimError);
      await expect(ledger.fail(first, "stalled")).rejects.toBeInstanceOf(LostClaimError);

      local.advance(2_500);
      await ledger.complete(second, { result: "advanced", nextPhase: "WaitForRsyncTransferPodsRunning" });
      const [entry] = await ledger.history(key.uid);
      expect(entry).toMatchObject({ state: "COMPLETED", attempts: 2, takeovers: 1, waits: 0, failures: 0, elapsedSeconds: (LEASE_MS + 1 + 2_500) / 1000 });
      // The fenced-out holder cannot complete after the fact either.
      await expect(ledger.complete(first, { result: "failed", nextPhase: "MigrationFailed" })).rejects.toMatchObject({
        current: { attempt: 2, state: "COMPLETED" },
      });
    });

    it("counts waits and failures, and a claim after release() or fail() is a new attempt without takeover", async () => {
      const key = keyFor("WaitForRsyncTransferPodsRunning");
      const ledger = ledgerWith();

      const first = claimed(await ledger.claim(key, { leaseMs: LEASE_MS }));
      await ledger.release(first);
      const second = claimed(await ledger.claim(key, { leaseMs: LEASE_MS }));
      expect(second).toMatchObject({ attempt: 2, takeover: false });
      expect((await ledger.history(key.uid))[0]).toMatchObject({ state: "RUNNING", attempts: 2, waits: 1, failures: 0, takeovers: 0 });

      await ledger.fail(second, "ThrottlingException from the destination API server");
      expect((await ledger.history(key.uid))[0]).toMatchObject({
        state: "RETRYING",
        attempts: 2,
        waits: 1,
        failures: 1,
        takeovers: 0,
        lastError: "ThrottlingException from the destination API server",
      });
      // A settled attempt cannot write again.
      await expect(ledger.complete(second, { result: "advanced", nextPhase: "RunRsyncOperations" })).rejects.toBeInstanceOf(LostClaimError);

      const third = claimed(await ledger.claim(key, { leaseMs: LEASE_MS }));
      expect(third).toMatchObject({ attempt: 3, takeover: false });
      await ledger.complete(third, { result: "advanced", nextPhase: "RunRsyncOperations" });
      expect((await ledger.history(key.uid))[0]).toMatchObject({ state: "COMPLETED", attempts: 3, waits: 1, failures: 1, takeovers: 0 });
    });

    it("keeps counting takeovers exactly across waits, failures and crashes", async () => {
      const key = keyFor("RunRsyncOperations");
      const local = new ManualClock();
      const ledger = ledgerWith(table.client, local.now);
      await ledger.release(claimed(await ledger.claim(key, { leaseMs: LEASE_MS }))); // attempt 1 waits
      await ledger.claim(key, { leaseMs: LEASE_MS }); // attempt 2 crashes
      local.advance(LEASE_MS + 1);
      const third = claimed(await ledger.claim(key, { leaseMs: LEASE_MS })); // takes over
      expect(third).toMatchObject({ attempt: 3, takeover: true });
      await ledger.fail(third, "rsync exited 23");
      const fourth = claimed(await ledger.claim(key, { leaseMs: LEASE_MS }));
      expect(fourth).toMatchObject({ attempt: 4, takeover: false });
      local.advance(LEASE_MS + 1); // attempt 4 crashes too
      const fifth = claimed(await ledger.claim(key, { leaseMs: LEASE_MS }));
      expect(fifth).toMatchObject({ attempt: 5, takeover: true });
      expect((await ledger.history(key.uid))[0]).toMatchObject({ attempts: 5, waits: 1, failures: 1, takeovers: 2 });
    });

    it("returns one DVM's history in the order its phases started, with elapsed seconds, and nothing of other DVMs", async () => {
      const uid = randomUUID();
      const other = randomUUID();
      const local = new ManualClock();
      const ledger = ledgerWith(table.client, local.now);
      const dvm = { namespace: "openshift-migration", name: "dvm-1" };
      const steps = [
        { phase: "Started", generation: 1, next: "CleanStaleRsyncResources", ms: 200 },
        { phase: "CleanStaleRsyncResources", generation: 1, next: "WaitForStaleRsyncResourcesTerminated", ms: 1_500 },
        // The spec changed: generation 2 starts over; its sort key sorts after generation 1's.
        { phase: "Started", generation: 2, next: "CleanStaleRsyncResources", ms: 300 },
      ] as const;
      for (const step of steps) {
        const claim = claimed(await ledger.claim({ uid, phase: step.phase, generation: step.generation }, { leaseMs: LEASE_MS, dvm }));
        await ledger.claim({ uid: other, phase: step.phase, generation: step.generation }, { leaseMs: LEASE_MS });
        local.advance(step.ms);
        await ledger.complete(claim, { result: "advanced", nextPhase: step.next });
        local.advance(50);
      }

      const history = await ledger.history(uid);
      expect(history.map((e) => [e.key.phase, e.key.generation, e.elapsedSeconds])).toEqual([
        ["Started", 1, 0.2],
        ["CleanStaleRsyncResources", 1, 1.5],
        ["Started", 2, 0.3],
      ]);
      for (const entry of history) {
        expect(entry.key.uid).toBe(uid);
        expect(entry.dvm).toEqual(dvm);
        expect(entry.finishedAt! - entry.startedAt).toBe(entry.elapsedSeconds! * 1000);
      }
      expect(history.map((e) => e.startedAt)).toEqual([...history.map((e) => e.startedAt)].sort((a, b) => a - b));
      expect(await ledger.history(randomUUID())).toEqual([]);
      expect((await ledger.history(other)).every((e) => e.key.uid === other && e.state === "RUNNING")).toBe(true);
    });

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

    it("never sets the TTL attribute while the DVM exists; retire() starts the retention, keep() takes it off", async () => {
      const key = keyFor("DeleteRsyncResources");
      const local = new ManualClock();
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
      // An entry written by an older version carried a TTL: keep() (run when a DVM is adopted) removes it.
      await ledger.keep(key.uid);
      expect((await read()).expiresAt).toBeUndefined();

      const { TimeToLiveDescription } = await table.client.send(new DescribeTimeToLiveCommand({ TableName: table.tableName }));
      expect(TimeToLiveDescription).toMatchObject({ TimeToLiveStatus: "ENABLED", AttributeName: "expiresAt" });
    });

    it("records the body's status update and failure category with the completion and returns them to later claims", async () => {
      const key = keyFor("RunRsyncOperations");
      const ledger = ledgerWith();
      const claim = claimed(await ledger.claim(key, { leaseMs: LEASE_MS }));
      const statusUpdate = {
        rsyncOperations: [{ pvcReference: { namespace: "shop", name: "db" }, currentAttempt: 2, failed: true }],
        failedPods: [{ name: "rsync-db-2", namespace: "shop", pvcRef: { namespace: "shop", name: "db" } }],
      };
      const outcome = await ledger.complete(claim, {
        result: "failed",
        nextPhase: "MigrationFailed",
        errors: ["rsync failed"],
        statusUpdate,
        category: "Warn",
      });
      expect(outcome).toMatchObject({ statusUpdate, category: "Warn" });
      const again = await ledgerWith().claim(key, { leaseMs: LEASE_MS });
      expect(again).toEqual({ kind: "completed", outcome, attempts: 1 });
    });

    it("renews a lease for the attempt that holds it and refuses the renewal of an attempt taken over", async () => {
      const key = keyFor("RunRsyncOperations");
      const local = new ManualClock();
      const ledger = ledgerWith(table.client, local.now);
      const first = claimed(await ledger.claim(key, { leaseMs: LEASE_MS }));
      local.advance(LEASE_MS - 1);
      expect(await ledger.renew(first, LEASE_MS)).toBe(local.now() + LEASE_MS);
      // Renewed: a claim just after the original lease would have ended still finds it held.
      local.advance(2);
      expect(await ledgerWith(table.client, local.now).claim(key, { leaseMs: LEASE_MS })).toMatchObject({ kind: "held", attempt: 1 });
      // Not renewed again: after the renewed lease ends, another invocation takes over and the old one is fenced out.
      local.advance(LEASE_MS);
      const second = claimed(await ledgerWith(table.client, local.now).claim(key, { leaseMs: LEASE_MS }));
      expect(second).toMatchObject({ attempt: 2, takeover: true });
      await expect(ledger.renew(first, LEASE_MS)).rejects.toBeInstanceOf(LostClaimError);
      expect(await ledger.renew(second, LEASE_MS)).toBe(local.now() + LEASE_MS);
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
