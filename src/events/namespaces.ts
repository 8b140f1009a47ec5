/**
 * Where an event may create a DVM (TRIGGER_ALLOWED_NAMESPACES). Whoever may send an event names the
 * namespace, and a DVM in an admin namespace (DVM_ADMIN_NAMESPACES) may reach PVCs and Secrets of every
 * namespace and run as root (src/dvm/policy.ts). So the sender gets only the namespaces the operator
 * lists, and an admin namespace only when the operator asks for exactly that: the namespace named in the
 * list by its full name (a "prefix*" entry never covers one) and TRIGGER_ALLOW_ADMIN_NAMESPACES=true.
 * An empty list refuses every event. The trigger's RBAC (infra/deploy/k8s/trigger-rbac.yaml) is bound in
 * the listed namespaces only, so the API server refuses the rest as well.
 */

import { ENV } from "../config/environment";
import { ConfigurationError } from "../config/error";
import { POLICY_ENV } from "../dvm/policyConfig";
import { type AllowList, allowList } from "../lib/allowList";

export interface TriggerNamespaceRule {
  readonly allowed: AllowList;
  /** Why an event may not create a DVM in `namespace`; undefined when it may. */
  refusal(namespace: string): string | undefined;
}

export interface TriggerNamespaceSettings {
  /** TRIGGER_ALLOWED_NAMESPACES: exact names or "prefix*". */
  allowedNamespaces: readonly string[];
  /** DVM_ADMIN_NAMESPACES, as the phase functions read it. */
  adminNamespaces: readonly string[];
  /** TRIGGER_ALLOW_ADMIN_NAMESPACES. */
  allowAdminNamespaces: boolean;
}

export function triggerNamespaceRule(settings: TriggerNamespaceSettings): TriggerNamespaceRule {
  const allowed = allowList(settings.allowedNamespaces);
  const admin = allowList(settings.adminNamespaces);
  const namedExactly = (namespace: string) => allowed.patterns.includes(namespace);
  return {
    allowed,
    refusal(namespace) {
      if (!allowed.allows(namespace)) return `namespace "${namespace}" is not in ${ENV.triggerAllowedNamespaces}`;
      if (admin.allows(namespace) && !(settings.allowAdminNamespaces && namedExactly(namespace))) {
        return (
          `namespace "${namespace}" is an admin namespace (${POLICY_ENV.adminNamespaces}), whose DVMs may reach every namespace; ` +
          `events may create DVMs there only when ${ENV.triggerAllowedNamespaces} names it and ${ENV.triggerAllowAdminNamespaces} is true`
        );
      }
      return undefined;
    },
  };
}

/**
 * The settings checked at cold start: an admin namespace named in the list without the explicit
 * permission is a mistake to stop on, not to discover when the first event is refused.
 */
export function checkTriggerNamespaceSettings(settings: TriggerNamespaceSettings): void {
  if (settings.allowAdminNamespaces) return;
  const admin = allowList(settings.adminNamespaces);
  const named = allowList(settings.allowedNamespaces).patterns.filter((entry) => !entry.endsWith("*") && admin.allows(entry));
  if (named.length > 0) {
    throw new ConfigurationError(
      `trigger configuration: ${ENV.triggerAllowedNamespaces}: ${named.join(", ")} ${named.length === 1 ? "is an admin namespace" : "are admin namespaces"} ` +
        `(${POLICY_ENV.adminNamespaces}); set ${ENV.triggerAllowAdminNamespaces}=true to let events create admin DVMs there, or remove ${named.length === 1 ? "it" : "them"}`,
      ENV.triggerAllowedNamespaces,
    );
  }
}
