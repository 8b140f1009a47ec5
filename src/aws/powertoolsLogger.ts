/**
 * Our Logger interface over the Powertools Logger: JSON lines with the Lambda context (request id,
 * cold start, function name) that Powertools adds, plus the attributes the runner attaches with
 * child() (DVM uid, phase, generation, attempt) as persistent keys of a Powertools child logger.
 */
import type { Logger as PowertoolsLogger } from "@aws-lambda-powertools/logger";
import type { LogAttributes, Logger } from "../lib/log";

export function powertoolsLogger(logger: PowertoolsLogger): Logger {
  // Attributes are passed as one object so Powertools merges them into the line at top level.
  const extra = (attributes?: LogAttributes) => (attributes && Object.keys(attributes).length > 0 ? [attributes] : []);
  return {
    debug: (message, attributes) => logger.debug(message, ...extra(attributes)),
    info: (message, attributes) => logger.info(message, ...extra(attributes)),
    warn: (message, attributes) => logger.warn(message, ...extra(attributes)),
    error: (message, attributes) => logger.error(message, ...extra(attributes)),
    // createChild copies the parent's level, service, persistent keys and current Lambda context.
    child: (attributes) => powertoolsLogger(logger.createChild({ persistentKeys: attributes })),
  };
}
