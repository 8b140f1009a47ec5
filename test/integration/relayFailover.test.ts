/**
 * Relay failover against a real kube-apiserver: relay replicas as real processes (src/relay/main.ts),
 * each behind its own TCP proxy to the API server (so one can be partitioned) and with its own Lambda
 * stand-in (so every invocation is attributed to the replica that sent it). DVMs keep changing phase
 * throughout the run, driven by this test; two more sit in a wait phase, which a leader polls on its
 * own (the forwards a partitioned leader that did not step down would keep sending).
 *
 * 1. A and B start: A leads and forwards, B stands by (ready, not forwarding).
 * 2. A is killed (SIGKILL): B takes over and forwards again. C starts as the new standby.
 * 3. B is partitioned from the API server: it steps down, C takes over; after the partition heals B
 *    stays a standby.
 * Over the run: every DVM's last change was forwarded, fewer than 1.3 invocations per transition, and
 * never two leaders forwarding at once (each replica's forwards end before the next leader starts).
 * The failover times are printed, not asserted (bench/relay.ts measures them).
 */
import { randomUUID } from "node:crypto";
import { CoreV1Api, CustomObjectsApi, type KubeConfig, PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PHASE_NAMES, PHASES, POLL_REQUEUE_MS, phaseSpec } from "../../src/dvm/itinerary";
import { DVM_API_VERSION, DVM_GROUP, DVM_KIND, DVM_PLURAL, DVM_VERSION } from "../../src/dvm/types";
import { testClusters } from "../support/clusters";
import { CuttableProxy, proxiedKubeConfig } from "../support/cuttableProxy";
import type { Invocation } from "../support/lambdaStandIn";
import { found } from "../support/poll";
import { type ReadyzAnswer, RelayProcess } from "../support/relayProcess";

const SPEC = { persistentVolumeClaims: [{ name: "data", namespace: "app", targetStorageClass: "standard", targetAccessModes: ["ReadWriteOnce"] }] };
/** Phases that neither wait nor end: a change to one is forwarded at once and schedules nothing after it. */
const MOVING_PHASES = PHASE_NAMES.filter((p) => !phaseSpec(p).waits && !phaseSpec(p).terminal);
const WAIT_PHASE = PHASE_NAMES.find((p) => PHASES[p].waits)!;
/** Short, to keep the run short; renew deadline below lease duration as always. */
const TIMING = { RELAY_LEASE_DURATION_MS: "4000", RELAY_LEASE_RENEW_DEADLINE_MS: "2500", RELAY_LEASE_RETRY_PERIOD_MS: "500" };

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Changes the phase of `moving` DVMs round-robin, one change every `everyMs`, until stopped; counts the changes. */
class PhaseDriver {
  transitions = 0;
  /** The resourceVersion of each DVM's last change. */
  readonly lastVersion = new Map<string, string>();
  private running = true;
  private loop: Promise<void> | undefined;

  constructor(
    private readonly custom: CustomObjectsApi,
    private readonly namespace: string,
    private readonly names: string[],
    private readonly everyMs: number,
  ) {}

  start(): void {
    this.loop = (async () => {
      for (let step = 0; this.running; step++) {
        const name = this.names[step % this.names.length]!;
        const phase = MOVING_PHASES[Math.floor(step / this.names.length) % MOVING_PHASES.length]!;
        const patched = (await this.custom.patchNamespacedCustomObjectStatus(
          { group: DVM_GROUP, version: DVM_VERSION, namespace: this.namespace, plural: DVM_PLURAL, name, body: { status: { phase } } },
          setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
        )) as { metadata: { uid: string; resourceVersion: string } };
        this.transitions += 1;
        this.lastVersion.set(patched.metadata.uid, patched.metadata.resourceVersion);
        await sleep(this.everyMs);
      }
    })();
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
  }
}

describe("relay failover between replicas (leader election on a Lease)", () => {
  let host: KubeConfig;
  let namespace: string;
  let custom: CustomObjectsApi;
  const proxies = new Map<string, CuttableProxy>();
  const replicas: RelayProcess[] = [];
  /** Every wait polls every 100 ms; its timeout is a safety net, not an assertion, and shows the transcripts. */
  const WAIT = { timeoutMs: 60_000, intervalMs: 100, context: () => replicas.map((r) => r.transcript()).join("\n") };
  let driver: PhaseDriver;
  const uids: string[] = [];
  let created = 0;

  async function startReplica(name: string): Promise<RelayProcess> {
    const proxy = await CuttableProxy.start(new URL(host.getCurrentCluster()!.server));
    proxies.set(name, proxy);
    const replica = await RelayProcess.start(name, proxiedKubeConfig(host, proxy.url), {
      RELAY_NAMESPACE: namespace,
      RELAY_LEASE_NAMESPACE: namespace,
      RELAY_RESYNC_MS: "0",
      ...TIMING,
    });
    replicas.push(replica);
    return replica;
  }

  const byReplica = (replica: RelayProcess, since = 0): Invocation[] => replica.lambda.invocations.filter((i) => i.at >= since);
  const role = async (replica: RelayProcess, wanted: string): Promise<ReadyzAnswer | undefined> => {
    const answer = await replica.readyz();
    return answer.status === 200 && answer.role === wanted ? answer : undefined;
  };

  beforeAll(async () => {
    host = testClusters().source;
    namespace = `relay-ha-${randomUUID().slice(0, 8)}`;
    await host.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: namespace } } });
    custom = host.makeApiClient(CustomObjectsApi);
  });

  afterAll(async () => {
    await driver?.stop();
    await Promise.all(replicas.map((r) => r.dispose()));
    await Promise.all([...proxies.values()].map((p) => p.close()));
    await custom?.deleteCollectionNamespacedCustomObject({ group: DVM_GROUP, version: DVM_VERSION, namespace, plural: DVM_PLURAL }).catch(() => undefined);
  });

  async function createDvm(name: string, phase?: string): Promise<string> {
    const dvm = (await custom.createNamespacedCustomObject({
      group: DVM_GROUP,
      version: DVM_VERSION,
      namespace,
      plural: DVM_PLURAL,
      body: { apiVersion: DVM_API_VERSION, kind: DVM_KIND, metadata: { name }, spec: SPEC },
    })) as { metadata: { uid: string } };
    created += 1;
    if (phase) {
      await custom.patchNamespacedCustomObjectStatus(
        { group: DVM_GROUP, version: DVM_VERSION, namespace, plural: DVM_PLURAL, name, body: { status: { phase } } },
        setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
      );
      created += 1;
    }
    return dvm.metadata.uid;
  }

  it("one replica leads and forwards; the other stands by, ready but not forwarding", async () => {
    const a = await startReplica("relay-a");
    await found("relay-a to lead, synced", () => role(a, "leader"), WAIT);
    const b = await startReplica("relay-b");
    const standby = await found("relay-b to stand by", () => role(b, "standby"), WAIT);
    expect(standby.stats?.leadership).toMatchObject({ identity: "relay-b", leading: false, holder: "relay-a" });

    const moving = ["move-0", "move-1", "move-2", "move-3"];
    for (const name of moving) uids.push(await createDvm(name));
    for (const name of ["poll-0", "poll-1"]) uids.push(await createDvm(name, WAIT_PHASE));
    driver = new PhaseDriver(custom, namespace, moving, 150);
    driver.start();
    await found("relay-a to forward a few changes", () => (a.lambda.invocations.length >= 15 ? true : undefined), WAIT);
    expect(b.lambda.invocations).toEqual([]);
  });

  it("the leader killed: the standby takes over and forwards again", async () => {
    const [a, b] = replicas as [RelayProcess, RelayProcess];
    const killedAt = Date.now();
    await a.kill("SIGKILL");
    const first = await found("relay-b to forward", () => b.lambda.invocations[0], WAIT);
    console.log(
      `relay failover, leader killed: the standby forwarded ${first.at - killedAt} ms after the kill (lease duration ${TIMING.RELAY_LEASE_DURATION_MS} ms)`,
    );
    expect((await b.readyz()).role).toBe("leader");
    // Everything relay-a sent, it sent before relay-b started leading.
    const bStarted = Date.parse(b.logged("started leading")!.timestamp);
    expect(Math.max(...a.lambda.invocations.map((i) => i.at))).toBeLessThan(bStarted + 1);

    const c = await startReplica("relay-c");
    await found("relay-c to stand by", () => role(c, "standby"), WAIT);
  });

  it("the leader partitioned from the API server: it steps down, the standby takes over, and it stays a standby after the partition heals", async () => {
    const [, b, c] = replicas as [RelayProcess, RelayProcess, RelayProcess];
    const cutAt = Date.now();
    proxies.get("relay-b")!.cut();
    const first = await found("relay-c to forward", () => c.lambda.invocations[0], WAIT);
    console.log(
      `relay failover, leader partitioned: the standby forwarded ${first.at - cutAt} ms after the cut (lease duration ${TIMING.RELAY_LEASE_DURATION_MS} ms)`,
    );
    // relay-b knows it lost the Lease (its health port is not behind the proxy).
    await found("relay-b to report it no longer leads", async () => ((await b.readyz()).role === "standby" ? true : undefined), WAIT);
    expect(b.logged("stopped leading", cutAt)).toMatchObject({ why: expect.stringMatching(/renew deadline/) });
    // Long enough for a leader that had not stepped down to poll its waiting DVMs again.
    await sleep(POLL_REQUEUE_MS + 1_000);
    proxies.get("relay-b")!.resume();
    await found(
      "relay-b back in contact, as a standby",
      async () => {
        const answer = await role(b, "standby");
        return answer?.stats?.leadership?.holder === "relay-c" ? answer : undefined;
      },
      WAIT,
    );
    await sleep(2_000);
    expect((await c.readyz()).role).toBe("leader");
  });

  it("over the run: every change forwarded, under 1.3 invocations per transition, never two leaders forwarding at once", async () => {
    const [a, b, c] = replicas as [RelayProcess, RelayProcess, RelayProcess];
    await driver.stop();
    // Every moving DVM's last change reaches the function (C leads now).
    await found(
      "the last change of every moving DVM to be forwarded",
      () =>
        [...driver.lastVersion].every(([uid, version]) => c.lambda.invocations.some((i) => i.payload.uid === uid && i.payload.resourceVersion === version))
          ? true
          : undefined,
      WAIT,
    );
    const all = [a, b, c].flatMap((r) => r.lambda.invocations.filter((i) => uids.includes(i.payload.uid)));
    const transitions = created + driver.transitions;
    const perTransition = all.length / transitions;
    console.log(
      `relay failover run: ${all.length} invocations for ${transitions} transitions (${perTransition.toFixed(3)} per transition; a: ${a.lambda.invocations.length}, b: ${b.lambda.invocations.length}, c: ${c.lambda.invocations.length})`,
    );
    expect(perTransition).toBeLessThan(1.3);

    // Leadership passed a -> b -> c, and each replica's forwards lie within its own term.
    const started = (r: RelayProcess) => Date.parse(r.logged("started leading")!.timestamp);
    const lastForward = (r: RelayProcess) => Math.max(...r.lambda.invocations.map((i) => i.at));
    const firstForward = (r: RelayProcess) => Math.min(...r.lambda.invocations.map((i) => i.at));
    expect(lastForward(a)).toBeLessThanOrEqual(started(b));
    expect(lastForward(b)).toBeLessThanOrEqual(started(c));
    expect(firstForward(c)).toBeGreaterThanOrEqual(started(c));
    // relay-b stopped leading before relay-c started (its own clock and c's are this machine's).
    expect(Date.parse(b.logged("stopped leading")!.timestamp)).toBeLessThanOrEqual(started(c));
    expect(byReplica(b, started(c))).toEqual([]);
  });
});
