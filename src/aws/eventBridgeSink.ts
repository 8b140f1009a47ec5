/**
 * An EventBridge bus as the sink of outgoing CloudEvents: one PutEvents entry per event, with
 * Source = the CloudEvent's source, DetailType = its type, Time = its time, and Detail = the whole
 * CloudEvent in its JSON form (so id and subject survive and consumers can drop duplicates by id).
 * Rules match on `detail-type` and `detail.data.*`.
 *
 * The SDK's own retries are off: the publisher retries (src/events/publisher.ts), and two retry layers
 * would multiply. The function's IAM role may PutEvents to this one bus only (serverless.yml).
 */
import { EventBridgeClient, PutEventsCommand, type PutEventsCommandOutput } from "@aws-sdk/client-eventbridge";
import type { CloudEventV1 } from "cloudevents";
import { type EventSink, SendError } from "../events/publisher";
import { isTransientDynamoError } from "../ledger";
import { errorMessage } from "../lib/errorMessage";

/** PutEvents error codes (per entry) that a later try can get past. */
const RETRYABLE_ENTRY_CODES = new Set(["ThrottlingException", "InternalFailure", "InternalException", "ServiceUnavailable"]);

export interface EventBridgeSinkOptions {
  /** Bus name or ARN; "default" is the account's default bus. */
  busName: string;
  /** Default: a client for AWS_ENDPOINT_URL_EVENTBRIDGE / AWS_ENDPOINT_URL or AWS, no SDK retries. */
  client?: Pick<EventBridgeClient, "send">;
}

export class EventBridgeSink implements EventSink {
  readonly name = "eventbridge";
  private readonly busName: string;
  private client: Pick<EventBridgeClient, "send"> | undefined;

  constructor(options: EventBridgeSinkOptions) {
    this.busName = options.busName;
    this.client = options.client;
  }

  async send(event: CloudEventV1<unknown>, signal: AbortSignal): Promise<void> {
    this.client ??= new EventBridgeClient({ maxAttempts: 1, requestHandler: { connectionTimeout: 2_000, requestTimeout: 5_000 } });
    let output: PutEventsCommandOutput;
    try {
      output = await this.client.send(
        new PutEventsCommand({
          Entries: [
            {
              EventBusName: this.busName,
              Source: event.source,
              DetailType: event.type,
              Detail: JSON.stringify(event),
              ...(event.time ? { Time: new Date(event.time) } : {}),
            },
          ],
        }),
        { abortSignal: signal },
      );
    } catch (error) {
      const name = error instanceof Error ? error.name : "Error";
      const retryable = isTransientDynamoError(error) || name === "AbortError" || name === "TimeoutError";
      throw new SendError(`PutEvents to ${this.busName}: ${errorMessage(error)}`, retryable);
    }
    if (!output.FailedEntryCount) return;
    const entry = output.Entries?.[0];
    const code = entry?.ErrorCode ?? "unknown";
    throw new SendError(`PutEvents to ${this.busName}: entry refused: ${code}: ${entry?.ErrorMessage ?? ""}`, RETRYABLE_ENTRY_CODES.has(code));
  }
}
