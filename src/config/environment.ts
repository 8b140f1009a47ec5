/**
 * The environment variable names of every deployable, defined once: code, tests and docs import them
 * from here. What each deployable reads, and how, is its configuration module's schema:
 *   phase function   src/aws/phaseConfig.ts
 *   trigger          src/aws/triggerConfig.ts
 *   relay            src/relay/config.ts
 *   local controller infra/dev/local/config.ts (`npm start`, and the development tools under infra/dev/local/)
 *   CLI              src/cli/config.ts
 * Only those modules (and no other file below src/ or functions/) touch process.env
 * (test/unit/config/environment.test.ts checks it). The migration policy's variables are named with
 * the rest of each setting in one table, POLICY_SETTINGS in src/dvm/policyConfig.ts.
 */

import { z } from "zod";
import { fieldIssues, formatIssues } from "../lib/issues";
import { LOG_LEVELS } from "../lib/log";
import { ConfigurationError } from "./error";

export const ENV = {
  // The host cluster and the ledger.
  kubeconfig: "KUBECONFIG",
  kubernetesServiceHost: "KUBERNETES_SERVICE_HOST",
  kubeconfigParameter: "DVM_KUBECONFIG_PARAMETER",
  ledgerTable: "LEDGER_TABLE_NAME",
  // Lambda's and Powertools' own.
  serviceName: "POWERTOOLS_SERVICE_NAME",
  powertoolsLogLevel: "POWERTOOLS_LOG_LEVEL",
  logLevel: "LOG_LEVEL",
  // The AWS SDK's own (the SDK reads them itself in Lambda; the local controller and the CLI pass them on).
  awsRegion: "AWS_REGION",
  awsDefaultRegion: "AWS_DEFAULT_REGION",
  awsEndpoint: "AWS_ENDPOINT_URL",
  awsDynamoEndpoint: "AWS_ENDPOINT_URL_DYNAMODB",
  awsLambdaEndpoint: "AWS_ENDPOINT_URL_LAMBDA",
  awsAccessKeyId: "AWS_ACCESS_KEY_ID",
  awsSecretAccessKey: "AWS_SECRET_ACCESS_KEY",
  awsProfile: "AWS_PROFILE",
  awsWebIdentityTokenFile: "AWS_WEB_IDENTITY_TOKEN_FILE",
  awsSdkNodeVersionWarningDisabled: "AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED",
  // How long the phase function retries a missing kubeconfig Secret or a refused credential (src/runner/credentialGrace.ts).
  clusterCredentialGraceSeconds: "DVM_CLUSTER_CREDENTIAL_GRACE_SECONDS",
  // The phase function's outgoing events.
  eventsSink: "DVM_EVENTS_SINK",
  eventsBusName: "DVM_EVENTS_BUS_NAME",
  eventsHttpUrl: "DVM_EVENTS_HTTP_URL",
  eventsHttpMode: "DVM_EVENTS_HTTP_MODE",
  eventsSource: "DVM_EVENTS_SOURCE",
  eventsFlushMs: "DVM_EVENTS_FLUSH_MS",
  eventsQueue: "DVM_EVENTS_QUEUE",
  // The trigger.
  triggerAllowedSources: "TRIGGER_ALLOWED_SOURCES",
  triggerMaxEventBytes: "TRIGGER_MAX_EVENT_BYTES",
  triggerAllowedNamespaces: "TRIGGER_ALLOWED_NAMESPACES",
  triggerAllowAdminNamespaces: "TRIGGER_ALLOW_ADMIN_NAMESPACES",
  triggerMaxEventAgeSeconds: "TRIGGER_MAX_EVENT_AGE_SECONDS",
  triggerScheduleHistoryLimit: "TRIGGER_SCHEDULE_HISTORY_LIMIT",
  // The relay.
  relayNamespace: "RELAY_NAMESPACE",
  relayFunctionName: "RELAY_FUNCTION_NAME",
  relayFunctionPrefix: "RELAY_FUNCTION_PREFIX",
  relayInvocationType: "RELAY_INVOCATION_TYPE",
  relayHealthPort: "RELAY_HEALTH_PORT",
  relayResyncMs: "RELAY_RESYNC_MS",
  relayConcurrency: "RELAY_CONCURRENCY",
  relayMetricsMaxDvmSeries: "RELAY_METRICS_MAX_DVM_SERIES",
  relayPodClusters: "RELAY_POD_CLUSTERS",
  relayLeaderElection: "RELAY_LEADER_ELECTION",
  relayLeaseName: "RELAY_LEASE_NAME",
  relayLeaseNamespace: "RELAY_LEASE_NAMESPACE",
  relayLeaseIdentity: "RELAY_LEASE_IDENTITY",
  relayLeaseDurationMs: "RELAY_LEASE_DURATION_MS",
  relayLeaseRenewDeadlineMs: "RELAY_LEASE_RENEW_DEADLINE_MS",
  relayLeaseRetryPeriodMs: "RELAY_LEASE_RETRY_PERIOD_MS",
  podName: "POD_NAME",
  // The CLI.
  home: "HOME",
  cliDebug: "DVM_CLI_DEBUG",
  // The development tools (infra/dev/local/): caches, versions, logs.
  path: "PATH",
  cacheDir: "DVM_CACHE_DIR",
  controlPlaneBin: "DVM_CONTROLPLANE_BIN",
  dynamoSimulatorVersion: "DVM_DYNAMODB_SIMULATOR_VERSION",
  keepLogs: "DVM_KEEP_LOGS",
} as const;

/** An environment as a process has it: names to text, any of them unset. */
export type Environment = Readonly<Record<string, string | undefined>>;

/**
 * A blank value counts as unset (a ConfigMap or a shell cannot always leave a variable out): the one
 * reading of blank for every deployable's settings, lists of src/dvm/policyKinds.ts aside (there, set
 * but empty is the empty list).
 */
export const blankIsUnset = (value: unknown) => (typeof value === "string" && value.trim() === "" ? undefined : value);

/** An optional variable: blank or unset is undefined, anything else must pass `schema`. */
export const optional = <T extends z.ZodType>(schema: T) => z.preprocess(blankIsUnset, schema.optional());

/** Required text, trimmed; blank or unset fails with `message`. */
export const requiredText = (message: string) => z.preprocess(blankIsUnset, z.string({ error: message }).trim());

/** Optional text, trimmed. */
export const optionalText = () => optional(z.string().trim().min(1));

/** A whole number in [min, max], written in decimal. */
export const wholeNumber = (min: number, max: number) =>
  z.string().trim().regex(/^\d+$/, "must be a whole number").transform(Number).pipe(z.number().int().min(min).max(max));

/** LOG_LEVEL, any case; default info. */
export const logLevel = () =>
  z.preprocess(
    (value) => (typeof blankIsUnset(value) === "string" ? (value as string).trim().toLowerCase() : undefined),
    z.enum(LOG_LEVELS, `must be one of ${LOG_LEVELS.join(", ")}`).default("info"),
  );

/**
 * Parses `env` with `schema`; a bad setting throws ConfigurationError whose message names every bad
 * variable ("relay configuration: RELAY_HEALTH_PORT: must be a whole number") and whose `variable` is
 * the first. `what` names the deployable.
 */
export function parseEnvironment<T extends z.ZodType>(schema: T, env: Environment, what: string): z.output<T> {
  const parsed = schema.safeParse(env);
  if (parsed.success) return parsed.data;
  const issues = fieldIssues("", parsed.error, "environment");
  throw new ConfigurationError(`${what}: ${formatIssues(issues)}`, issues[0]?.field);
}
