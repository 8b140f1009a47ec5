/**
 * The trigger function's configuration: every variable it reads, checked here, once.
 *   TRIGGER_ALLOWED_SOURCES    comma-separated CloudEvent sources it accepts ("prefix*" matches a prefix);
 *                              unset or empty: it refuses every event (and says so once, at cold start)
 *   TRIGGER_ALLOWED_NAMESPACES comma-separated namespaces an event may create a DVM in ("prefix*" matches a
 *                              prefix); unset or empty: it refuses every event (src/events/namespaces.ts)
 *   TRIGGER_ALLOW_ADMIN_NAMESPACES  "true" lets events create DVMs in an admin namespace that
 *                              TRIGGER_ALLOWED_NAMESPACES names exactly; default false
 *   DVM_ADMIN_NAMESPACES       the admin namespaces, as the phase functions read them; default dvm-system
 *   TRIGGER_MAX_EVENT_AGE_SECONDS  the oldest event it acts on, by the event's `time`; default 1 day, at
 *                              most 7 days (its records of handled events live 30 days: handledEventRecords.ts)
 *   LEDGER_TABLE_NAME          the ledger table, where it remembers the events it handled. Required.
 *   TRIGGER_MAX_EVENT_BYTES    the largest event it reads, in bytes; default 256 KiB
 *   TRIGGER_SCHEDULE_HISTORY_LIMIT  completed Stage DVMs kept per schedule (src/events/schedule.ts); older
 *                              completed runs are deleted when the schedule next fires; default 3, 1 to 100
 *   DVM_KUBECONFIG_PARAMETER   SSM SecureString with its own kubeconfig (it may create DVMs); unset: KUBECONFIG
 *   POWERTOOLS_SERVICE_NAME    default dvm-trigger (functionConfig.ts)
 * A bad setting is a ConfigurationError naming the variable.
 */

import { z } from "zod";
import { ENV, type Environment, optional, optionalText, parseEnvironment, requiredText, wholeNumber } from "../config/environment";
import { POLICY_ENV, POLICY_SETTINGS } from "../dvm/policyConfig";
import { flag, listOf, namespacePattern } from "../dvm/policyKinds";
import { checkTriggerNamespaceSettings, type TriggerNamespaceSettings } from "../events/namespaces";
import { MAX_SCHEDULE_HISTORY_LIMIT } from "../events/schedule";
import { definedFields } from "../lib/definedFields";

/** Well below the 30 days its handled-event records live, so a replay can never outlive its record. */
const MAX_EVENT_AGE_SECONDS = 7 * 24 * 60 * 60;

const TriggerEnvSchema = z.object({
  [ENV.triggerAllowedSources]: optional(z.string()),
  [ENV.triggerAllowedNamespaces]: listOf(namespacePattern).default([]),
  [ENV.triggerAllowAdminNamespaces]: flag(false),
  // The phase functions' setting, read the same way.
  [POLICY_ENV.adminNamespaces]: POLICY_SETTINGS.adminNamespaces.schema,
  [ENV.triggerMaxEventAgeSeconds]: optional(wholeNumber(60, MAX_EVENT_AGE_SECONDS)),
  [ENV.ledgerTable]: requiredText("is not set"),
  [ENV.triggerMaxEventBytes]: optional(wholeNumber(1, 6 * 1024 * 1024)),
  [ENV.kubeconfigParameter]: optionalText(),
  [ENV.triggerScheduleHistoryLimit]: optional(wholeNumber(1, MAX_SCHEDULE_HISTORY_LIMIT)),
});

export interface TriggerConfig {
  /** The allow-list's text (src/events/sources.ts parses it); undefined refuses everything. */
  allowedSources?: string;
  namespaces: TriggerNamespaceSettings;
  ledgerTableName: string;
  maxEventAgeSeconds?: number;
  maxEventBytes?: number;
  kubeconfigParameter?: string;
  scheduleHistoryLimit?: number;
}

export function parseTriggerEnv(env: Environment): TriggerConfig {
  const e = parseEnvironment(TriggerEnvSchema, env, "trigger configuration");
  const namespaces: TriggerNamespaceSettings = {
    allowedNamespaces: e[ENV.triggerAllowedNamespaces],
    adminNamespaces: e[POLICY_ENV.adminNamespaces],
    allowAdminNamespaces: e[ENV.triggerAllowAdminNamespaces],
  };
  checkTriggerNamespaceSettings(namespaces);
  return definedFields({
    allowedSources: e[ENV.triggerAllowedSources],
    namespaces,
    ledgerTableName: e[ENV.ledgerTable],
    maxEventAgeSeconds: e[ENV.triggerMaxEventAgeSeconds],
    maxEventBytes: e[ENV.triggerMaxEventBytes],
    kubeconfigParameter: e[ENV.kubeconfigParameter] || undefined,
    scheduleHistoryLimit: e[ENV.triggerScheduleHistoryLimit],
  });
}
