/**
 * The relay Deployment's settings, from its environment. Every variable is checked here, once, and a
 * bad one stops the process with a message that names it.
 */
import { hostname } from "node:os";
import { z } from "zod";
import { fieldIssues, formatIssues } from "../issues";
import { LEADER_ELECTION_DEFAULTS, type LeaderElectionTiming, leaderElectionTimingProblem } from "./leaderElection";

export class RelayConfigError extends Error {
  override readonly name = "RelayConfigError";
}

const dnsLabel = z
  .string()
  .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, "must be a namespace name (DNS-1123 label)")
  .max(63);
const intFrom = (min: number, max: number) => z.string().regex(/^\d+$/, "must be a whole number").transform(Number).pipe(z.number().int().min(min).max(max));
const dnsSubdomain = z
  .string()
  .max(253)
  .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/, "must be an object name (DNS-1123 subdomain)");
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
    /** "false" runs this replica as the only one: no Lease, it always forwards. Default "true". */
    RELAY_LEADER_ELECTION: z.preprocess(blankIsUnset, z.enum(["true", "false"], 'must be "true" or "false"').default("true")),
    /** The Lease the replicas elect their leader on. */
    RELAY_LEASE_NAME: z.preprocess(blankIsUnset, dnsSubdomain.default("dvm-relay")),
    /** Its namespace: the relay's own (the Deployment sets it from the pod's). */
    RELAY_LEASE_NAMESPACE: z.preprocess(blankIsUnset, dnsLabel.default("default")),
    /** This replica's name in the Lease; default POD_NAME, else hostname-pid. Unique per replica. */
    RELAY_LEASE_IDENTITY: z.preprocess(blankIsUnset, z.string().min(1).max(253).optional()),
    POD_NAME: z.preprocess(blankIsUnset, z.string().min(1).max(253).optional()),
    RELAY_LEASE_DURATION_MS: z.preprocess(blankIsUnset, intFrom(1_000, 3_600_000).default(LEADER_ELECTION_DEFAULTS.leaseDurationMs)),
    RELAY_LEASE_RENEW_DEADLINE_MS: z.preprocess(blankIsUnset, intFrom(1, 3_600_000).default(LEADER_ELECTION_DEFAULTS.renewDeadlineMs)),
    RELAY_LEASE_RETRY_PERIOD_MS: z.preprocess(blankIsUnset, intFrom(1, 3_600_000).default(LEADER_ELECTION_DEFAULTS.retryPeriodMs)),
  })
  .superRefine((env, ctx) => {
    const problem = leaderElectionTimingProblem(timingOf(env));
    if (env.RELAY_LEADER_ELECTION === "true" && problem) ctx.addIssue({ code: "custom", path: [TIMING_VARIABLES[problem.field]], message: problem.message });
  })
  .superRefine((env, ctx) => {
    const named = env.RELAY_FUNCTION_NAME !== undefined;
    const prefixed = env.RELAY_FUNCTION_PREFIX !== undefined;
    if (named === prefixed) {
      ctx.addIssue({
        code: "custom",
        path: [named ? "RELAY_FUNCTION_PREFIX" : "RELAY_FUNCTION_NAME"],
        message: named
          ? "set RELAY_FUNCTION_NAME or RELAY_FUNCTION_PREFIX, not both"
          : "set RELAY_FUNCTION_NAME (one function) or RELAY_FUNCTION_PREFIX (one per phase)",
      });
    }
  });

const TIMING_VARIABLES: Record<keyof LeaderElectionTiming, string> = {
  leaseDurationMs: "RELAY_LEASE_DURATION_MS",
  renewDeadlineMs: "RELAY_LEASE_RENEW_DEADLINE_MS",
  retryPeriodMs: "RELAY_LEASE_RETRY_PERIOD_MS",
};

function timingOf(env: { RELAY_LEASE_DURATION_MS: number; RELAY_LEASE_RENEW_DEADLINE_MS: number; RELAY_LEASE_RETRY_PERIOD_MS: number }): LeaderElectionTiming {
  return { leaseDurationMs: env.RELAY_LEASE_DURATION_MS, renewDeadlineMs: env.RELAY_LEASE_RENEW_DEADLINE_MS, retryPeriodMs: env.RELAY_LEASE_RETRY_PERIOD_MS };
}

/** Leader election among the relay's replicas (src/relay/leaderElection.ts), or none. */
export type RelayLeaderElection = { enabled: false } | ({ enabled: true; namespace: string; name: string; identity: string } & LeaderElectionTiming);

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
  leaderElection: RelayLeaderElection;
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
    leaderElection:
      e.RELAY_LEADER_ELECTION === "true"
        ? {
            enabled: true,
            namespace: e.RELAY_LEASE_NAMESPACE,
            name: e.RELAY_LEASE_NAME,
            // The pid keeps two processes on one machine apart; a pod's name is already unique.
            identity: e.RELAY_LEASE_IDENTITY ?? e.POD_NAME ?? `${hostname()}-${process.pid}`,
            ...timingOf(e),
          }
        : { enabled: false },
  };
}
