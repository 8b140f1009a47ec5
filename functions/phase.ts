/**
 * Lambda entry point of the phase function(s): one invocation runs at most one phase of one DVM.
 * The relay invokes it asynchronously with a ReconcileRequest as the payload. Everything that is not
 * Lambda plumbing lives in src/ (src/aws/phaseHandler.ts for the decisions).
 */
import { Logger } from "@aws-lambda-powertools/logger";
import { injectLambdaContext } from "@aws-lambda-powertools/logger/middleware";
import { Metrics } from "@aws-lambda-powertools/metrics";
import { logMetrics } from "@aws-lambda-powertools/metrics/middleware";
import middy from "@middy/core";
import { functionEnvironment, serviceNameOf } from "../src/aws/functionConfig";
import { createPhaseHandler } from "../src/aws/phaseHandler";
import { METRICS_NAMESPACE } from "../src/aws/phaseMetrics";
import { powertoolsLogger } from "../src/aws/powertoolsLogger";
import { runnerFromEnv } from "../src/aws/runnerFromEnv";

// Module scope: created once per container and reused by every invocation it serves.
const env = functionEnvironment();
const serviceName = serviceNameOf(env, "dvm-phase");
const logger = new Logger({ serviceName });
const metrics = new Metrics({ namespace: METRICS_NAMESPACE, serviceName });
const log = powertoolsLogger(logger);

export const handler = middy(createPhaseHandler({ runner: runnerFromEnv(env, log), log, metrics }))
  .use(injectLambdaContext(logger))
  .use(logMetrics(metrics, { captureColdStartMetric: true }));
