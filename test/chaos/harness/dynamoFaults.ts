/**
 * DynamoDB instrumentation through the client's own middleware stack: counts every request by command
 * (ledger writes per phase come from here, not from the ledger's code) and the capacity units DynamoDB
 * says each consumed (ReturnConsumedCapacity, which DynamoDB Local computes from item sizes as the
 * service does: what the bill is made of), and, when asked, fails a fraction
 * of them before they are sent, as throttling (ProvisionedThroughputExceededException) or a 500, or
 * loses the answer of a fraction of the writes after DynamoDB applied them (a timeout on the way back).
 *
 * The same request (same input) is failed at most `maxConsecutive` times in a row, below the ledger's
 * retry budget (5 tries): this scenario is about transient errors. Throttling bursts (`bursts`) are
 * longer: for a window every period, every request is refused (ProvisionedThroughputExceededException
 * or ThrottlingException), so the ledger's own five tries (about 375 ms) run out and the runner's
 * retries until the lease's end must carry a completion through (issue 24, item 5).
 */

import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { InternalServerError, ProvisionedThroughputExceededException, ThrottlingException } from "@aws-sdk/client-dynamodb";
import { seededRandom } from "./random";

export interface ThrottleOptions {
  /** Fraction of requests failed, in [0, 1). */
  fraction: number;
  /** Fraction of UpdateItem writes that are applied but whose answer is lost (the caller sees a timeout). */
  lostReplyFraction?: number;
  /** Most times in a row one request is failed. Default 2. */
  maxConsecutive?: number;
  /** Windows in which every request is throttled, whatever `fraction` says. */
  bursts?: ThrottleBursts;
  seed?: number;
}

export interface ThrottleBursts {
  /** A window starts every this many ms (from when the client was instrumented, shifted by the seed). */
  periodMs: number;
  /** How long each window lasts; longer than the ledger's own retries (about 375 ms). */
  burstMs: number;
}

/** Whether `now` falls in one of the bursts' windows, which began at `origin`. */
export function inBurst(bursts: ThrottleBursts, origin: number, now: number): boolean {
  return (now - origin) % bursts.periodMs < bursts.burstMs;
}

export interface DynamoCounts {
  /** Requests that reached DynamoDB, by command name. */
  sent: Record<string, number>;
  /** Requests failed on purpose before they were sent (bursts included). */
  throttled: number;
  /** Of those, refused inside a throttling burst. */
  burstThrottled?: number;
  serverErrors: number;
  /** Writes applied by DynamoDB whose answer was dropped on purpose. */
  lostReplies?: number;
  /** Capacity units the requests consumed, as DynamoDB reported them: write units and read units. */
  capacity?: { write: number; read: number };
}

/** Commands that take ReturnConsumedCapacity; the first five consume write units. */
const WRITE_COMMANDS = new Set(["UpdateItemCommand", "PutItemCommand", "DeleteItemCommand", "BatchWriteItemCommand", "TransactWriteItemsCommand"]);
const READ_COMMANDS = new Set(["GetItemCommand", "QueryCommand", "ScanCommand", "BatchGetItemCommand", "TransactGetItemsCommand"]);

function capacityUnits(output: unknown): number {
  const consumed = (output as { output?: { ConsumedCapacity?: unknown } }).output?.ConsumedCapacity;
  const all = Array.isArray(consumed) ? consumed : consumed ? [consumed] : [];
  return all.reduce((sum: number, c: { CapacityUnits?: number }) => sum + (c.CapacityUnits ?? 0), 0);
}

const emptyCounts = (): DynamoCounts => ({ sent: {}, throttled: 0, burstThrottled: 0, serverErrors: 0, lostReplies: 0, capacity: { write: 0, read: 0 } });

export interface DynamoInstrument {
  counts(): DynamoCounts;
  reset(): void;
}

export function instrumentDynamo(client: Pick<DynamoDBClient, "middlewareStack">, throttle?: ThrottleOptions): DynamoInstrument {
  let counts = emptyCounts();
  const random = seededRandom(throttle?.seed ?? 7);
  const streak = new Map<string, number>();
  const maxConsecutive = throttle?.maxConsecutive ?? 2;
  const bursts = throttle?.bursts;
  // Workers of one run start at different times: the seed shifts their windows apart.
  const origin = Date.now() - (bursts ? Math.floor(random() * bursts.periodMs) : 0);
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const command = context.commandName ?? "unknown";
      if (bursts && inBurst(bursts, origin, Date.now())) {
        counts.throttled++;
        counts.burstThrottled = (counts.burstThrottled ?? 0) + 1;
        const $metadata = { httpStatusCode: 400 };
        if (random() < 0.5)
          throw new ProvisionedThroughputExceededException({ message: "Throughput exceeds the current capacity of your table (injected burst)", $metadata });
        throw new ThrottlingException({ message: "Rate of requests exceeds the allowed throughput (injected burst)", $metadata });
      }
      if (throttle && throttle.fraction > 0) {
        const key = `${command} ${JSON.stringify(args.input)}`;
        const inARow = streak.get(key) ?? 0;
        if (inARow < maxConsecutive && random() < throttle.fraction) {
          streak.set(key, inARow + 1);
          if (random() < 0.7) {
            counts.throttled++;
            throw new ProvisionedThroughputExceededException({
              message: "The level of configured provisioned throughput for the table was exceeded (injected by the chaos harness)",
              $metadata: { httpStatusCode: 400 },
            });
          }
          counts.serverErrors++;
          throw new InternalServerError({ message: "Internal server error (injected by the chaos harness)", $metadata: { httpStatusCode: 500 } });
        }
        streak.delete(key);
      }
      counts.sent[command] = (counts.sent[command] ?? 0) + 1;
      const writes = WRITE_COMMANDS.has(command);
      const measured = writes || READ_COMMANDS.has(command);
      const output = await next(measured ? { ...args, input: { ...(args.input as object), ReturnConsumedCapacity: "TOTAL" } } : args);
      if (measured && counts.capacity) counts.capacity[writes ? "write" : "read"] += capacityUnits(output);
      const lost = throttle?.lostReplyFraction ?? 0;
      if (lost > 0 && command === "UpdateItemCommand") {
        // Applied, then the answer is lost: the ledger must recognise its own write when it retries.
        const key = `lost ${JSON.stringify(args.input)}`;
        const inARow = streak.get(key) ?? 0;
        if (inARow < maxConsecutive && random() < lost) {
          streak.set(key, inARow + 1);
          counts.lostReplies = (counts.lostReplies ?? 0) + 1;
          throw Object.assign(new Error("the answer of an applied write was lost (injected by the chaos harness)"), { name: "TimeoutError" });
        }
        streak.delete(key);
      }
      return output;
    },
    { step: "initialize", name: "chaosDynamoFaults" },
  );
  return {
    counts: () => ({
      sent: { ...counts.sent },
      throttled: counts.throttled,
      burstThrottled: counts.burstThrottled ?? 0,
      serverErrors: counts.serverErrors,
      lostReplies: counts.lostReplies ?? 0,
      capacity: { write: counts.capacity?.write ?? 0, read: counts.capacity?.read ?? 0 },
    }),
    reset: () => void (counts = emptyCounts()),
  };
}
