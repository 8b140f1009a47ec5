/**
 * The trigger function's configuration: every variable it reads, checked here, once.
 *   TRIGGER_ALLOWED_SOURCES    comma-separated CloudEvent sources it accepts ("prefix*" matches a prefix);
 *                              unset or empty: it refuses every event (and says so once, at cold start)
 *   TRIGGER_MAX_EVENT_BYTES    the largest event it reads, in bytes; default 256 KiB
 *   DVM_KUBECONFIG_PARAMETER   SSM SecureString with its own kubeconfig (it may create DVMs); unset: KUBECONFIG
 *   POWERTOOLS_SERVICE_NAME    default dvm-trigger (functionConfig.ts)
 * A bad setting is a ConfigurationError naming the variable.
 */
import { z } from "zod";
import { ENV, type Environment, optional, optionalText, parseEnvironment, wholeNumber } from "../config/environment";

const TriggerEnvSchema = z.object({
  [ENV.triggerAllowedSources]: optional(z.string()),
  [ENV.triggerMaxEventBytes]: optional(wholeNumber(1, 6 * 1024 * 1024)),
  [ENV.kubeconfigParameter]: optionalText(),
});

export interface TriggerConfig {
  /** The allow-list's text (src/events/sources.ts parses it); undefined refuses everything. */
  allowedSources?: string;
  maxEventBytes?: number;
  kubeconfigParameter?: string;
}

export function parseTriggerEnv(env: Environment): TriggerConfig {
  const e = parseEnvironment(TriggerEnvSchema, env, "trigger configuration");
  return {
    ...(e[ENV.triggerAllowedSources] !== undefined ? { allowedSources: e[ENV.triggerAllowedSources] } : {}),
    ...(e[ENV.triggerMaxEventBytes] !== undefined ? { maxEventBytes: e[ENV.triggerMaxEventBytes] } : {}),
    ...(e[ENV.kubeconfigParameter] ? { kubeconfigParameter: e[ENV.kubeconfigParameter] } : {}),
  };
}
