/**
 * The trigger's handled events (src/events/handledEvents.ts) in the ledger table: one item per event,
 * partition key `event#<sha256>` (the trigger's IAM role may touch no other partition: serverless.yml's
 * dynamodb:LeadingKeys condition), sort key "event", and the table's TTL attribute, so records expire
 * on their own some time after the trigger stopped accepting the event for its age.
 */
import { GetItemCommand, UpdateItemCommand } from "@aws-sdk/client-dynamodb";
import { type EventIdentity, type HandledEvent, type HandledEvents, handledEventKey } from "../../events/handledEvents";
import { DEFAULT_RETRY_POLICY, type RetryPolicy, withTransientRetry } from "../../ledger/retry";
import type { LedgerDynamoClient } from "./client";

/** How long a record is kept: as long as the ledger keeps a finished DVM's entries, and far beyond the oldest event the trigger accepts (7 days). */
export const HANDLED_EVENT_RETENTION_SECONDS = 30 * 24 * 60 * 60;

/** The sort key of every handled-event record. */
export const HANDLED_EVENT_SORT_KEY = "event";

export interface HandledEventRecordsOptions {
  client: LedgerDynamoClient;
  tableName: string;
  /** How long a record is kept, in seconds; must exceed the oldest event the trigger accepts. */
  retentionSeconds: number;
  now?: () => number;
  retry?: RetryPolicy;
}

export class DynamoHandledEvents implements HandledEvents {
  private readonly now: () => number;
  private readonly retry: RetryPolicy;

  constructor(private readonly options: HandledEventRecordsOptions) {
    this.now = options.now ?? Date.now;
    this.retry = options.retry ?? DEFAULT_RETRY_POLICY;
  }

  async recall(event: EventIdentity): Promise<HandledEvent | undefined> {
    const { Item } = await withTransientRetry(
      "recall a handled event",
      () => this.options.client.send(new GetItemCommand({ TableName: this.options.tableName, Key: this.key(event), ConsistentRead: true })),
      this.retry,
    );
    if (!Item) return undefined;
    const text = (name: string) => Item[name]?.S ?? "";
    return { namespace: text("namespace"), name: text("name"), uid: text("dvmUid"), handledAt: text("handledAt") };
  }

  async remember(event: EventIdentity, dvm: HandledEvent): Promise<void> {
    const expiresAt = Math.floor(this.now() / 1000) + this.options.retentionSeconds;
    await withTransientRetry(
      "remember a handled event",
      () =>
        this.options.client.send(
          new UpdateItemCommand({
            TableName: this.options.tableName,
            Key: this.key(event),
            // The first record stays: a redelivery handled concurrently writes nothing new.
            UpdateExpression:
              "SET #namespace = if_not_exists(#namespace, :namespace), #name = if_not_exists(#name, :name), " +
              "#dvmUid = if_not_exists(#dvmUid, :uid), #handledAt = if_not_exists(#handledAt, :handledAt), #expiresAt = :expiresAt",
            ExpressionAttributeNames: {
              "#namespace": "namespace",
              "#name": "name",
              "#dvmUid": "dvmUid",
              "#handledAt": "handledAt",
              "#expiresAt": "expiresAt",
            },
            ExpressionAttributeValues: {
              ":namespace": { S: dvm.namespace },
              ":name": { S: dvm.name },
              ":uid": { S: dvm.uid },
              ":handledAt": { S: dvm.handledAt },
              ":expiresAt": { N: String(expiresAt) },
            },
          }),
        ),
      this.retry,
    );
  }

  private key(event: EventIdentity) {
    return { uid: { S: handledEventKey(event) }, phaseKey: { S: HANDLED_EVENT_SORT_KEY } };
  }
}
