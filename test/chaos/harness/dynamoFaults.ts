/**
 * DynamoDB instrumentation through the client's own middleware stack: counts every request by command
 * (ledger writes per phase come from here, not from the ledger's code) and, when asked, fails a fraction
 * of them before they are sent, as throttling (ProvisionedThroughputExceededException) or a 500.
 *
 * The same request (same input) is failed at most `maxConsecutive` times in a row, below the ledger's
 * retry budget (5 tries): this scenario is about transient errors. DynamoDB staying down through every
 * retry after a body ran is the same as a crash before completion, which the crash scenario covers.
 */
import { InternalServerError, ProvisionedThroughputExceededException } from "@aws-sdk/client-dynamodb";
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { seededRandom } from "./random";

export interface ThrottleOptions {
  /** Fraction of requests failed, in [0, 1). */
  fraction: number;
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
}

export interface DynamoInstrument {
  counts(): DynamoCounts;
  reset(): void;
}

export function instrumentDynamo(client: Pick<DynamoDBClient, "middlewareStack">, throttle?: ThrottleOptions): DynamoInstrument {
  let counts: DynamoCounts = { sent: {}, throttled: 0, serverErrors: 0 };
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
      return next(args);
    },
    { step: "initialize", name: "chaosDynamoFaults" },
  );
  return {
    counts: () => ({ sent: { ...counts.sent }, throttled: counts.throttled, serverErrors: counts.serverErrors }),
    reset: () => void (counts = { sent: {}, throttled: 0, serverErrors: 0 }),
  };
}
