/**
 * A kubeconfig supplied by a DVM's creator (the Secret named by kubeconfigSecretRef), read as data only.
 * client-node would run an `exec` plugin, call an `auth-provider`, and read any file the kubeconfig
 * names (tokenFile, client-certificate, certificate-authority, ...) inside the phase function, with the
 * function's identity and environment. So the YAML is checked against a schema of static credentials
 * first (token, username/password, client certificate and key data, CA data), and the KubeConfig is
 * built from the checked values alone: nothing else of the text reaches client-node.
 *
 * Problems name the kubeconfig's field (`users[0].user.exec`), never its values: the text holds secrets.
 */
import { parse as parseYaml } from "yaml";
import { z } from "zod";
import { definedFields } from "../lib/definedFields";
import { KubeConfig } from "./kubeConfig";

export interface KubeconfigIssue {
  /** Where in the kubeconfig, e.g. `users[0].user.exec`. */
  path: string;
  message: string;
}

export type StaticKubeConfigResult = { ok: true; kubeConfig: KubeConfig } | { ok: false; issues: KubeconfigIssue[] };

/** Why a key that client-node understands is refused here; any other unknown key is refused as unknown. */
const REFUSED_KEYS: Record<string, string> = {
  exec: "credential plugins (exec) are refused: they run a command in the controller; use a token or client certificate data",
  "auth-provider": "auth providers are refused: use a token or client certificate data",
  tokenFile: "file paths are refused: put the token itself in `token`",
  // client-node's spelling of kubectl's tokenFile: it reads this one.
  "token-file": "file paths are refused: put the token itself in `token`",
  "client-certificate": "file paths are refused: use client-certificate-data",
  "client-key": "file paths are refused: use client-key-data",
  "certificate-authority": "file paths are refused: use certificate-authority-data",
  "proxy-url": "proxies are refused: the controller connects to `server` directly",
  as: "impersonation is refused",
  "as-uid": "impersonation is refused",
  "as-groups": "impersonation is refused",
  "as-user-extra": "impersonation is refused",
};

const base64 = z.string().regex(/^[A-Za-z0-9+/=\s]+$/, "must be base64 data");
const name = z.string().min(1);
const extensions = z.array(z.unknown()).optional();

const ClusterSchema = z
  .object({
    server: z.url({ protocol: /^https?$/, error: "must be an http(s) URL" }),
    "certificate-authority-data": base64.optional(),
    "insecure-skip-tls-verify": z.boolean().optional(),
    "tls-server-name": z.string().min(1).optional(),
    extensions,
  })
  .strict();

const UserSchema = z
  .object({
    token: z.string().min(1).optional(),
    username: z.string().min(1).optional(),
    password: z.string().optional(),
    "client-certificate-data": base64.optional(),
    "client-key-data": base64.optional(),
    extensions,
  })
  .strict()
  .refine((u) => (u["client-certificate-data"] === undefined) === (u["client-key-data"] === undefined), {
    message: "client-certificate-data and client-key-data go together",
  });

// client-node's exportConfig repeats the context's name inside it.
const ContextSchema = z.object({ cluster: name, user: name, namespace: z.string().optional(), name: z.string().optional(), extensions }).strict();

const KubeconfigSchema = z
  .object({
    apiVersion: z.string().optional(),
    kind: z.literal("Config").optional(),
    preferences: z.unknown().optional(),
    extensions,
    clusters: z.array(z.object({ name, cluster: ClusterSchema }).strict()).min(1),
    users: z.array(z.object({ name, user: UserSchema.nullish() }).strict()).default([]),
    contexts: z.array(z.object({ name, context: ContextSchema }).strict()).min(1),
    "current-context": name,
  })
  .strict();

type Kubeconfig = z.infer<typeof KubeconfigSchema>;

export function parseStaticKubeConfig(text: string): StaticKubeConfigResult {
  let document: unknown;
  try {
    document = parseYaml(text);
  } catch {
    // The parser's message quotes the offending line: never repeat it.
    return { ok: false, issues: [{ path: "(document)", message: "is not valid YAML" }] };
  }
  const parsed = KubeconfigSchema.safeParse(document);
  if (!parsed.success) return { ok: false, issues: parsed.error.issues.flatMap(describeIssue) };
  return buildKubeConfig(parsed.data);
}

function buildKubeConfig(config: Kubeconfig): StaticKubeConfigResult {
  const current = config.contexts.find((c) => c.name === config["current-context"]);
  if (!current) return { ok: false, issues: [{ path: "current-context", message: "names no context of this kubeconfig" }] };
  const cluster = config.clusters.find((c) => c.name === current.context.cluster);
  const user = config.users.find((u) => u.name === current.context.user);
  const issues: KubeconfigIssue[] = [];
  if (!cluster) issues.push({ path: `contexts[${config.contexts.indexOf(current)}].context.cluster`, message: "names no cluster of this kubeconfig" });
  if (!user) issues.push({ path: `contexts[${config.contexts.indexOf(current)}].context.user`, message: "names no user of this kubeconfig" });
  if (!cluster || !user) return { ok: false, issues };

  const c = cluster.cluster;
  const u = user.user ?? {};
  const kubeConfig = new KubeConfig();
  // Only the current context's cluster and user: the rest of the file is never used.
  kubeConfig.loadFromOptions({
    clusters: [
      {
        name: cluster.name,
        server: c.server,
        skipTLSVerify: c["insecure-skip-tls-verify"] ?? false,
        // An empty text in the file counts as unset; a password may be empty.
        ...definedFields({ caData: c["certificate-authority-data"] || undefined, tlsServerName: c["tls-server-name"] || undefined }),
      },
    ],
    users: [
      definedFields({
        name: user.name,
        token: u.token || undefined,
        username: u.username || undefined,
        password: u.password,
        certData: u["client-certificate-data"] || undefined,
        keyData: u["client-key-data"] || undefined,
      }),
    ],
    contexts: [{ name: current.name, cluster: cluster.name, user: user.name, ...(current.context.namespace ? { namespace: current.context.namespace } : {}) }],
    currentContext: current.name,
  });
  return { ok: true, kubeConfig };
}

function describeIssue(issue: z.core.$ZodIssue): KubeconfigIssue[] {
  const at = formatPath(issue.path);
  if (issue.code === "unrecognized_keys") {
    return issue.keys.map((key) => ({
      path: at ? `${at}.${key}` : key,
      message: REFUSED_KEYS[key] ?? "is not accepted in a kubeconfig from a Secret (static credentials only)",
    }));
  }
  return [{ path: at || "(document)", message: issue.message }];
}

function formatPath(path: readonly PropertyKey[]): string {
  return path.reduce<string>((out, part) => (typeof part === "number" ? `${out}[${part}]` : out ? `${out}.${String(part)}` : String(part)), "");
}
