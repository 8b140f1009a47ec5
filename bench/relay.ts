/**
 * Relay benchmark against a real kube-apiserver (started here unless KUBECONFIG names a cluster):
 * 1. latency from sending a DVM's create to the start of its forward, p50/p99;
 * 2. coalescing: many spec updates per DVM while forwards are slow, updates in vs forwards out, and
 *    the most forwards of one uid ever in flight at once (must be 1);
 * 3. a function that patches the status on every poll of a wait phase: forwards per second, which the
 *    relay holds to the phase's requeue delay instead of the API server's speed;
 * 4. failover between two relay replicas (real processes, src/relay/main.ts, leader election on a
 *    Lease): the time from killing the leader (SIGKILL), or cutting it off from the API server, until
 *    the standby forwards again, and how soon a cut-off leader stopped forwarding. The lease timings are
 *    the production defaults unless DVM_BENCH_FAILOVER_LEASE_MS / _RENEW_MS / _RETRY_MS say otherwise;
 *    DVM_BENCH_FAILOVER_TRIALS trials of each (default 3). Throughout each trial the live DVM keeps
 *    changing phase (every 250 ms): invocations per transition over the trial, both replicas together.
 * Figures only; nothing here is a pass/fail test.
 *
 *   npx tsx bench/relay.ts [dvms]
 */

import { randomUUID } from "node:crypto";
import { performance } from "node:perf_hooks";
import { pathToFileURL } from "node:url";
import { CoreV1Api, CustomObjectsApi, KubeConfig, PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";
import { type ControlPlane, startControlPlane } from "../infra/dev/local/controlPlane";
import type { ReconcileRequest, RunResult } from "../src/contracts/request";
import { PHASE_NAMES, PHASES, phaseSpec } from "../src/dvm/itinerary";
import { DVM_API_VERSION, DVM_GROUP, DVM_KIND, DVM_PLURAL, DVM_VERSION } from "../src/dvm/types";
import { silentLogger } from "../src/lib/log";
import { LEADER_ELECTION_DEFAULTS, type LeaderElectionTiming } from "../src/relay/leaderElection";
import { Relay } from "../src/relay/relay";
import { CuttableProxy, proxiedKubeConfig } from "../test/support/cuttableProxy";
import { InProcessTransport } from "../test/support/inProcessTransport";
import { RelayProcess } from "../test/support/relayProcess";
import { envNumber } from "./env";

export interface RelayBenchOptions {
  /** DVMs created for the latency figure. Default 200. */
  dvms?: number;
  /** DVMs and spec updates per DVM for the coalescing figure. Default 20 x 20. */
  stormDvms?: number;
  updatesPerDvm?: number;
  /** How long the self-patching function runs. Default 10 s. */
  hotLoopSeconds?: number;
  /** Failover trials of each kind (leader killed, leader partitioned). Default 3; 0 skips them. */
  failoverTrials?: number;
  /** Lease timings of the failover trials. Default: the relay's defaults (LEADER_ELECTION_DEFAULTS). */
  failoverTiming?: LeaderElectionTiming;
  log?: (line: string) => void;
}

const SPEC = { persistentVolumeClaims: [{ name: "data", namespace: "app", targetStorageClass: "standard", targetAccessModes: ["ReadWriteOnce"] }] };
const WAIT_PHASE = PHASE_NAMES.find((p) => PHASES[p].waits)!;
/** Phases that neither wait nor end: a change to one is forwarded at once and schedules nothing after it. */
const MOVING_PHASES = PHASE_NAMES.filter((p) => !phaseSpec(p).waits && !phaseSpec(p).terminal);
const quiet: RunResult = { kind: "waiting", phase: WAIT_PHASE, reason: "bench", requeueAfterMs: 600_000 };
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

export async function runRelayBench(options: RelayBenchOptions = {}): Promise<void> {
  const log = options.log ?? ((line: string) => console.log(line));
  let plane: ControlPlane | undefined;
  let kubeConfig: KubeConfig;
  if (process.env.KUBECONFIG) {
    kubeConfig = new KubeConfig();
    kubeConfig.loadFromDefault();
  } else {
    plane = await startControlPlane({ name: "relay-bench", withKwok: false });
    kubeConfig = plane.kubeConfig();
  }
  const custom = kubeConfig.makeApiClient(CustomObjectsApi);
  const core = kubeConfig.makeApiClient(CoreV1Api);
  const merge = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);
  const newNamespace = async () => {
    const name = `relay-bench-${randomUUID().slice(0, 8)}`;
    await core.createNamespace({ body: { metadata: { name } } });
    return name;
  };
  const createDvm = async (namespace: string, name: string) =>
    (
      (await custom.createNamespacedCustomObject({
        group: DVM_GROUP,
        version: DVM_VERSION,
        namespace,
        plural: DVM_PLURAL,
        body: { apiVersion: DVM_API_VERSION, kind: DVM_KIND, metadata: { name }, spec: SPEC },
      })) as { metadata: { uid: string } }
    ).metadata.uid;
  const dvmRef = (namespace: string, name: string) => ({ group: DVM_GROUP, version: DVM_VERSION, namespace, plural: DVM_PLURAL, name });

  try {
    // 1. Latency: created -> forward started.
    {
      const namespace = await newNamespace();
      const started = new Map<string, number>();
      const relay = new Relay({
        kubeConfig,
        namespace,
        log: silentLogger,
        resyncMs: 0,
        transport: new InProcessTransport(async (request) => {
          if (!started.has(request.uid)) started.set(request.uid, performance.now());
          return quiet;
        }),
      });
      relay.start();
      while (!relay.ready()) await sleep(20);
      // Unmeasured first DVM: on a fresh, quiet apiserver the first event after the list waits for the
      // watch cache to catch up with the list's resourceVersion (about 2 s), which is not the relay's cost.
      const warmup = await createDvm(namespace, "warmup");
      while (!started.has(warmup)) await sleep(20);
      const created = new Map<string, number>();
      for (let i = 0; i < (options.dvms ?? 200); i++) {
        // From the moment the create is sent: its watch event can arrive before the create's own answer.
        const sentAt = performance.now();
        created.set(await createDvm(namespace, `latency-${i}`), sentAt);
      }
      while (started.size < created.size) await sleep(20);
      const latencies = [...created].map(([uid, at]) => started.get(uid)! - at).sort((a, b) => a - b);
      log(`create sent -> forward (${latencies.length} DVMs): p50 ${percentile(latencies, 50).toFixed(1)} ms, p99 ${percentile(latencies, 99).toFixed(1)} ms`);
      await relay.stop();
    }

    // 2. Coalescing under an update storm, with forwards that take 200 ms.
    {
      const namespace = await newNamespace();
      const requests: ReconcileRequest[] = [];
      const active = new Map<string, number>();
      let maxPerUid = 0;
      const relay = new Relay({
        kubeConfig,
        namespace,
        log: silentLogger,
        resyncMs: 0,
        transport: new InProcessTransport(async (request) => {
          requests.push(request);
          active.set(request.uid, (active.get(request.uid) ?? 0) + 1);
          maxPerUid = Math.max(maxPerUid, active.get(request.uid)!);
          await sleep(200);
          active.set(request.uid, active.get(request.uid)! - 1);
          return quiet;
        }),
      });
      relay.start();
      while (!relay.ready()) await sleep(20);
      const dvms = options.stormDvms ?? 20;
      const updates = options.updatesPerDvm ?? 20;
      const names = Array.from({ length: dvms }, (_, i) => `storm-${i}`);
      await Promise.all(names.map((name) => createDvm(namespace, name)));
      const t0 = performance.now();
      await Promise.all(
        names.map(async (name) => {
          for (let u = 1; u <= updates; u++)
            // Status writes: the spec of a DVM cannot change once it exists.
            await custom.patchNamespacedCustomObjectStatus({ ...dvmRef(namespace, name), body: { status: { phase: WAIT_PHASE, polls: u } } }, merge);
        }),
      );
      // Done when every DVM's newest version has been forwarded.
      const finalVersion = new Map<string, string>();
      for (const name of names) {
        const dvm = (await custom.getNamespacedCustomObject(dvmRef(namespace, name))) as { metadata: { resourceVersion: string } };
        finalVersion.set(name, dvm.metadata.resourceVersion);
      }
      const latest = (name: string) => requests.filter((r) => r.name === name).at(-1)?.resourceVersion;
      while (!names.every((name) => latest(name) === finalVersion.get(name))) await sleep(20);
      const events = dvms * (updates + 1);
      log(
        `storm: ${events} writes (${dvms} DVMs x ${updates + 1}) -> ${requests.length} forwards ` +
          `(${(requests.length / events).toFixed(2)} per write) in ${((performance.now() - t0) / 1000).toFixed(1)} s; ` +
          `max in flight per uid ${maxPerUid}; live ${relay.stats().liveDvms}, queued uids ${relay.stats().queuedUids}`,
      );
      await relay.stop();
    }

    // 3. A function that patches status on every poll of a wait phase (fire-and-forget transport).
    {
      const namespace = await newNamespace();
      let polls = 0;
      const relay = new Relay({
        kubeConfig,
        namespace,
        log: silentLogger,
        resyncMs: 0,
        transport: new InProcessTransport(async () => {
          polls += 1;
          await custom.patchNamespacedCustomObjectStatus({ ...dvmRef(namespace, "poller"), body: { status: { phase: WAIT_PHASE, polls } } }, merge);
          return undefined;
        }),
      });
      relay.start();
      while (!relay.ready()) await sleep(20);
      await createDvm(namespace, "poller");
      const seconds = options.hotLoopSeconds ?? 10;
      await sleep(seconds * 1000);
      log(
        `self-patching wait phase (${WAIT_PHASE}, requeue ${phaseSpec(WAIT_PHASE).requeueMs} ms): ${polls} forwards in ${seconds} s ` +
          `(${(polls / seconds).toFixed(2)}/s; every forward wrote the status)`,
      );
      await relay.stop();
    }

    // 4. Failover between two replicas.
    const trials = options.failoverTrials ?? 3;
    if (trials > 0) {
      const timing = options.failoverTiming ?? LEADER_ELECTION_DEFAULTS;
      const killed: number[] = [];
      const partitioned: number[] = [];
      const steppedDown: number[] = [];
      let invocations = 0;
      let transitions = 0;
      for (let trial = 0; trial < trials; trial++) {
        const kill = await failoverTrial(kubeConfig, await newNamespace(), createDvm, timing, "kill");
        killed.push(kill.takeoverMs);
        const cut = await failoverTrial(kubeConfig, await newNamespace(), createDvm, timing, "partition");
        partitioned.push(cut.takeoverMs);
        if (cut.steppedDownMs !== undefined) steppedDown.push(cut.steppedDownMs);
        invocations += kill.invocations + cut.invocations;
        transitions += kill.transitions + cut.transitions;
      }
      const summary = (values: number[]) => {
        const sorted = [...values].sort((a, b) => a - b);
        return `p50 ${(percentile(sorted, 50) / 1000).toFixed(2)} s, max ${(sorted.at(-1)! / 1000).toFixed(2)} s`;
      };
      const setting = `lease ${timing.leaseDurationMs / 1000} s, renew deadline ${timing.renewDeadlineMs / 1000} s, retry ${timing.retryPeriodMs / 1000} s`;
      log(
        `failover, leader killed (SIGKILL), ${trials} trials (${setting}): the standby forwards again after ${summary(killed)} (aim: within ${(timing.leaseDurationMs + 1000) / 1000} s)`,
      );
      log(
        `failover, leader cut off from the API server, ${trials} trials: the standby forwards again after ${summary(partitioned)}; the cut-off leader stopped forwarding after ${summary(steppedDown)} (before the lease could expire for anyone else)`,
      );
      log(
        `failover trials, a DVM changing phase every 250 ms throughout: ${invocations} invocations for ${transitions} transitions, ${(invocations / Math.max(1, transitions)).toFixed(2)} per transition (aim: under 1.3)`,
      );
    }
  } finally {
    await plane?.stop();
  }
}

/**
 * One failover: replicas a (the leader, behind a cuttable proxy) and b (the standby), one live DVM;
 * then a is killed or cut off. Returns the time from that moment until b's first forward (its
 * list after taking over forwards the live DVM at once), and for a cut, until a stopped leading.
 */
async function failoverTrial(
  kubeConfig: KubeConfig,
  namespace: string,
  createDvm: (namespace: string, name: string) => Promise<string>,
  timing: LeaderElectionTiming,
  fault: "kill" | "partition",
): Promise<{ takeoverMs: number; steppedDownMs?: number; invocations: number; transitions: number }> {
  const proxy = await CuttableProxy.start(new URL(kubeConfig.getCurrentCluster()!.server));
  const env = {
    RELAY_NAMESPACE: namespace,
    RELAY_LEASE_NAMESPACE: namespace,
    RELAY_RESYNC_MS: "0",
    RELAY_LEASE_DURATION_MS: String(timing.leaseDurationMs),
    RELAY_LEASE_RENEW_DEADLINE_MS: String(timing.renewDeadlineMs),
    RELAY_LEASE_RETRY_PERIOD_MS: String(timing.retryPeriodMs),
  };
  const replicas: RelayProcess[] = [];
  // The live DVM changes phase throughout, as a migration would: each change is one transition.
  let transitions = 0;
  let moving = true;
  let mover: Promise<void> | undefined;
  const custom = kubeConfig.makeApiClient(CustomObjectsApi);
  const move = async () => {
    for (let step = 0; moving; step++) {
      const phase = MOVING_PHASES[step % MOVING_PHASES.length]!;
      await custom.patchNamespacedCustomObjectStatus(
        { group: DVM_GROUP, version: DVM_VERSION, namespace, plural: DVM_PLURAL, name: "live", body: { status: { phase } } },
        setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
      );
      transitions++;
      await sleep(250);
    }
  };
  const waitFor = async <T>(what: string, check: () => Promise<T | undefined> | T | undefined): Promise<T> => {
    const deadline = Date.now() + timing.leaseDurationMs * 4 + 60_000;
    for (;;) {
      const value = await check();
      if (value !== undefined) return value;
      if (Date.now() > deadline) throw new Error(`failover bench: timed out waiting for ${what}\n${replicas.map((r) => r.transcript()).join("\n")}`);
      await sleep(20);
    }
  };
  try {
    const a = await RelayProcess.start("relay-a", proxiedKubeConfig(kubeConfig, proxy.url), env);
    replicas.push(a);
    await waitFor("relay-a to lead", async () => ((await a.readyz()).role === "leader" ? true : undefined));
    const b = await RelayProcess.start("relay-b", kubeConfig, env);
    replicas.push(b);
    await waitFor("relay-b to stand by", async () => ((await b.readyz()).status === 200 ? true : undefined));
    await createDvm(namespace, "live");
    transitions++;
    mover = move();
    await waitFor("relay-a to forward", () => a.lambda.invocations[0]);
    const faultAt = Date.now();
    if (fault === "kill") await a.kill("SIGKILL");
    else proxy.cut();
    const first = await waitFor("relay-b to forward", () => b.lambda.invocations[0]);
    const stopped = fault === "partition" ? a.logged("stopped leading", faultAt) : undefined;
    // A little more of the new leader's forwarding, then the last change must have been forwarded.
    await sleep(2_000);
    moving = false;
    await mover;
    await sleep(1_000);
    const invocations = a.lambda.invocations.length + b.lambda.invocations.length;
    return {
      takeoverMs: first.at - faultAt,
      ...(stopped ? { steppedDownMs: Date.parse(stopped.timestamp) - faultAt } : {}),
      invocations,
      transitions,
    };
  } finally {
    moving = false;
    await mover?.catch(() => undefined);
    await Promise.all(replicas.map((r) => r.dispose()));
    await proxy.close();
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const dvms = process.argv[2] ? Number(process.argv[2]) : undefined;
  const failoverTiming: LeaderElectionTiming = {
    leaseDurationMs: envNumber("DVM_BENCH_FAILOVER_LEASE_MS", LEADER_ELECTION_DEFAULTS.leaseDurationMs),
    renewDeadlineMs: envNumber("DVM_BENCH_FAILOVER_RENEW_MS", LEADER_ELECTION_DEFAULTS.renewDeadlineMs),
    retryPeriodMs: envNumber("DVM_BENCH_FAILOVER_RETRY_MS", LEADER_ELECTION_DEFAULTS.retryPeriodMs),
  };
  runRelayBench({ ...(dvms ? { dvms } : {}), failoverTrials: envNumber("DVM_BENCH_FAILOVER_TRIALS", 3), failoverTiming }).catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  });
}
