/**
 * DynamoDB instrumentation through the client's own middleware stack: counts every request by command
 * (ledger writes per phase come from here, not from the ledger's code) and the capacity units DynamoDB
 * says each consumed (ReturnConsumedCapacity, which DynamoDB Local computes from item sizes as the
 * service does: what the bill is made of), and, when asked, fails a fraction
 * of them before they are sent, as throttling (ProvisionedThroughputExceededException) or a 500, or
 * loses the answer of a fraction of the writes after DynamoDB applied them (a timeout on the way back).
 *
 * The same request (same input) is failed at most `maxConsecutive` times in a row, below the ledger's
 * retry budget (5 tries): this scenario is about transient errors. DynamoDB staying down through every
 * retry after a body ran is the same as a crash before completion, which the crash scenario covers.
 */

import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { InternalServerError, ProvisionedThroughputExceededException } from "@aws-sdk/client-dynamodb";
import { seededRandom } from "./random";

export interface ThrottleOptions {
  /** Fraction of requests failed, in [0, 1). */
  fraction: number;
  /** Fraction of UpdateItem writes that are applied but whose answer is lost (the caller sees a timeout). */
  lostReplyFraction?: number;
  /** Most times in a row one request is failed. Default 2. */
  maxConsecutive?: number;
  seed?: number;
}

export interface DynamoCounts {
  /** Requests that reached DynamoDB, by command name. */
  sent: Record<string, number>;
  /** Requests failed on purpose before they were sent. */
  throttled: number;
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

const emptyCounts = (): DynamoCounts => ({ sent: {}, throttled: 0, serverErrors: 0, lostReplies: 0, capacity: { write: 0, read: 0 } });

export interface DynamoInstrument {
  counts(): DynamoCounts;
  reset(): void;
}

export function instrumentDynamo(client: Pick<DynamoDBClient, "middlewareStack">, throttle?: ThrottleOptions): DynamoInstrument {
  let counts = emptyCounts();
  const random = seededRandom(throttle?.seed ?? 7);
  const streak = new Map<string, number>();
  const maxConsecutive = throttle?.maxConsecutive ?? 2;
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const command = context.commandName ?? "unknown";
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
      serverErrors: counts.serverErrors,
      lostReplies: counts.lostReplies ?? 0,
      capacity: { write: counts.capacity?.write ?? 0, read: counts.capacity?.read ?? 0 },
    }),
    reset: () => void (counts = emptyCounts()),
  };
}
