/**
 * The operator's migration policy (src/dvm/policy.ts) from the environment: the one reader for the phase
 * function (serverless.yml sets the variables), the local controller (which hands them to the function
 * it starts) and the tests. Every variable is checked here, once; a bad one is an error that names it.
 *   DVM_ADMIN_NAMESPACES        comma-separated; "prefix*" matches a prefix. Unset: dvm-system.
 *                               Set but empty: no admin namespace at all.
 *   DVM_TRANSFER_IMAGES         images a DVM may name in spec.transferImage besides the default. Unset or
 *                               empty: only the default.
 *   DVM_DEFAULT_TRANSFER_IMAGE  pinned by a tag other than "latest" or by a digest. Unset: DEFAULT_TRANSFER_IMAGE.
 * The transfer policy (src/dvm/transferPolicy.ts; unset: DEFAULT_TRANSFER_POLICY's value):
 *   DVM_TRANSFER_DELETE, DVM_TRANSFER_PARTIAL, DVM_TRANSFER_HARD_LINKS, DVM_TRANSFER_VERIFY
 *                               "true" or "false": rsync --delete, --partial, --hard-links, --checksum
 *                               when a DVM does not say.
 *   DVM_TRANSFER_MAX_BANDWIDTH_KIB  the highest --bwlimit (KiB/s) a DVM may ask, and its default. Unset: none.
 *   DVM_TRANSFER_CONCURRENT_VOLUMES, DVM_TRANSFER_MAX_CONCURRENT_VOLUMES
 *                               volumes moved at once by default (5), and the most a DVM may ask (50).
 *   DVM_TRANSFER_MAX_VOLUMES_PER_SERVER_POD
 *                               the most destination PVCs one rsync server pod mounts (16); a namespace
 *                               with more gets several server pods. Below the nodes' volume attach limit.
 *   DVM_RSYNC_EXTRA_OPTIONS     comma-separated "--name" / "--name=" a DVM may add. Set but empty: none.
 *   DVM_TRANSFER_MAX_CPU, DVM_TRANSFER_MAX_MEMORY
 *                               the most any request or limit of a transfer pod's rsync may be. Unset: none.
 *   DVM_TRANSFER_POD_ANNOTATIONS comma-separated annotation keys (or "prefix*") a DVM may put on its
 *                               transfer pods. Unset or empty: none.
 *   DVM_STUNNEL_TCP_PROXY       "http://host:port" or "http://user:password@host:port": the HTTP CONNECT
 *                               proxy the stunnel clients tunnel through. Unset: they dial directly.
 *                               A secret when it has credentials: no message here ever repeats it, and
 *                               then it goes only into client Secrets in admin namespaces.
 *   DVM_STUNNEL_TCP_PROXY_TENANT same form: the proxy of client Secrets outside the admin namespaces, which
 *                               tenants can read (src/dvm/proxyPolicy.ts). Unset: DVM_STUNNEL_TCP_PROXY if it
 *                               has no credential; with one, a tenant's DVM is refused before any pod.
 */
import { z } from "zod";
import { ENV, type Environment, parseEnvironment } from "../config/environment";
import { ConfigurationError } from "../config/error";
import { parseAllowList } from "../lib/allowList";
import { configValue, hostName, TransferConfigError } from "../transfer/configText";
import { annotationKeyProblem } from "../transfer/podAnnotations";
import { ProxyCredentials, type StunnelProxy } from "../transfer/stunnel";
import { DEFAULT_ADMIN_NAMESPACES, DEFAULT_MIGRATION_POLICY, type MigrationPolicy } from "./policy";
import { QUANTITY_PATTERN } from "./quantity";
import { extraOptionEntryProblem, type TransferPolicy } from "./transferPolicy";

/** The policy's variables (src/config/environment.ts), by the MigrationPolicy field each sets. */
export const POLICY_ENV = {
  adminNamespaces: ENV.adminNamespaces,
  transferImages: ENV.transferImages,
  defaultTransferImage: ENV.defaultTransferImage,
  transferDelete: ENV.transferDelete,
  transferPartial: ENV.transferPartial,
  transferHardLinks: ENV.transferHardLinks,
  transferVerify: ENV.transferVerify,
  maxBandwidth: ENV.transferMaxBandwidth,
  concurrentVolumes: ENV.transferConcurrentVolumes,
  maxConcurrentVolumes: ENV.transferMaxConcurrentVolumes,
  maxVolumesPerServerPod: ENV.transferMaxVolumesPerServerPod,
  extraOptions: ENV.rsyncExtraOptions,
  maxCpu: ENV.transferMaxCpu,
  maxMemory: ENV.transferMaxMemory,
  podAnnotations: ENV.transferPodAnnotations,
  tcpProxy: ENV.stunnelTcpProxy,
  tenantTcpProxy: ENV.stunnelTcpProxyTenant,
} as const;

export const namespacePattern = z.string().regex(/^([a-z0-9]([-a-z0-9]*[a-z0-9])?|[a-z0-9][-a-z0-9]*\*)$/, 'must be a namespace name or a "prefix*"');
const imagePattern = z.string().regex(/^[^\s,]+$/, "must be an image reference without spaces");

/** A tag other than "latest", or a digest: the reference names one image for good. */
export function isPinnedImage(image: string): boolean {
  if (/@sha256:[0-9a-f]{64}$/.test(image)) return true;
  const lastSegment = image.slice(image.lastIndexOf("/") + 1);
  const tag = lastSegment.includes(":") ? lastSegment.slice(lastSegment.indexOf(":") + 1) : undefined;
  return tag !== undefined && tag !== "" && tag !== "latest";
}

export const listOf = (item: z.ZodString) =>
  z
    .string()
    .transform((text) => [...parseAllowList(text).patterns])
    .pipe(z.array(item));

/** Blank counts as unset, so a deployment can leave a variable empty. */
const unsetIfBlank = (value: unknown) => (typeof value === "string" ? (value.trim() === "" ? undefined : value.trim()) : value);
export const flag = (fallback: boolean) =>
  z.preprocess(
    unsetIfBlank,
    z
      .enum(["true", "false"])
      .default(fallback ? "true" : "false")
      .transform((v) => v === "true"),
  );
const positiveInteger = z.preprocess(
  unsetIfBlank,
  z
    .string()
    .regex(/^[1-9][0-9]*$/, "must be a positive integer")
    .transform(Number)
    .optional(),
);
const quantitySetting = z.preprocess(unsetIfBlank, z.string().regex(QUANTITY_PATTERN, 'must be a quantity such as "2" or "4Gi"').optional());
const extraOptionEntry = z.string().superRefine((entry, ctx) => {
  const problem = extraOptionEntryProblem(entry);
  if (problem) ctx.addIssue({ code: "custom", message: problem });
});
/** An exact annotation key, or "prefix*" ("example.com/*"). */
const annotationEntry = z.string().superRefine((entry, ctx) => {
  const problem = entry.endsWith("*")
    ? /^[A-Za-z0-9][-A-Za-z0-9_./]*\*$/.test(entry)
      ? undefined
      : 'must be an annotation key or a "prefix*"'
    : annotationKeyProblem(entry);
  if (problem) ctx.addIssue({ code: "custom", message: problem });
});
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

const proxySetting = z.preprocess(
  unsetIfBlank,
  z
    .string()
    .transform((text, ctx) => {
      const proxy = parseProxyUrl(text);
      if (typeof proxy !== "string") return proxy;
      ctx.addIssue({ code: "custom", message: proxy });
      return z.NEVER;
    })
    .optional(),
);
const transferDefaults = DEFAULT_MIGRATION_POLICY.transfer;

/** The policy's part of a deployable's environment schema (the phase function's, the local controller's). */
export const POLICY_ENV_SHAPE = {
  [POLICY_ENV.adminNamespaces]: listOf(namespacePattern).default([...DEFAULT_ADMIN_NAMESPACES]),
  [POLICY_ENV.transferImages]: listOf(imagePattern).default([]),
  [POLICY_ENV.defaultTransferImage]: z.preprocess(
    (value) => (typeof value === "string" && value.trim() === "" ? undefined : typeof value === "string" ? value.trim() : value),
    imagePattern.refine(isPinnedImage, 'must be pinned: a tag other than "latest", or @sha256:<digest>').default(DEFAULT_MIGRATION_POLICY.defaultTransferImage),
  ),
  [POLICY_ENV.transferDelete]: flag(transferDefaults.delete),
  [POLICY_ENV.transferPartial]: flag(transferDefaults.partial),
  [POLICY_ENV.transferHardLinks]: flag(transferDefaults.hardLinks),
  [POLICY_ENV.transferVerify]: flag(transferDefaults.verify),
  [POLICY_ENV.maxBandwidth]: positiveInteger,
  [POLICY_ENV.concurrentVolumes]: positiveInteger,
  [POLICY_ENV.maxConcurrentVolumes]: positiveInteger,
  [POLICY_ENV.maxVolumesPerServerPod]: positiveInteger,
  [POLICY_ENV.extraOptions]: listOf(extraOptionEntry).default([...transferDefaults.extraOptions]),
  [POLICY_ENV.maxCpu]: quantitySetting,
  [POLICY_ENV.maxMemory]: quantitySetting,
  [POLICY_ENV.podAnnotations]: listOf(annotationEntry).default([...transferDefaults.podAnnotations]),
  [POLICY_ENV.tcpProxy]: proxySetting,
  [POLICY_ENV.tenantTcpProxy]: proxySetting,
};

type PolicyEnvironment = z.output<z.ZodObject<typeof POLICY_ENV_SHAPE>>;

function transferPolicyOf(e: PolicyEnvironment): TransferPolicy {
  const maxConcurrentVolumes = e[POLICY_ENV.maxConcurrentVolumes] ?? transferDefaults.maxConcurrentVolumes;
  const concurrentVolumes = e[POLICY_ENV.concurrentVolumes] ?? Math.min(transferDefaults.concurrentVolumes, maxConcurrentVolumes);
  if (concurrentVolumes > maxConcurrentVolumes) {
    throw new ConfigurationError(
      `migration policy: ${POLICY_ENV.concurrentVolumes}: must not exceed ${POLICY_ENV.maxConcurrentVolumes} (${maxConcurrentVolumes})`,
      POLICY_ENV.concurrentVolumes,
    );
  }
  const maxBandwidth = e[POLICY_ENV.maxBandwidth];
  const maxCpu = e[POLICY_ENV.maxCpu];
  const maxMemory = e[POLICY_ENV.maxMemory];
  const tcpProxy = e[POLICY_ENV.tcpProxy];
  const tenantTcpProxy = e[POLICY_ENV.tenantTcpProxy];
  return {
    delete: e[POLICY_ENV.transferDelete],
    partial: e[POLICY_ENV.transferPartial],
    hardLinks: e[POLICY_ENV.transferHardLinks],
    verify: e[POLICY_ENV.transferVerify],
    ...(maxBandwidth !== undefined ? { maxBandwidthLimitKiBPerSecond: maxBandwidth } : {}),
    concurrentVolumes,
    maxConcurrentVolumes,
    maxVolumesPerServerPod: e[POLICY_ENV.maxVolumesPerServerPod] ?? transferDefaults.maxVolumesPerServerPod,
    extraOptions: e[POLICY_ENV.extraOptions],
    ...(maxCpu !== undefined || maxMemory !== undefined
      ? { maxResources: { ...(maxCpu !== undefined ? { cpu: maxCpu } : {}), ...(maxMemory !== undefined ? { memory: maxMemory } : {}) } }
      : {}),
    ...(tcpProxy !== undefined ? { tcpProxy } : {}),
    ...(tenantTcpProxy !== undefined ? { tenantTcpProxy } : {}),
    podAnnotations: e[POLICY_ENV.podAnnotations],
  };
}

/** The policy out of an environment parsed with POLICY_ENV_SHAPE. */
export function policyOf(e: PolicyEnvironment): MigrationPolicy {
  return {
    adminNamespaces: e[POLICY_ENV.adminNamespaces],
    transferImages: e[POLICY_ENV.transferImages],
    defaultTransferImage: e[POLICY_ENV.defaultTransferImage],
    transfer: transferPolicyOf(e),
  };
}

/** Reads the policy from `env`; throws ConfigurationError naming every bad variable. */
export function parsePolicyEnv(env: Environment): MigrationPolicy {
  return policyOf(parseEnvironment(z.object(POLICY_ENV_SHAPE), env, "migration policy"));
}

/** The environment that makes parsePolicyEnv return `policy` (for a function started with it). */
export function policyEnv(policy: MigrationPolicy): Record<string, string> {
  const { transfer } = policy;
  return {
    [POLICY_ENV.adminNamespaces]: policy.adminNamespaces.join(","),
    [POLICY_ENV.transferImages]: policy.transferImages.join(","),
    [POLICY_ENV.defaultTransferImage]: policy.defaultTransferImage,
    [POLICY_ENV.transferDelete]: String(transfer.delete),
    [POLICY_ENV.transferPartial]: String(transfer.partial),
    [POLICY_ENV.transferHardLinks]: String(transfer.hardLinks),
    [POLICY_ENV.transferVerify]: String(transfer.verify),
    [POLICY_ENV.concurrentVolumes]: String(transfer.concurrentVolumes),
    [POLICY_ENV.maxConcurrentVolumes]: String(transfer.maxConcurrentVolumes),
    [POLICY_ENV.maxVolumesPerServerPod]: String(transfer.maxVolumesPerServerPod),
    [POLICY_ENV.extraOptions]: transfer.extraOptions.join(","),
    [POLICY_ENV.podAnnotations]: transfer.podAnnotations.join(","),
    ...(transfer.maxBandwidthLimitKiBPerSecond !== undefined ? { [POLICY_ENV.maxBandwidth]: String(transfer.maxBandwidthLimitKiBPerSecond) } : {}),
    ...(transfer.maxResources?.cpu !== undefined ? { [POLICY_ENV.maxCpu]: transfer.maxResources.cpu } : {}),
    ...(transfer.maxResources?.memory !== undefined ? { [POLICY_ENV.maxMemory]: transfer.maxResources.memory } : {}),
    ...(transfer.tcpProxy !== undefined ? { [POLICY_ENV.tcpProxy]: proxyUrl(transfer.tcpProxy) } : {}),
    ...(transfer.tenantTcpProxy !== undefined ? { [POLICY_ENV.tenantTcpProxy]: proxyUrl(transfer.tenantTcpProxy) } : {}),
  };
}
