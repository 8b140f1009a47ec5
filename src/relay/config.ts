/**
 * The relay Deployment's settings, from its environment. Every variable is checked here, once, and a
 * bad one stops the process with a message that names it.
 */
import { z } from "zod";
import { fieldIssues, formatIssues } from "../issues";

export class RelayConfigError extends Error {
  override readonly name = "RelayConfigError";
}

const dnsLabel = z.string().regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, "must be a namespace name (DNS-1123 label)").max(63);
const intFrom = (min: number, max: number) =>
  z
    .string()
    .regex(/^\d+$/, "must be a whole number")
    .transform(Number)
    .pipe(z.number().int().min(min).max(max));
const blankIsUnset = (value: unknown) => (typeof value === "string" && value.trim() === "" ? undefined : value);

const EnvSchema = z
  .object({
    /** Path to a kubeconfig for the host cluster; unset: in-cluster config (or ~/.kube/config). */
    KUBECONFIG: z.preprocess(blankIsUnset, z.string().optional()),
    /** Only DVMs in this namespace; unset: all namespaces. */
    RELAY_NAMESPACE: z.preprocess(blankIsUnset, dnsLabel.optional()),
    /** One Lambda function for every phase. */
    RELAY_FUNCTION_NAME: z.preprocess(blankIsUnset, z.string().min(1).max(170).optional()),
    /** One Lambda function per phase, named `${prefix}${phase}`. */
    RELAY_FUNCTION_PREFIX: z.preprocess(blankIsUnset, z.string().min(1).max(100).optional()),
    /** "Event" (default, fire-and-forget) or "RequestResponse" (waits for the RunResult). */
    RELAY_INVOCATION_TYPE: z.preprocess(blankIsUnset, z.enum(["Event", "RequestResponse"]).default("Event")),
    RELAY_HEALTH_PORT: z.preprocess(blankIsUnset, intFrom(0, 65_535).default(8080)),
    /** Periodic resync of every live DVM, ms; 0 turns it off. */
    RELAY_RESYNC_MS: z.preprocess(blankIsUnset, intFrom(0, 86_400_000).default(60_000)),
    RELAY_CONCURRENCY: z.preprocess(blankIsUnset, intFrom(1, 1_000).default(16)),
    /** More clusters to watch pods on: "name=/path/to/kubeconfig,name2=/path2". */
    RELAY_POD_CLUSTERS: z.preprocess(
      blankIsUnset,
      z
        .string()
        .regex(/^[A-Za-z0-9_.-]+=[^,=]+(,[A-Za-z0-9_.-]+=[^,=]+)*$/, 'must be "name=/path/to/kubeconfig[,name=/path]"')
        .optional(),
    ),
  })
  .superRefine((env, ctx) => {
    const named = env.RELAY_FUNCTION_NAME !== undefined;
    const prefixed = env.RELAY_FUNCTION_PREFIX !== undefined;
    if (named === prefixed) {
      ctx.addIssue({
        code: "custom",
        path: [named ? "RELAY_FUNCTION_PREFIX" : "RELAY_FUNCTION_NAME"],
        message: named ? "set RELAY_FUNCTION_NAME or RELAY_FUNCTION_PREFIX, not both" : "set RELAY_FUNCTION_NAME (one function) or RELAY_FUNCTION_PREFIX (one per phase)",
      });
    }
  });

export type RelayFunctionTarget = { kind: "shared"; name: string } | { kind: "perPhase"; prefix: string };

export interface RelayConfig {
  kubeconfigPath?: string;
  namespace?: string;
  target: RelayFunctionTarget;
  invocationType: "Event" | "RequestResponse";
  healthPort: number;
  resyncMs: number;
  concurrency: number;
  podClusters: Array<{ name: string; kubeconfigPath: string }>;
}

/** Reads the relay's settings from `env`; throws RelayConfigError naming the first bad variable. */
export function parseRelayEnv(env: Record<string, string | undefined>): RelayConfig {
  const parsed = EnvSchema.safeParse(env);
  if (!parsed.success) {
    throw new RelayConfigError(`relay configuration: ${formatIssues(fieldIssues("", parsed.error, "environment"))}`);
  }
  const e = parsed.data;
  return {
    ...(e.KUBECONFIG ? { kubeconfigPath: e.KUBECONFIG } : {}),
    ...(e.RELAY_NAMESPACE ? { namespace: e.RELAY_NAMESPACE } : {}),
    target: e.RELAY_FUNCTION_NAME ? { kind: "shared", name: e.RELAY_FUNCTION_NAME } : { kind: "perPhase", prefix: e.RELAY_FUNCTION_PREFIX! },
    invocationType: e.RELAY_INVOCATION_TYPE,
    healthPort: e.RELAY_HEALTH_PORT,
    resyncMs: e.RELAY_RESYNC_MS,
    concurrency: e.RELAY_CONCURRENCY,
    podClusters: (e.RELAY_POD_CLUSTERS ?? "")
      .split(",")
      .filter((pair) => pair.length > 0)
      .map((pair) => {
        const [name, kubeconfigPath] = pair.split("=") as [string, string];
        return { name, kubeconfigPath };
      }),
  };
}
