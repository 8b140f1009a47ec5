/**
 * What both Lambda functions read the same way: their environment (the one read of process.env for
 * functions/; each function's own settings are parsed by phaseConfig.ts and triggerConfig.ts) and
 * POWERTOOLS_SERVICE_NAME, the service name in their logs and metrics.
 */
import { z } from "zod";
import { ENV, type Environment, optionalText, parseEnvironment } from "../config/environment";

export function functionEnvironment(): Environment {
  return process.env;
}

/** POWERTOOLS_SERVICE_NAME, or `fallback` (each function has its own: dvm-phase, dvm-trigger). */
export function serviceNameOf(env: Environment, fallback: string): string {
  return parseEnvironment(z.object({ [ENV.serviceName]: optionalText() }), env, "function configuration")[ENV.serviceName] ?? fallback;
}
