/**
 * Which HTTP CONNECT proxy a stunnel client dials. The client's stunnel.conf lives in a transfer Secret
 * in the source namespace, mounted into a pod there: whoever may read Secrets or exec into pods in that
 * namespace reads the proxy's address and credential. So the operator's proxy (DVM_STUNNEL_TCP_PROXY),
 * which may carry the operator's own credential, goes only into admin namespaces; every other namespace
 * gets the tenant proxy (DVM_STUNNEL_TCP_PROXY_TENANT), a setting the operator accepts tenants can see.
 * A credential-free operator proxy holds nothing secret and serves tenants when no tenant proxy is set.
 * Both settings have the form "http://host:port" or "http://user:password@host:port" (parseProxyUrl).
 */
import { configValue, hostName, TransferConfigError } from "../transfer/configText";
import { ProxyCredentials, type StunnelProxy } from "../transfer/stunnel";
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

const PROXY_FORM = '"http://host:port" or "http://user:password@host:port"';

/**
 * The proxy of DVM_STUNNEL_TCP_PROXY, or why the value cannot be one. The reason never quotes the value
 * (it may hold a password), only the part that is wrong.
 */
export function parseProxyUrl(text: string): StunnelProxy | string {
  // The URL parser would drop tabs and line breaks silently; a value that has them is refused instead.
  if (/[\u0000-\u0020\u007f]/.test(text))
    return `must not contain blanks, control characters or line breaks (percent-encode them in a password): ${PROXY_FORM}`;
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return `must be a URL, ${PROXY_FORM}`;
  }
  if (url.protocol !== "http:") return `must be an http:// URL (an HTTP CONNECT proxy), ${PROXY_FORM}`;
  if ((url.pathname !== "/" && url.pathname !== "") || url.search !== "" || url.hash !== "") return `must have no path, query or fragment: ${PROXY_FORM}`;
  // An IPv6 literal comes bracketed; stunnel's connect takes it bare.
  const host = url.hostname.replace(/^\[(.*)\]$/, "$1");
  const port = url.port === "" ? 80 : Number(url.port);
  try {
    hostName("host", host);
  } catch (error) {
    return error instanceof TransferConfigError ? "must name the proxy by a host name or IP address" : String(error);
  }
  if (url.username === "" && url.password === "") return { host, port };
  if (url.username === "" || url.password === "") return "must give both a user name and a password, or neither";
  let username: string;
  let password: string;
  try {
    username = decodeURIComponent(url.username);
    password = decodeURIComponent(url.password);
  } catch {
    return "must percent-encode the user name and password correctly";
  }
  if (username.includes(":")) return "must not have ':' in the user name";
  for (const [field, value] of [
    ["user name", username],
    ["password", password],
  ] as const) {
    try {
      configValue(field, value);
    } catch (error) {
      // The reason only ("must not contain control characters or line breaks"), never the value.
      return `${field}: ${error instanceof TransferConfigError ? error.message.slice(field.length + 2) : "is not valid"}`;
    }
  }
  return { host, port, credentials: new ProxyCredentials(username, password) };
}

/** The value of DVM_STUNNEL_TCP_PROXY that parseProxyUrl reads back as `proxy` (credentials included). */
export function proxyUrl(proxy: StunnelProxy): string {
  const host = proxy.host.includes(":") ? `[${proxy.host}]` : proxy.host;
  const credentials = proxy.credentials ? `${encodeURIComponent(proxy.credentials.username)}:${encodeURIComponent(proxy.credentials.password())}@` : "";
  return `http://${credentials}${host}:${proxy.port}`;
}
