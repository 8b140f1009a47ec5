/**
 * Which HTTP CONNECT proxy a stunnel client dials. The client's stunnel.conf lives in a transfer Secret
 * in the source namespace, mounted into a pod there: whoever may read Secrets or exec into pods in that
 * namespace reads the proxy's address and credential. So the operator's proxy (DVM_STUNNEL_TCP_PROXY),
 * which may carry the operator's own credential, goes only into admin namespaces; every other namespace
 * gets the tenant proxy (DVM_STUNNEL_TCP_PROXY_TENANT), a setting the operator accepts tenants can see.
 * A credential-free operator proxy holds nothing secret and serves tenants when no tenant proxy is set.
 */
import type { StunnelProxy } from "../transfer/stunnel";
import type { DvmSpec } from "./types";

export interface ProxyPolicy {
  /** DVM_STUNNEL_TCP_PROXY: for client Secrets in admin namespaces (and everywhere when it has no credential). */
  tcpProxy?: StunnelProxy;
  /** DVM_STUNNEL_TCP_PROXY_TENANT: for client Secrets outside the admin namespaces; readable there. */
  tenantTcpProxy?: StunnelProxy;
}

export type ClientProxy = { kind: "direct" } | { kind: "proxy"; proxy: StunnelProxy } | { kind: "refused"; reason: string };

export const TENANT_PROXY_REFUSAL =
  "the operator's DVM_STUNNEL_TCP_PROXY carries a credential, which is never written into a namespace outside the admin namespaces: " +
  "the operator must set DVM_STUNNEL_TCP_PROXY_TENANT (a proxy, with or without a credential, that tenants may read)";

/** The proxy of a client Secret in a namespace that is (`admin`) or is not an admin namespace. */
export function clientProxyFor(policy: ProxyPolicy, admin: boolean): ClientProxy {
  const { tcpProxy, tenantTcpProxy } = policy;
  const chosen = admin ? (tcpProxy ?? tenantTcpProxy) : (tenantTcpProxy ?? tcpProxy);
  if (!chosen) return { kind: "direct" };
  if (!admin && chosen === tcpProxy && tcpProxy.credentials) return { kind: "refused", reason: TENANT_PROXY_REFUSAL };
  return { kind: "proxy", proxy: chosen };
}

/**
 * The PVCs whose client Secret would have to carry the operator's credential outside the admin
 * namespaces. The client Secret goes where data is read: the PVC's namespace, or on a Rollback its
 * target namespace.
 */
export function proxyViolations(
  spec: Pick<DvmSpec, "persistentVolumeClaims" | "persistentVolumeClaimSelector" | "migrationType">,
  policy: ProxyPolicy,
  isAdminNamespace: (namespace: string) => boolean,
): Array<{ field: string; message: string }> {
  const rollback = spec.migrationType === "Rollback";
  // Every PVC a selector selects lives in its one namespace (and goes to its one target namespace).
  const named = [
    ...(spec.persistentVolumeClaims ?? []).map((pvc, i) => ({ pvc, base: `spec.persistentVolumeClaims[${i}]` })),
    ...(spec.persistentVolumeClaimSelector ? [{ pvc: spec.persistentVolumeClaimSelector, base: "spec.persistentVolumeClaimSelector" }] : []),
  ];
  return named.flatMap(({ pvc, base }) => {
    const field = rollback && pvc.targetNamespace !== undefined ? "targetNamespace" : "namespace";
    const sourceNamespace = rollback ? (pvc.targetNamespace ?? pvc.namespace) : pvc.namespace;
    const choice = clientProxyFor(policy, isAdminNamespace(sourceNamespace));
    return choice.kind === "refused" ? [{ field: `${base}.${field}`, message: choice.reason }] : [];
  });
}
