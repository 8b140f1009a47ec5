/**
 * The relay Deployment's settings, from its environment. Every variable is checked here, once, and a
 * bad one stops the process with a ConfigurationError that names it (exit code 2). The local controller
 * builds a RelayConfig itself (infra/dev/local/controller.ts) and passes it in: no environment in between.
 */

import { hostname } from "node:os";
import { z } from "zod";
import { blankIsUnset, ENV, type Environment, logLevel, parseEnvironment } from "../config/environment";
import { definedFields } from "../lib/definedFields";
import type { LogLevel } from "../lib/log";
import { LEADER_ELECTION_DEFAULTS, type LeaderElectionTiming, leaderElectionTimingProblem } from "./leaderElection";
import { DEFAULT_MAX_DVM_SERIES } from "./metrics";

const dnsLabel = z
  .string()
  .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, "must be a namespace name (DNS-1123 label)")
  .max(63);
const intFrom = (min: number, max: number) => z.string().regex(/^\d+$/, "must be a whole number").transform(Number).pipe(z.number().int().min(min).max(max));
const dnsSubdomain = z
  .string()
  .max(253)
  .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/, "must be an object name (DNS-1123 subdomain)");

const EnvSchema = z
  .object({
    /** Path to a kubeconfig for the host cluster; unset: in-cluster config (or ~/.kube/config). */
    [ENV.kubeconfig]: z.preprocess(blankIsUnset, z.string().optional()),
    /** Set by the kubelet in every pod: without KUBECONFIG, the pod's service account is the identity. */
    [ENV.kubernetesServiceHost]: z.preprocess(blankIsUnset, z.string().optional()),
    /** debug, info (default), warn or error. */
    [ENV.logLevel]: logLevel(),
    /** Only DVMs in this namespace; unset: all namespaces. */
    [ENV.relayNamespace]: z.preprocess(blankIsUnset, dnsLabel.optional()),
    /** One Lambda function for every phase. */
    [ENV.relayFunctionName]: z.preprocess(blankIsUnset, z.string().min(1).max(170).optional()),
    /** One Lambda function per phase, named `${prefix}${phase}`. */
    [ENV.relayFunctionPrefix]: z.preprocess(blankIsUnset, z.string().min(1).max(100).optional()),
    /** "Event" (default, fire-and-forget) or "RequestResponse" (waits for the RunResult). */
    [ENV.relayInvocationType]: z.preprocess(blankIsUnset, z.enum(["Event", "RequestResponse"]).default("Event")),
    [ENV.relayHealthPort]: z.preprocess(blankIsUnset, intFrom(0, 65_535).default(8080)),
    /** Periodic resync of every live DVM, ms; 0 turns it off. */
    [ENV.relayResyncMs]: z.preprocess(blankIsUnset, intFrom(0, 86_400_000).default(60_000)),
    [ENV.relayConcurrency]: z.preprocess(blankIsUnset, intFrom(1, 1_000).default(16)),
    /** DVMs with per-DVM series on /metrics (phase, bytes, rate); 0: none. Bounds the exposition's size. */
    [ENV.relayMetricsMaxDvmSeries]: z.preprocess(blankIsUnset, intFrom(0, 100_000).default(DEFAULT_MAX_DVM_SERIES)),
    /** More clusters to watch pods on: "name=/path/to/kubeconfig,name2=/path2". */
    [ENV.relayPodClusters]: z.preprocess(
      blankIsUnset,
      z
        .string()
        .regex(/^[A-Za-z0-9_.-]+=[^,=]+(,[A-Za-z0-9_.-]+=[^,=]+)*$/, 'must be "name=/path/to/kubeconfig[,name=/path]"')
        .optional(),
    ),
    /** "false" runs this replica as the only one: no Lease, it always forwards. Default "true". */
    [ENV.relayLeaderElection]: z.preprocess(blankIsUnset, z.enum(["true", "false"], 'must be "true" or "false"').default("true")),
    /** The Lease the replicas elect their leader on. */
    [ENV.relayLeaseName]: z.preprocess(blankIsUnset, dnsSubdomain.default("dvm-relay")),
    /** Its namespace: the relay's own (the Deployment sets it from the pod's). */
    [ENV.relayLeaseNamespace]: z.preprocess(blankIsUnset, dnsLabel.default("default")),
    /** This replica's name in the Lease; default POD_NAME, else hostname-pid. Unique per replica. */
    [ENV.relayLeaseIdentity]: z.preprocess(blankIsUnset, z.string().min(1).max(253).optional()),
    [ENV.podName]: z.preprocess(blankIsUnset, z.string().min(1).max(253).optional()),
    [ENV.relayLeaseDurationMs]: z.preprocess(blankIsUnset, intFrom(1_000, 3_600_000).default(LEADER_ELECTION_DEFAULTS.leaseDurationMs)),
    [ENV.relayLeaseRenewDeadlineMs]: z.preprocess(blankIsUnset, intFrom(1, 3_600_000).default(LEADER_ELECTION_DEFAULTS.renewDeadlineMs)),
    [ENV.relayLeaseRetryPeriodMs]: z.preprocess(blankIsUnset, intFrom(1, 3_600_000).default(LEADER_ELECTION_DEFAULTS.retryPeriodMs)),
  })
  .superRefine((env, ctx) => {
    const problem = leaderElectionTimingProblem(timingOf(env));
    if (env[ENV.relayLeaderElection] === "true" && problem) ctx.addIssue({ code: "custom", path: [TIMING_VARIABLES[problem.field]], message: problem.message });
  })
  .superRefine((env, ctx) => {
    const named = env[ENV.relayFunctionName] !== undefined;
    const prefixed = env[ENV.relayFunctionPrefix] !== undefined;
    if (named === prefixed) {
      ctx.addIssue({
        code: "custom",
        path: [named ? ENV.relayFunctionPrefix : ENV.relayFunctionName],
        message: named
          ? `set ${ENV.relayFunctionName} or ${ENV.relayFunctionPrefix}, not both`
          : `set ${ENV.relayFunctionName} (one function) or ${ENV.relayFunctionPrefix} (one per phase)`,
      });
    }
  });

const TIMING_VARIABLES = {
  leaseDurationMs: ENV.relayLeaseDurationMs,
  renewDeadlineMs: ENV.relayLeaseRenewDeadlineMs,
  retryPeriodMs: ENV.relayLeaseRetryPeriodMs,
} as const satisfies Record<keyof LeaderElectionTiming, string>;

function timingOf(env: Record<(typeof TIMING_VARIABLES)[keyof LeaderElectionTiming], number>): LeaderElectionTiming {
  return {
    leaseDurationMs: env[ENV.relayLeaseDurationMs],
    renewDeadlineMs: env[ENV.relayLeaseRenewDeadlineMs],
    retryPeriodMs: env[ENV.relayLeaseRetryPeriodMs],
  };
}

/** Leader election among the relay's replicas (src/relay/leaderElection.ts), or none. */
export type RelayLeaderElection = { enabled: false } | ({ enabled: true; namespace: string; name: string; identity: string } & LeaderElectionTiming);

export type RelayFunctionTarget = { kind: "shared"; name: string } | { kind: "perPhase"; prefix: string };

export interface RelayConfig {
  /** Unset: the pod's service account when `inCluster`, else ~/.kube/config. */
  kubeconfigPath?: string;
  inCluster: boolean;
  logLevel: LogLevel;
  namespace?: string;
  target: RelayFunctionTarget;
  invocationType: "Event" | "RequestResponse";
  healthPort: number;
  resyncMs: number;
  concurrency: number;
  /** DVMs with per-DVM series on /metrics (src/relay/metrics.ts). */
  metricsMaxDvmSeries: number;
  podClusters: Array<{ name: string; kubeconfigPath: string }>;
  leaderElection: RelayLeaderElection;
}

/** The relay process's environment: the one read of process.env for the relay. */
export function relayEnvironment(): Environment {
  return process.env;
}

/** Reads the relay's settings from `env`; throws ConfigurationError naming every bad variable. */
export function parseRelayEnv(env: Environment): RelayConfig {
  const e = parseEnvironment(EnvSchema, env, "relay configuration");
  const shared = e[ENV.relayFunctionName];
  return {
    // Blank variables are already undefined (blankIsUnset): dropping undefined drops every unset one.
    ...definedFields({ kubeconfigPath: e[ENV.kubeconfig], namespace: e[ENV.relayNamespace] }),
    inCluster: e[ENV.kubernetesServiceHost] !== undefined,
    logLevel: e[ENV.logLevel],
    target: shared ? { kind: "shared", name: shared } : { kind: "perPhase", prefix: e[ENV.relayFunctionPrefix]! },
    invocationType: e[ENV.relayInvocationType],
    healthPort: e[ENV.relayHealthPort],
    resyncMs: e[ENV.relayResyncMs],
    concurrency: e[ENV.relayConcurrency],
    metricsMaxDvmSeries: e[ENV.relayMetricsMaxDvmSeries],
    podClusters: (e[ENV.relayPodClusters] ?? "")
      .split(",")
      .filter((pair) => pair.length > 0)
      .map((pair) => {
        const [name, kubeconfigPath] = pair.split("=") as [string, string];
        return { name, kubeconfigPath };
      }),
    leaderElection:
      e[ENV.relayLeaderElection] === "true"
        ? {
            enabled: true,
            namespace: e[ENV.relayLeaseNamespace],
            name: e[ENV.relayLeaseName],
            // The pid keeps two processes on one machine apart; a pod's name is already unique.
            identity: e[ENV.relayLeaseIdentity] ?? e[ENV.podName] ?? `${hostname()}-${process.pid}`,
            ...timingOf(e),
          }
        : { enabled: false },
  };
}
