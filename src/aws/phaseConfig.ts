/**
 * The phase function's configuration: every variable it reads, checked here, once.
 *   LEDGER_TABLE_NAME           the ledger table (serverless.yml sets it). Required.
 *   DVM_KUBECONFIG_PARAMETER    SSM SecureString with the host cluster's kubeconfig; unset: the KUBECONFIG file
 *   POWERTOOLS_SERVICE_NAME     the service name in logs and metrics; default dvm-phase (functionConfig.ts)
 *   DVM_ADMIN_NAMESPACES, DVM_TRANSFER_*, DVM_RSYNC_EXTRA_OPTIONS, DVM_STUNNEL_TCP_PROXY[_TENANT]
 *                               the migration policy (POLICY_SETTINGS, src/dvm/policyConfig.ts)
 *   DVM_CLUSTER_CREDENTIAL_GRACE_SECONDS
 *                               how long a missing kubeconfig Secret or a refused credential (401) is retried
 *                               before the migration fails, from the first failure; default 300
 *   DVM_EVENTS_SINK             outgoing CloudEvents: eventbridge | http | none (default none)
 *   DVM_EVENTS_BUS_NAME         eventbridge: the bus (name or ARN), default "default"
 *   DVM_EVENTS_HTTP_URL         http: where events are POSTed (required with http; never quoted in errors)
 *   DVM_EVENTS_HTTP_MODE        http: structured (default) or binary content mode
 *   DVM_EVENTS_SOURCE           the events' `source`, default "dvm-serverless"
 *   DVM_EVENTS_FLUSH_MS         how long an invocation waits for its events at most, default 1,500
 *   DVM_EVENTS_QUEUE            events held at most while the sink is slow or down, default 100
 * DynamoDB, SSM and EventBridge endpoints, region and credentials are the SDK's own settings
 * (AWS_REGION, AWS_ENDPOINT_URL, AWS_ENDPOINT_URL_DYNAMODB, ...), which it reads itself.
 *
 * A bad setting is a ConfigurationError naming the variable. The events' settings are parsed on their
 * own: a bad one turns events off with an error in the log (eventPublisherFromEnv.ts), because events
 * must never be the reason a phase fails.
 */

import { z } from "zod";
import { blankIsUnset, ENV, type Environment, optional, optionalText, parseEnvironment, requiredText, wholeNumber } from "../config/environment";
import type { MigrationPolicy } from "../dvm/policy";
import { POLICY_ENV_SHAPE, policyOf } from "../dvm/policyConfig";
import { HTTP_CONTENT_MODES, type HttpContentMode } from "../events/httpSink";
import { DEFAULT_EVENT_SOURCE } from "../events/outgoing";
import { definedFields } from "../lib/definedFields";

const PhaseEnvSchema = z.object({
  [ENV.ledgerTable]: requiredText("is not set"),
  [ENV.kubeconfigParameter]: optionalText(),
  [ENV.clusterCredentialGraceSeconds]: optional(wholeNumber(0, 86_400)),
  ...POLICY_ENV_SHAPE,
});

export interface PhaseFunctionConfig {
  ledgerTableName: string;
  /** Unset: the KUBECONFIG file (local runs, serverless-offline). */
  kubeconfigParameter?: string;
  policy: MigrationPolicy;
  /** Unset: the runner's default (5 minutes). */
  credentialGraceMs?: number;
}

/** The phase function's settings; throws ConfigurationError naming every bad variable. */
export function parsePhaseFunctionEnv(env: Environment): PhaseFunctionConfig {
  const e = parseEnvironment(PhaseEnvSchema, env, "phase function configuration");
  const graceSeconds = e[ENV.clusterCredentialGraceSeconds];
  return definedFields({
    ledgerTableName: e[ENV.ledgerTable],
    kubeconfigParameter: e[ENV.kubeconfigParameter] || undefined,
    policy: policyOf(e),
    credentialGraceMs: graceSeconds === undefined ? undefined : graceSeconds * 1000,
  });
}

export const EVENT_SINKS = ["eventbridge", "http", "none"] as const;
export const DEFAULT_FLUSH_MS = 1_500;

const lowerCase = (value: unknown) => {
  const set = blankIsUnset(value);
  return typeof set === "string" ? set.trim().toLowerCase() : set;
};
const httpUrl = z.string().refine((text) => {
  try {
    return ["http:", "https:"].includes(new URL(text).protocol);
  } catch {
    return false;
  }
}, "is not a usable http(s) URL");

const EventsEnvSchema = z
  .object({
    [ENV.eventsSink]: z.preprocess(lowerCase, z.enum(EVENT_SINKS, `must be one of ${EVENT_SINKS.join(", ")}`).default("none")),
    [ENV.eventsBusName]: optionalText(),
    [ENV.eventsHttpUrl]: optional(z.string().trim().pipe(httpUrl)),
    [ENV.eventsHttpMode]: z.preprocess(
      lowerCase,
      z.enum(HTTP_CONTENT_MODES as [HttpContentMode, ...HttpContentMode[]], "must be structured or binary").default("structured"),
    ),
    [ENV.eventsSource]: optionalText(),
    [ENV.eventsFlushMs]: optional(wholeNumber(1, 900_000)),
    [ENV.eventsQueue]: optional(wholeNumber(1, 100_000)),
  })
  .superRefine((e, ctx) => {
    if (e[ENV.eventsSink] === "http" && !e[ENV.eventsHttpUrl])
      ctx.addIssue({ code: "custom", path: [ENV.eventsHttpUrl], message: `must be set when ${ENV.eventsSink} is http` });
  });

export type EventsSinkSettings = { kind: "eventbridge"; busName: string } | { kind: "http"; url: string; mode: HttpContentMode };

export interface EventsSettings {
  sink: EventsSinkSettings;
  source: string;
  flushDeadlineMs: number;
  maxQueue: number;
}

/** The outgoing events' settings, or undefined when they are off; throws ConfigurationError naming the bad variable. */
export function parseEventsEnv(env: Environment): EventsSettings | undefined {
  const e = parseEnvironment(EventsEnvSchema, env, "outgoing events");
  const kind = e[ENV.eventsSink];
  if (kind === "none") return undefined;
  return {
    sink: kind === "eventbridge" ? { kind, busName: e[ENV.eventsBusName] ?? "default" } : { kind, url: e[ENV.eventsHttpUrl]!, mode: e[ENV.eventsHttpMode] },
    source: e[ENV.eventsSource] ?? DEFAULT_EVENT_SOURCE,
    flushDeadlineMs: e[ENV.eventsFlushMs] ?? DEFAULT_FLUSH_MS,
    maxQueue: e[ENV.eventsQueue] ?? 100,
  };
}
