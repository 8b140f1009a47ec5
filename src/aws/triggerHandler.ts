/**
 * The trigger function's Lambda adapter: an HTTP API (API Gateway v2, payload 2.0) request or an
 * EventBridge event in, the trigger's reply out (src/events/trigger.ts decides; nothing here does).
 *
 *   HTTP API      the reply becomes the HTTP response (201/200/4xx/5xx, JSON body, Retry-After on 503).
 *   EventBridge   the reply is the invocation's result. A 5xx reply throws instead, so Lambda retries
 *                 the asynchronous invocation and finally keeps the event in the function's
 *                 on-failure destination; a refused event (4xx) is not retried: it would fail the same way.
 *   Schedule      a schedule's input (EventBridge Scheduler, or a rule with an input transformer): one
 *                 Stage DVM per scheduled time (src/events/schedule.ts); replies as for EventBridge.
 */

import { MetricUnit } from "@aws-lambda-powertools/metrics";
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from "aws-lambda";
import { ENV, type Environment } from "../config/environment";
import { ControllerError } from "../contracts/controllerError";
import { isPlainObject, rejection } from "../events/incoming";
import { KubeMigrationStore } from "../events/migrationStore";
import { triggerNamespaceRule } from "../events/namespaces";
import { isScheduledStageInput } from "../events/schedule";
import { parseSourceAllowList } from "../events/sources";
import { createTrigger, type Trigger, type TriggerReply } from "../events/trigger";
import { definedFields } from "../lib/definedFields";
import type { Logger } from "../lib/log";
import { createKubeconfigSource } from "./kubeconfigSource";
import { createLedgerClient, DynamoHandledEvents, HANDLED_EVENT_RETENTION_SECONDS } from "./ledger";
import { onceAsync } from "./once";
import type { MetricsWriter } from "./phaseMetrics";
import { parseTriggerEnv } from "./triggerConfig";

/** A 5xx reply to an EventBridge event: thrown so Lambda's async retry takes over. */
export class TriggerUnavailableError extends ControllerError {
  override readonly name: string = "TriggerUnavailableError";
  readonly disposition = "retryable";
  constructor(readonly reply: TriggerReply) {
    super(`${reply.status}: ${"message" in reply.body ? reply.body.message : ""}`);
  }
}

export type TriggerFunctionResult = APIGatewayProxyStructuredResultV2 | TriggerReply;

export interface TriggerHandlerOptions {
  trigger: Trigger;
  log: Logger;
  metrics: MetricsWriter;
}

export function createTriggerHandler(options: TriggerHandlerOptions): (event: unknown) => Promise<TriggerFunctionResult> {
  const { trigger, metrics } = options;
  return async (event) => {
    if (isHttpApiEvent(event)) {
      const reply = await trigger.handleHttp({ headers: event.headers ?? {}, body: httpBody(event) });
      recordReply(metrics, reply, "http");
      return httpResponse(reply);
    }
    const scheduled = isScheduledStageInput(event);
    const reply =
      isPlainObject(event) && "detail-type" in event
        ? await trigger.handleEventBridge(event)
        : scheduled
          ? await trigger.handleSchedule(event)
          : await trigger.handle({
              ok: false,
              rejection: rejection(400, "invalid event", [
                { field: "event", message: 'neither an HTTP API request, an EventBridge event nor a schedule\'s input (with "schedule")' },
              ]),
            });
    recordReply(metrics, reply, scheduled ? "schedule" : "eventbridge");
    if (reply.status >= 500) throw new TriggerUnavailableError(reply);
    return reply;
  };
}

/**
 * The trigger configured by its environment (src/aws/triggerConfig.ts); throws ConfigurationError on a bad
 * setting, and warns (once, at cold start) when every event will be refused.
 */
export function triggerFromEnv(env: Environment, log: Logger): Trigger {
  const config = parseTriggerEnv(env);
  const allowedSources = parseSourceAllowList(config.allowedSources);
  if (allowedSources.refusesAll) log.warn(`${ENV.triggerAllowedSources} is empty: every event will be refused`);
  const namespaces = triggerNamespaceRule(config.namespaces);
  if (namespaces.allowed.patterns.length === 0) log.warn(`${ENV.triggerAllowedNamespaces} is empty: every event will be refused`);
  const hostKubeConfig = createKubeconfigSource({ parameterName: config.kubeconfigParameter });
  const store = onceAsync(async () => new KubeMigrationStore(await hostKubeConfig()));
  const handledEvents = new DynamoHandledEvents({
    client: createLedgerClient(),
    tableName: config.ledgerTableName,
    retentionSeconds: HANDLED_EVENT_RETENTION_SECONDS,
  });
  return createTrigger({
    store,
    allowedSources,
    namespaces,
    handledEvents,
    log,
    ...definedFields({ maxEventAgeSeconds: config.maxEventAgeSeconds, maxBytes: config.maxEventBytes, scheduleHistoryLimit: config.scheduleHistoryLimit }),
  });
}

/**
 * triggerFromEnv on the first event rather than at module load, as the phase function's runner: loading
 * the bundle needs no environment, and a bad setting fails each invocation with a message naming it.
 */
export function lazyTriggerFromEnv(env: Environment, log: Logger): Trigger {
  let built: Trigger | undefined;
  const trigger = () => {
    built ??= triggerFromEnv(env, log);
    return built;
  };
  return {
    handle: (received) => trigger().handle(received),
    handleHttp: (message) => trigger().handleHttp(message),
    handleEventBridge: (event) => trigger().handleEventBridge(event),
    handleSchedule: (input) => trigger().handleSchedule(input),
  };
}

function isHttpApiEvent(event: unknown): event is APIGatewayProxyEventV2 {
  if (!isPlainObject(event)) return false;
  const context = event.requestContext as { http?: unknown } | undefined;
  return isPlainObject(context) && isPlainObject(context.http);
}

function httpBody(event: APIGatewayProxyEventV2): string | Buffer | undefined {
  if (event.body === undefined) return undefined;
  return event.isBase64Encoded ? Buffer.from(event.body, "base64") : event.body;
}

export function httpResponse(reply: TriggerReply): APIGatewayProxyStructuredResultV2 {
  const headers: Record<string, string> = { "content-type": "application/json" };
  if ("retryAfterSeconds" in reply && reply.retryAfterSeconds !== undefined) headers["retry-after"] = String(reply.retryAfterSeconds);
  return { statusCode: reply.status, headers, body: JSON.stringify(reply.body) };
}

/** TriggerRequests by Transport and Outcome (created, existed, refused, failed). */
function recordReply(metrics: MetricsWriter, reply: TriggerReply, transport: "http" | "eventbridge" | "schedule"): void {
  const outcome = reply.status === 201 ? "Created" : reply.status === 200 ? "Existed" : reply.status < 500 ? "Refused" : "Failed";
  metrics.addDimension("Transport", transport);
  for (const name of ["Created", "Existed", "Refused", "Failed"]) metrics.addMetric(`Migrations${name}`, MetricUnit.Count, name === outcome ? 1 : 0);
}
