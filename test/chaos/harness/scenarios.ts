/**
 * Chaos scenarios: each runs small migrations for our runner and for the baseline side by side, under
 * the same injected faults, and reports what the API servers and the phase bodies saw.
 */

import { randomUUID } from "node:crypto";
import { rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LambdaClient } from "@aws-sdk/client-lambda";
import type { KubeConfig } from "@kubernetes/client-node";
import { LambdaTransport, sharedFunction } from "../../../src/aws/lambdaTransport";
import { DynamoPhaseLedger } from "../../../src/aws/ledger";
import { CONDITION } from "../../../src/dvm/conditions";
import { type ExecutablePhaseName, ITINERARIES, isPhaseName, type PhaseName } from "../../../src/dvm/itinerary";
import { CuttableProxy, proxiedKubeConfig } from "../../support/cuttableProxy";
import { BaselineController } from "./baseline";
import { CRASH_PHASES, HEARTBEAT_PHASE, OVERRUN_PHASE } from "./bodies";
import { ConflictWriter } from "./conflicts";
import { Deliverer, type DeliveryCounts } from "./delivery";
import { type Driver, driveLoops, RelayDriver } from "./drivers";
import type { DynamoCounts } from "./dynamoFaults";
import { CHAOS_ELECTION_TIMING, ElectedRelays, type Failover } from "./electedRelays";
import type { ChaosEnvironment } from "./environment";
import { createMigrations, type PreparedMigrations, prepareMigrations, type StartedMigration } from "./fixture";
import { type Observatory, positionRank } from "./observatory";
import { createApplications, judgeQuiesce, QUIESCE_APPLICATIONS, type QuiesceTally, WorkloadHistory } from "./quiesceWorkloads";
import { seededRandom, sleep } from "./random";
import { SpecEditor } from "./specEdits";
import { type Distribution, distribution, type RepeatSummary, summarizeRepeats, Tally, transitionOverhead } from "./tally";
import { OursInProcess, OursInWorkers, type Target, type TargetKind } from "./targets";
import { ThrottlingApiServer, ThrottlingLambda } from "./throttling";

export type Fault =
  | "stale"
  | "duplicates"
  | "concurrent"
  | "crash"
  | "crashTwice"
  | "crashBeforeStatus"
  | "conflicts"
  | "throttle"
  | "lostReply"
  | "slowBody"
  | "slowApi"
  | "specEdit"
  | "relay"
  | "relayFailover"
  | "apiserver"
  | "throttleBurst"
  | "apiThrottle"
  | "invokeThrottle"
  | "quiesce";

/** DynamoDB throttling bursts: every request refused for 1.5 s of every 5 s (the ledger's own tries last about 375 ms). */
const DYNAMO_BURSTS = { periodMs: 5_000, burstMs: 1_500 } as const;
/** API server throttling bursts: 429 with Retry-After: 1 to every request but watches for 2 s of every 6 s. */
const API_BURSTS = { periodMs: 6_000, burstMs: 2_000, retryAfterSeconds: 1 } as const;
/** Lambda Invoke throttling bursts: TooManyRequestsException (429, Retry-After: 1) for 2 s of every 5 s. */
const INVOKE_BURSTS = { periodMs: 5_000, burstMs: 2_000, retryAfterSeconds: 1 } as const;

/** The slow API server: this share of its answers held back this long. */
const SLOW_API = { ms: 2_000, fraction: 0.05 } as const;
/**
 * The quiesce fault: each process dies right after the scale-down and right after the restore, once per
 * DVM, and the final sync fails, so the restore runs after the crash.
 */
const QUIESCE_CRASH_PHASES: readonly ExecutablePhaseName[] = ["QuiesceApplications", "UnquiesceAfterFailure"];
const QUIESCE_FAIL_PHASES: readonly ExecutablePhaseName[] = ["RunRsyncOperations"];
/** The phase whose status write is preceded by a crash (crashBeforeStatus): it carries the per-PVC results. */
const STATUS_CRASH_PHASE = "RunRsyncOperations";
/**
 * Lease of the slow-body fault: short, so the overrun and the heartbeat take seconds, yet long enough
 * that its margin (a quarter of it) exceeds the clock skew and the runner waits a moment for a body
 * that is stopped while an answer is in flight.
 */
const SLOW_BODY_LEASE_MS = 10_000;

/** Lease of the crash faults: short, so a takeover after a crash waits seconds, not Lambda's two minutes. */
const CRASH_LEASE_MS = 6_000;
/**
 * With crashes and a slow API server at once (the "all" mix): the function timeout (lease minus 1 s) must
 * fit a body's API calls at the slow server's pace, as Lambda's 60 s does in production. 5 s fits two
 * held-back answers, and a cleanup phase makes dozens of calls (5% of them 2 s late), so it timed out
 * on every attempt and the migrations never finished.
 */
const SLOW_API_CRASH_LEASE_MS = 15_000;

/** What each fault injects, for reports. */
export const FAULT_DESCRIPTIONS: Record<Fault, string> = {
  stale:
    "after every phase transition, the previous request is delivered again and its read is served the DVM one write behind (a lagging informer cache); ours only: the baselines' stale reads are their own cache's",
  duplicates:
    "every request delivered 2-3 times, concurrently with jitter, shuffled; half the time one copy is held back and arrives after the next request (baselines: every watch event handled 2-3 times, merged by the work queue)",
  concurrent:
    "3 independent delivery loops per DVM (2 relay replicas when the relay drives; baselines: 2 controller replicas, as during a rollout without leader election)",
  crash: `the phase function runs in a child process that SIGKILLs itself right after the ${CRASH_PHASES.join(" and ")} bodies return (side effects done, completion not recorded); lease ${CRASH_LEASE_MS / 1000} s (${SLOW_API_CRASH_LEASE_MS / 1000} s with the slow API server), and like Lambda the process is killed when an invocation outlives its timeout (lease minus 1 s)`,
  crashTwice: `as crash, and the takeover's body is killed the same way (the ${CRASH_PHASES.join(" and ")} bodies die on their first two attempts; the third completes)`,
  crashBeforeStatus: `the phase function process SIGKILLs itself after the ledger recorded ${STATUS_CRASH_PHASE}'s completion and before the status write that leaves it, once per DVM: the repair must apply what the body decided (the per-PVC results)`,
  conflicts: "a concurrent writer patches an annotation of every DVM every 150-400 ms, so guarded status writes answer 409",
  throttle: "25% of DynamoDB requests fail before they are sent (70% ProvisionedThroughputExceededException, 30% HTTP 500), at most twice in a row per request",
  lostReply:
    "20% of DynamoDB writes (UpdateItem) are applied but their answer is lost (the caller sees a timeout and retries), at most twice in a row per request",
  slowBody: `in process (nothing but the runner bounds a body): ${OVERRUN_PHASE} stalls for three leases on its first attempt without renewing (the runner's deadline, lease minus margin, must stop it), ${HEARTBEAT_PHASE} works for two leases renewing its lease every quarter of one; 2 delivery loops per DVM try to enter meanwhile; lease ${SLOW_BODY_LEASE_MS / 1000} s`,
  slowApi: `the runner (and the baseline) reach the host API server through a proxy that holds back ${SLOW_API.fraction * 100}% of the answers for ${SLOW_API.ms / 1000} s each`,
  specEdit:
    "mid-migration every unfinished DVM's spec is edited (the CRD's CEL rule must refuse each, 422); then one edit per target is pushed through with the rule taken out of the CRD for that edit: that DVM must fail with the generation-change condition",
  relayFailover: `3 relay replicas elect a leader on a Lease (${CHAOS_ELECTION_TIMING.leaseDurationMs / 1000} s lease, ${CHAOS_ELECTION_TIMING.renewDeadlineMs / 1000} s renew deadline), each through its own proxy; mid-migration the leader is killed (cut off for good, forwards nothing more), later the next leader is partitioned from the API server until a standby forwards`,
  relay:
    "the real relay drives the DVMs; it is restarted mid-migration, then cut off from the API server while the DVMs change, etcd is compacted and the API server restarted, so its watch resumes into 410 Gone",
  apiserver: "the host API server (where the DVMs live) is restarted mid-migration (with the relay fault, the restart of the 410 gap is that restart)",
  throttleBurst: `DynamoDB throttling bursts: every request refused for ${DYNAMO_BURSTS.burstMs / 1000} s of every ${DYNAMO_BURSTS.periodMs / 1000} s (half ProvisionedThroughputExceededException, half ThrottlingException), far beyond the ledger's own five tries (about 375 ms): completions, failures and releases must be carried through by the runner's retries until the lease's end`,
  apiThrottle: `the runner (and the baseline) reach the host API server through a front that answers 429 TooManyRequests with Retry-After: ${API_BURSTS.retryAfterSeconds} to every request but watches for ${API_BURSTS.burstMs / 1000} s of every ${API_BURSTS.periodMs / 1000} s`,
  quiesce: `every DVM is a CutOver with spec.quiesce of a source namespace holding ${QUIESCE_APPLICATIONS.map((a) => `a ${a.kind} ${a.name} (${a.kind === "CronJob" ? `suspend ${a.suspend}` : `${a.replicas} replicas`})`).join(", ")} that mount its PVCs; the phase function (the baseline's controller) dies right after the ${QUIESCE_CRASH_PHASES.join(" and ")} bodies return, once per DVM (lease ${CRASH_LEASE_MS / 1000} s), and ${QUIESCE_FAIL_PHASES.join(", ")} fails, so the restore runs after the crash. The baseline runs MTC's quiesce and unquiesce (mtcQuiesce.ts) reading the workloads from its informer cache`,
  invokeThrottle: `ours only: the real relay forwards through the real LambdaTransport (Event invocations, the AWS SDK's own retries) to a Lambda stand-in that answers TooManyRequestsException (429, Retry-After: ${INVOKE_BURSTS.retryAfterSeconds}) for ${INVOKE_BURSTS.burstMs / 1000} s of every ${INVOKE_BURSTS.periodMs / 1000} s`,
};

export interface Scenario {
  name: string;
  faults: readonly Fault[];
}

export const SCENARIOS: readonly Scenario[] = [
  { name: "none", faults: [] },
  { name: "stale-replay", faults: ["stale"] },
  { name: "duplicates", faults: ["duplicates"] },
  { name: "concurrent", faults: ["concurrent"] },
  { name: "crash", faults: ["crash"] },
  { name: "crash-twice", faults: ["crashTwice"] },
  { name: "crash-before-status", faults: ["crashBeforeStatus"] },
  { name: "conflicts", faults: ["conflicts"] },
  { name: "throttle", faults: ["throttle"] },
  { name: "lost-replies", faults: ["lostReply"] },
  { name: "slow-body", faults: ["slowBody"] },
  { name: "slow-apiserver", faults: ["slowApi"] },
  { name: "spec-edit", faults: ["specEdit"] },
  { name: "relay-failover", faults: ["relayFailover"] },
  { name: "relay-restart-410", faults: ["relay"] },
  { name: "apiserver-restart", faults: ["apiserver"] },
  { name: "throttle-bursts", faults: ["throttleBurst"] },
  { name: "api-429", faults: ["apiThrottle"] },
  { name: "invoke-throttle", faults: ["invokeThrottle"] },
  // Repeats after the scale-down from all three sides: a crash, duplicate deliveries, stale reads.
  { name: "quiesce", faults: ["quiesce", "duplicates", "stale"] },
  {
    name: "all",
    faults: [
      "stale",
      "duplicates",
      "concurrent",
      "crash",
      "crashTwice",
      "crashBeforeStatus",
      "conflicts",
      "throttle",
      "lostReply",
      "slowBody",
      "slowApi",
      "specEdit",
      "relay",
      "relayFailover",
      "apiserver",
    ],
  },
];

export function scenarioNamed(name: string): Scenario {
  const found = SCENARIOS.find((s) => s.name === name);
  if (!found) throw new Error(`no chaos scenario "${name}" (known: ${SCENARIOS.map((s) => s.name).join(", ")})`);
  return found;
}

/** Scenarios that restart or compact the host control plane, or change its CRD: the environment must own it. */
export function needsOwnHost(scenario: Scenario): boolean {
  return scenario.faults.includes("apiserver") || scenario.faults.includes("relay") || scenario.faults.includes("specEdit");
}

export interface ScenarioOptions {
  env: ChaosEnvironment;
  observatory: Observatory;
  scenario: Scenario;
  /** Default: both, side by side under the same faults. */
  targets?: readonly TargetKind[];
  /** DVMs per target. Default 2. */
  dvms?: number;
  /** PVCs per DVM. Default 2. */
  pvcs?: number;
  seed?: number;
  /** A migration not Completed this long after driving started is stuck. Default 120 s. */
  timeoutMs?: number;
  /** Fields added to every DVM's spec (e.g. transferPodAnnotations for kwok's run time). */
  spec?: Record<string, unknown>;
  /** Cap on requeue delays (time compression). Default 200 ms. */
  capMs?: number;
  /**
   * Ledger lease. Default 6 s with crash injection (the takeover waits it out), 30 s otherwise. With
   * crash injection the worker's function timeout is 1 s shorter, as Lambda's is shorter than the lease.
   */
  leaseMs?: number;
  log?: (line: string) => void;
}

export interface TargetReport {
  scenario: string;
  target: TargetKind;
  migrations: number;
  completed: number;
  /** Migrations not Completed within the bound. */
  stuck: string[];
  repeats: RepeatSummary;
  /** Invocations whose DVM read was older than the target's own last write (baselines: measured; ours: the injected stale replays). */
  staleReads: number;
  /** Phases whose completion was recorded (ledger; for the baseline: the body returned) but the status never moved past them. */
  lostTransitions: string[];
  /** status.phase moved backwards, as the DVM watch saw it. */
  regressions: string[];
  /** Migrations that ended with a Failed condition: "name: message". */
  failed: string[];
  /** Succeeded migrations whose final status lacks a succeeded rsync operation for one of their PVCs. */
  withoutResults: string[];
  /** Processes killed between a ledger completion and its status write. */
  statusCrashes: number;
  /** Objects the migrations created (watch), and names created more than once. */
  created: number;
  createdByKind: Record<string, number>;
  createdTwice: string[];
  invocations: number;
  invocationsByKind: Record<string, number>;
  /** Wall time of all invocations together (reconciles, for the baselines), ms. */
  invocationMs: number;
  /** Phase bodies entered, by phase. */
  executionsByPhase: Record<string, number>;
  uids: string[];
  /** Phase transitions made (distinct DVM and phase whose body returned an outcome). */
  transitions: number;
  invocationsPerPhase: number;
  overheadMs: Distribution;
  timeToCompleteMs: Distribution;
  statusConflicts: number;
  takeovers: number;
  /** Worker processes killed at the function timeout (each may interrupt one phase, like a crash). */
  timeouts: number;
  delivery: DeliveryCounts;
  dynamo?: DynamoCounts;
  /** The quiesce fault: what became of the quiesced applications (quiesceWorkloads.ts). */
  quiesce?: QuiesceTally;
  /** Faults of the whole run this target was part of. */
  injected: Injected;
}

export interface Injected {
  conflictPatches: number;
  relayRestarts: number;
  relayRelists: number;
  apiserverRestarts: number;
  relayGaps: number;
  /** Spec edits refused by the API server, accepted although the rule was in place (must be 0), and the DVMs whose edit was pushed through. */
  specEditsRefused: number;
  specEditsAcceptedWithRule: number;
  specEditsForced: string[];
  /** Relay leader killed or partitioned, and how long until another replica forwarded. */
  relayFailovers: Failover[];
  /** Forwards a replaced relay leader sent after its successor started forwarding (must be 0). */
  relayOverlappingForwards: number;
  /** Answers of the host API server held back (slow API server). */
  slowAnswers: number;
  /** Requests the throttled API server front answered 429, and Invokes the Lambda stand-in refused. */
  apiThrottled: number;
  invokeThrottled: number;
}

export interface ScenarioReport {
  scenario: Scenario;
  reports: TargetReport[];
  injected: Injected;
  durationMs: number;
}

interface TargetRun {
  kind: TargetKind;
  prepared: PreparedMigrations;
  tally: Tally;
  target: Target;
  deliverer: Deliverer;
  migrations: StartedMigration[];
}

const FAILURE_ONLY = new Set<string>(ITINERARIES.VolumeMigrationFailed);

function phaseRank(phase: string): number {
  return positionRank(FAILURE_ONLY.has(phase) && phase !== "Completed" ? "VolumeMigrationFailed" : "VolumeMigration", phase);
}

export async function runScenario(options: ScenarioOptions): Promise<ScenarioReport> {
  const { env, observatory, scenario } = options;
  const history = observatory.dvms;
  const has = (fault: Fault) => scenario.faults.includes(fault);
  const log = options.log ?? (() => undefined);
  const seed = options.seed ?? 1;
  const capMs = options.capMs ?? 200;
  const timeoutMs = options.timeoutMs ?? 120_000;
  const quiesce = has("quiesce");
  const crashes = has("crash") || has("crashTwice") || quiesce;
  const workers = crashes || has("crashBeforeStatus");
  const crashPhases = [...(has("crash") || has("crashTwice") ? CRASH_PHASES : []), ...(quiesce ? QUIESCE_CRASH_PHASES : [])];
  const failPhases = quiesce ? [...QUIESCE_FAIL_PHASES] : [];
  if (quiesce && (options.pvcs ?? 2) < 2) throw new Error("the quiesce fault needs 2 PVCs per DVM (its applications mount vol-0 and vol-1)");
  const spec = quiesce ? { migrationType: "CutOver", ...options.spec } : options.spec;
  const leaseMs = options.leaseMs ?? (crashes ? (has("slowApi") ? SLOW_API_CRASH_LEASE_MS : CRASH_LEASE_MS) : has("slowBody") ? SLOW_BODY_LEASE_MS : 30_000);
  const functionTimeoutMs = Math.max(1_000, leaseMs - 1_000);
  const plane = env.host.plane;
  if (needsOwnHost(scenario) && !plane) throw new Error(`scenario ${scenario.name} restarts the host API server: start the environment with host: "start"`);
  const id = `${scenario.name.slice(0, 12).replace(/-+$/, "")}-${randomUUID().slice(0, 5)}`;
  const began = Date.now();
  // The runner's view of the host cluster: through a proxy that answers slowly, with that fault.
  const slowProxy = has("slowApi")
    ? await CuttableProxy.start(new URL(env.host.kubeConfig.getCurrentCluster()!.server), { delay: { ...SLOW_API, random: seededRandom(seed * 19) } })
    : undefined;
  // Or through a front that throttles it in bursts (429 with Retry-After).
  const apiFront = has("apiThrottle") ? await ThrottlingApiServer.start(env.host.kubeConfig, { ...API_BURSTS, random: seededRandom(seed * 23) }) : undefined;
  const runnerHost = slowProxy ? proxiedKubeConfig(env.host.kubeConfig, slowProxy.url) : apiFront ? apiFront.kubeConfig() : env.host.kubeConfig;
  const runnerHostPath = slowProxy || apiFront ? writeKubeconfig(runnerHost, id) : env.host.kubeconfigPath;

  const runs: TargetRun[] = await Promise.all(
    (options.targets ?? ["ours", "baseline"]).map(async (kind, index) => {
      const prepared = await prepareMigrations(env, {
        prefix: `cx-${id}-${kind === "ours" ? "o" : "b"}`,
        count: options.dvms ?? 2,
        pvcs: options.pvcs ?? 2,
        ...(spec ? { spec } : {}),
      });
      if (quiesce) await createApplications(env.host.kubeConfig, sourceNamespaces(prepared));
      const tally = new Tally();
      const throttle =
        has("throttle") || has("lostReply")
          ? { fraction: has("throttle") ? 0.25 : 0, ...(has("lostReply") ? { lostReplyFraction: 0.2 } : {}), seed: seed * 13 }
          : has("throttleBurst")
            ? { fraction: 0, bursts: DYNAMO_BURSTS, seed: seed * 13 }
            : undefined;
      let target: Target;
      if (kind === "ours") {
        target = workers
          ? new OursInWorkers(
              {
                hostKubeconfigPath: runnerHostPath,
                dynamo: env.dynamo,
                tableName: env.tableName,
                leaseMs,
                functionTimeoutMs,
                crashPhases,
                failPhases,
                statusCrashPhases: has("crashBeforeStatus") ? [STATUS_CRASH_PHASE] : [],
                crashAttempts: has("crashTwice") ? 2 : 1,
                slowBodies: has("slowBody"),
                ...(throttle ? { throttle } : {}),
              },
              tally,
            )
          : new OursInProcess(env, tally, { leaseMs, slowBodies: has("slowBody"), hostKubeConfig: runnerHost, ...(throttle ? { throttle } : {}) });
      } else {
        // Behind the same slow API server as ours with that fault (controllers() below gets its view).
        target = new BaselineController(kind, tally, { crashPhases, failPhases, mtcQuiesce: quiesce });
      }
      const deliverer = new Deliverer(target, history, { duplicates: has("duplicates"), staleReplay: has("stale") }, seededRandom(seed * 31 + index));
      return { kind, prepared, tally, target, deliverer, migrations: [] };
    }),
  );

  const injected: Injected = {
    conflictPatches: 0,
    relayRestarts: 0,
    relayRelists: 0,
    apiserverRestarts: 0,
    relayGaps: 0,
    specEditsRefused: 0,
    specEditsAcceptedWithRule: 0,
    specEditsForced: [],
    relayFailovers: [],
    relayOverlappingForwards: 0,
    slowAnswers: 0,
    apiThrottled: 0,
    invokeThrottled: 0,
  };
  let lambdas: ThrottlingLambda[] = [];
  let proxy: CuttableProxy | undefined;
  let relayDrivers: Driver[] = [];
  let elected: ElectedRelays[] = [];
  const specEditor = has("specEdit") ? new SpecEditor(env.host.kubeConfig) : undefined;
  let conflicts: ConflictWriter | undefined;
  let drivingStart = Date.now();
  const workloads = quiesce ? new WorkloadHistory(env.host.kubeConfig) : undefined;
  try {
    await workloads?.start();
    for (const run of runs) run.migrations = await createMigrations(env, run.prepared);
    await Promise.all(runs.map((run) => (run.target instanceof OursInWorkers ? run.target.prestart(run.migrations.map((m) => m.uid)) : undefined)));
    const all = runs.flatMap((run) => run.migrations);
    const allDone = () => all.every((m) => history.completedAt(m.uid) !== undefined);
    drivingStart = Date.now();
    const deadline = drivingStart + timeoutMs;
    log(`${scenario.name}: ${all.length} DVMs (${runs.map((r) => `${r.kind} ${r.prepared.namespace}`).join(", ")})`);

    const writer = new ConflictWriter(env.host.kubeConfig, all, history, seededRandom(seed * 7));
    if (has("conflicts")) {
      conflicts = writer;
      writer.start();
    }

    // The baselines drive themselves (informers, a work queue) like the relay: both are "drivers". Ours is
    // driven by the relay (one replica or elected ones) under the relay faults, else by delivery loops.
    if (has("relay")) proxy = await CuttableProxy.start(new URL(plane!.server));
    const hostView = proxy ? proxiedKubeConfig(env.host.kubeConfig, proxy.url) : env.host.kubeConfig;
    if (has("invokeThrottle"))
      lambdas = await Promise.all(
        runs.map((run, i) => ThrottlingLambda.start({ ...INVOKE_BURSTS, random: seededRandom(seed * 29 + i) }, (request) => run.deliverer.deliver(request))),
      );
    relayDrivers = runs.flatMap((run, i): Driver[] => {
      const replicas = has("concurrent") ? 2 : 1;
      const namespace = run.prepared.namespace;
      if (run.target instanceof BaselineController)
        return [
          run.target.controllers({
            kubeConfig: slowProxy || apiFront ? runnerHost : hostView,
            namespace,
            replicas,
            duplicates: has("duplicates"),
            pollMs: capMs,
            random: seededRandom(seed * 19 + i),
          }),
        ];
      if (has("invokeThrottle")) {
        const lambda = lambdas[i]!;
        const client = new LambdaClient({ endpoint: lambda.url, region: "us-east-1", credentials: { accessKeyId: "chaos", secretAccessKey: "chaos" } });
        const transport = new LambdaTransport({ functionFor: sharedFunction("dvm-phase"), invocationType: "Event", client });
        return [
          new RelayDriver({
            hostKubeConfig: hostView,
            destination: env.destination.kubeConfig,
            namespace,
            deliverer: run.deliverer,
            replicas,
            capMs,
            transport,
          }),
        ];
      }
      if (!has("relay") || has("relayFailover")) return [];
      return [new RelayDriver({ hostKubeConfig: hostView, destination: env.destination.kubeConfig, namespace, deliverer: run.deliverer, replicas, capMs })];
    });
    for (const driver of relayDrivers) driver.start();
    const ours = runs.filter((run) => !(run.target instanceof BaselineController));
    if (has("relayFailover")) {
      elected = ours.map(
        (run) =>
          new ElectedRelays({
            hostKubeConfig: env.host.kubeConfig,
            server: new URL(env.host.kubeConfig.getCurrentCluster()!.server),
            destination: env.destination.kubeConfig,
            namespace: run.prepared.namespace,
            deliverer: run.deliverer,
            replicas: 3,
            capMs,
          }),
      );
      await Promise.all(elected.map((e) => e.start()));
    }
    const driving = Promise.all([
      history.waitUntil(allDone, timeoutMs),
      ...ours
        .filter(() => !has("relay") && !has("relayFailover") && !has("invokeThrottle"))
        .map((run, i) =>
          driveLoops(run.deliverer, history, run.migrations, {
            loopsPerDvm: has("concurrent") ? 3 : has("slowBody") ? 2 : 1,
            capMs,
            deadline,
            random: seededRandom(seed * 17 + i),
          }),
        ),
    ]);

    // Disruptions of the control plane and the relay, triggered by progress so they land mid-migration.
    const reached = (phase: PhaseName) => () => allDone() || all.some((m) => phaseRankOf(history.latestByUid(m.uid)?.status) >= phaseRank(phase));
    const waitFor = async (phase: PhaseName) => (await history.waitUntil(reached(phase), Math.max(0, deadline - Date.now()))) && !allDone();
    const disruptions = (async () => {
      // With the relay fault too, the 410 gap below restarts the API server mid-migration: that restart
      // stands for both (one restart of the local control plane takes about 15 s).
      if (has("apiserver") && !has("relay") && (await waitFor("CreateDestinationNamespaces"))) {
        log(`${scenario.name}: restarting the host API server`);
        const t = Date.now();
        await plane!.restartApiServer();
        injected.apiserverRestarts++;
        log(`${scenario.name}: API server back after ${((Date.now() - t) / 1000).toFixed(1)} s`);
      }
      if (has("relayFailover") && (await waitFor("CreateDestinationPVCs"))) {
        log(`${scenario.name}: killing the relay leader`);
        for (const failover of await Promise.all(elected.map((e) => e.killLeader()))) {
          injected.relayFailovers.push(failover);
          log(`${scenario.name}: relay leader killed, a standby forwarded after ${failover.ms ?? "(never)"} ms`);
        }
      }
      if (has("relay") && (await waitFor("CreateRsyncEndpoint"))) {
        log(`${scenario.name}: restarting the relay`);
        await Promise.all([...relayDrivers.map((d) => d.restart()), ...elected.map((e) => e.restart())]);
        injected.relayRestarts++;
      }
      if (specEditor && (await waitFor("EnsureRsyncEndpointReady"))) {
        const open = all.filter((m) => history.completedAt(m.uid) === undefined);
        await specEditor.editEach(open);
        // One DVM per target gets its edit through (a CRD without the rule).
        for (const run of runs) {
          const victim = run.migrations.find((m) => history.completedAt(m.uid) === undefined);
          if (victim) await specEditor.forceThrough(victim);
        }
        log(`${scenario.name}: ${specEditor.counts.refused} spec edits refused, pushed through for ${specEditor.counts.forced.join(", ") || "none"}`);
      }
      if (has("relayFailover") && (await waitFor("CreateRsyncConfig"))) {
        log(`${scenario.name}: partitioning the relay leader`);
        for (const failover of await Promise.all(elected.map((e) => e.partitionLeader()))) {
          injected.relayFailovers.push(failover);
          log(`${scenario.name}: relay leader partitioned, a standby forwarded after ${failover.ms ?? "(never)"} ms`);
        }
      }
      if (has("relay") && (await waitFor("CreateStunnelConfig"))) {
        log(`${scenario.name}: cutting the relay off, compacting etcd, restarting the API server`);
        proxy?.cut();
        for (const e of elected) e.cutAll();
        for (let i = 0; i < 40 && (relayDrivers.some((d) => d.watchConnected()) || elected.some((e) => e.watchConnected())); i++) await sleep(50);
        // Changes the relay cannot see while cut off; its resourceVersion then predates the compaction.
        await Promise.all(all.filter((m) => history.completedAt(m.uid) === undefined).map((m) => writer.touch(m).catch(() => undefined)));
        await plane!.compactEtcd();
        await plane!.restartApiServer();
        injected.apiserverRestarts++;
        proxy?.resume();
        for (const e of elected) e.resumeAll();
        injected.relayGaps++;
        log(`${scenario.name}: relay reconnected`);
      }
    })();
    // Awaited below; this only keeps a failure from going unhandled while the drivers still run.
    disruptions.catch(() => undefined);

    const progress = setInterval(() => {
      const at = all.map((m) => history.latestByUid(m.uid)?.status.phase ?? "-");
      log(`${scenario.name}: +${((Date.now() - drivingStart) / 1000).toFixed(0)} s ${at.join(" ")}`);
    }, 10_000);
    try {
      await driving;
      await history.waitUntil(allDone, Math.max(0, deadline - Date.now()));
      await disruptions;
    } finally {
      clearInterval(progress);
    }
  } finally {
    await conflicts?.stop();
    for (const driver of relayDrivers) await driver.stop();
    for (const e of elected) await e.stop();
    for (const lambda of lambdas) await lambda.close();
    await apiFront?.close();
    await proxy?.close();
    await slowProxy?.close();
    if (slowProxy || apiFront) rmSync(runnerHostPath, { force: true });
    await Promise.all(runs.map((run) => run.target.close()));
    await workloads?.stop();
  }
  injected.conflictPatches = conflicts?.patches ?? 0;
  injected.relayRelists = relayDrivers.reduce((sum, d) => sum + d.relists(), 0);
  injected.relayOverlappingForwards = elected.reduce((sum, e) => sum + e.overlappingForwards(), 0);
  injected.slowAnswers = slowProxy?.delayedAnswers ?? 0;
  injected.apiThrottled = apiFront?.throttled ?? 0;
  injected.invokeThrottled = lambdas.reduce((sum, l) => sum + l.throttled, 0);
  if (specEditor)
    Object.assign(injected, {
      specEditsRefused: specEditor.counts.refused,
      specEditsAcceptedWithRule: specEditor.counts.acceptedWithRule,
      specEditsForced: [...specEditor.counts.forced],
    });

  const reports: TargetReport[] = [];
  for (const run of runs) reports.push(await reportFor(run, scenario, observatory, env, drivingStart, injected, workloads));
  return { scenario, reports, injected, durationMs: Date.now() - began };
}

function countBy(values: readonly string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const v of values) out[v] = (out[v] ?? 0) + 1;
  return out;
}

/** A kubeconfig file for worker processes (the slow API server's view); removed when the run ends. */
function writeKubeconfig(kubeConfig: KubeConfig, id: string): string {
  const path = join(tmpdir(), `dvm-chaos-${id}.kubeconfig`);
  writeFileSync(path, kubeConfig.exportConfig(), { mode: 0o600 });
  return path;
}

/** The namespaces of the migrations' source PVCs. */
function sourceNamespaces(prepared: PreparedMigrations): string[] {
  const claims = prepared.specs.flatMap((s) =>
    Array.isArray(s.spec.persistentVolumeClaims) ? (s.spec.persistentVolumeClaims as Array<{ namespace: string }>) : [],
  );
  return [...new Set(claims.map((c) => c.namespace))];
}

function pvcCount(prepared: PreparedMigrations, name: string): number {
  const claims = prepared.specs.find((s) => s.name === name)?.spec.persistentVolumeClaims;
  return Array.isArray(claims) ? claims.length : 0;
}

function phaseRankOf(status: { itinerary?: string | undefined; phase?: string | undefined } | undefined): number {
  return positionRank(status?.itinerary, status?.phase);
}

async function reportFor(
  run: TargetRun,
  scenario: Scenario,
  observatory: Observatory,
  env: ChaosEnvironment,
  drivingStart: number,
  injected: Injected,
  workloads: WorkloadHistory | undefined,
): Promise<TargetReport> {
  const history = observatory.dvms;
  const uids = new Set(run.migrations.map((m) => m.uid));
  const { bodies, invocations } = run.tally.forDvms(uids);
  const repeats = summarizeRepeats(bodies);

  const completedPhases = new Map<string, Set<string>>();
  if (run.kind === "ours") {
    const client = env.dynamoClient();
    const ledger = new DynamoPhaseLedger({ client, tableName: env.tableName });
    for (const uid of uids) completedPhases.set(uid, new Set((await ledger.history(uid)).filter((e) => e.state === "COMPLETED").map((e) => e.key.phase)));
    client.destroy();
  } else {
    for (const uid of uids)
      completedPhases.set(uid, new Set(bodies.filter((b) => b.uid === uid && (b.outcome === "advance" || b.outcome === "fail")).map((b) => b.phase)));
  }

  const lostTransitions: string[] = [];
  const regressions: string[] = [];
  const stuck: string[] = [];
  const failed: string[] = [];
  const withoutResults: string[] = [];
  const times: number[] = [];
  for (const migration of run.migrations) {
    const final = history.latestByUid(migration.uid)?.status;
    const failure = final?.conditions?.find((c) => c.type === CONDITION.Failed && c.status === "True");
    if (failure) failed.push(`${migration.name}: ${failure.message ?? failure.reason ?? "(no message)"}`);
    const pvcs = pvcCount(run.prepared, migration.name);
    const succeededOps = (final?.rsyncOperations ?? []).filter((op) => op.succeeded).length;
    if (final?.phase === "Completed" && !failure && succeededOps < pvcs)
      withoutResults.push(`${migration.name}: ${succeededOps} of ${pvcs} PVCs with a succeeded rsync operation in the final status`);
    const finalRank = phaseRankOf(final);
    if (final?.phase !== "Completed") stuck.push(`${migration.namespace}/${migration.name} at ${final?.phase ?? "(no status)"}`);
    for (const phase of completedPhases.get(migration.uid) ?? []) {
      if (final?.phase !== "Completed" && isPhaseName(phase) && finalRank <= phaseRank(phase))
        lostTransitions.push(`${migration.name}: ${phase} recorded complete, status still at ${final?.phase ?? "(none)"}`);
    }
    for (const [from, to] of history.regressions(migration.uid))
      regressions.push(`${migration.name}: ${from.phase} (rv ${from.resourceVersion}) -> ${to.phase} (rv ${to.resourceVersion})`);
    const completedAt = history.completedAt(migration.uid);
    if (completedAt !== undefined) times.push(completedAt - drivingStart);
  }

  const transitions = new Set(bodies.filter((b) => b.outcome === "advance" || b.outcome === "fail").map((b) => `${b.uid}/${b.phase}/${b.generation}`)).size;
  const creations = observatory.creations.forDvms(uids);
  const dynamo = run.target.dynamoCounts();
  let quiesce: QuiesceTally | undefined;
  if (workloads) {
    // Ours keeps what it quiesced in the status (and the ledger); MTC keeps nothing but the annotations.
    const statuses =
      run.kind === "ours"
        ? new Map(
            run.migrations.flatMap((m) => {
              const listed = history.latestByUid(m.uid)?.status.quiescedApplications ?? [];
              return [...new Set(listed.map((a) => a.namespace))].map((ns) => [ns, listed.filter((a) => a.namespace === ns)] as const);
            }),
          )
        : undefined;
    quiesce = judgeQuiesce(workloads, sourceNamespaces(run.prepared), statuses);
    if (run.target instanceof BaselineController) quiesce.refusedWrites = run.target.mtc.refusedWrites;
  }
  return {
    scenario: scenario.name,
    target: run.kind,
    migrations: run.migrations.length,
    completed: run.migrations.length - stuck.length,
    stuck,
    failed,
    withoutResults,
    statusCrashes: run.tally.statusCrashes.filter((key) => uids.has(key.split("/")[0]!)).length,
    repeats,
    staleReads: invocations.filter((i) => i.stale).length,
    lostTransitions,
    regressions,
    created: creations.created,
    createdByKind: creations.byKind,
    createdTwice: creations.repeated,
    invocations: invocations.length,
    invocationsByKind: countBy(invocations.map((i) => i.kind)),
    invocationMs: invocations.reduce((sum, i) => sum + i.durationMs, 0),
    executionsByPhase: countBy(bodies.map((b) => b.phase)),
    uids: [...uids],
    transitions,
    invocationsPerPhase: transitions > 0 ? invocations.length / transitions : 0,
    overheadMs: transitionOverhead(invocations),
    timeToCompleteMs: distribution(times),
    statusConflicts: invocations.reduce((sum, i) => sum + i.statusConflicts, 0),
    takeovers: invocations.filter((i) => i.takeover).length,
    timeouts: run.tally.timeouts.filter((uid) => uids.has(uid)).length,
    delivery: { ...run.deliverer.counts },
    ...(dynamo ? { dynamo } : {}),
    ...(quiesce ? { quiesce } : {}),
    injected: { ...injected },
  };
}

/**
 * Our runner, then each baseline, each alone under the scenario's faults (so neither's load skews the
 * other's timings), merged into one report. The baselines get their own bound (`baselineTimeoutMs`):
 * under some faults they never finish, and what matters is what they did meanwhile.
 */
export async function compareScenario(options: ScenarioOptions & { baselineTimeoutMs?: number; baselines?: readonly TargetKind[] }): Promise<ScenarioReport> {
  const ours = await runScenario({ ...options, targets: ["ours"] });
  const runs = [ours];
  for (const kind of options.baselines ?? (["baseline", "fresh-get"] as const))
    runs.push(await runScenario({ ...options, targets: [kind], timeoutMs: options.baselineTimeoutMs ?? options.timeoutMs ?? 120_000 }));
  return {
    scenario: options.scenario,
    reports: runs.flatMap((r) => r.reports),
    injected: ours.injected,
    durationMs: runs.reduce((sum, r) => sum + r.durationMs, 0),
  };
}
