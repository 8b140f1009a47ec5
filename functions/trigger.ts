/**
 * Lambda entry point of the trigger function: a CloudEvent asking for a migration
 * (io.dvm-serverless.migration.requested.v1) creates one DirectVolumeMigration, however often it is
 * delivered. It arrives over the HTTP API (POST /migrations, structured or binary CloudEvents) or from
 * an EventBridge rule. Everything that is not Lambda plumbing lives in src/ (src/aws/triggerHandler.ts
 * adapts, src/events/trigger.ts decides); docs/events.md describes the event.
 */
import { Logger } from "@aws-lambda-powertools/logger";
import { injectLambdaContext } from "@aws-lambda-powertools/logger/middleware";
import { Metrics } from "@aws-lambda-powertools/metrics";
import { logMetrics } from "@aws-lambda-powertools/metrics/middleware";
import middy from "@middy/core";
import { functionEnvironment, serviceNameOf } from "../src/aws/functionConfig";
import { METRICS_NAMESPACE } from "../src/aws/phaseMetrics";
import { powertoolsLogger } from "../src/aws/powertoolsLogger";
import { createTriggerHandler, lazyTriggerFromEnv } from "../src/aws/triggerHandler";

// Module scope: created once per container; the trigger itself is configured at its first event (the
// allow-list warnings are logged once per container).
const env = functionEnvironment();
const serviceName = serviceNameOf(env, "dvm-trigger");
const logger = new Logger({ serviceName });
const metrics = new Metrics({ namespace: METRICS_NAMESPACE, serviceName });
const log = powertoolsLogger(logger);

export const handler = middy(createTriggerHandler({ trigger: lazyTriggerFromEnv(env, log), log, metrics }))
  .use(injectLambdaContext(logger))
  .use(logMetrics(metrics, { captureColdStartMetric: true }));
