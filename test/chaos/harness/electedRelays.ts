/**
 * The relay as it is deployed: several replicas (src/relay/replica.ts) electing a leader on a
 * coordination.k8s.io Lease, each reaching the host API server through a proxy of its own, so one replica
 * can be killed or partitioned while the others carry on. Each replica forwards to the deliverer through
 * an InProcessTransport, so every forward is attributed to the replica that sent it.
 *   - kill: the replica's proxy is cut for good and its transport refuses every forward from then on, as
 *     for a process that is gone (it never renews, never releases the Lease, never forwards again;
 *     invocations it already started go on, as Lambda invocations would).
 *   - partition: the replica's proxy is cut for a while, then healed; the replica steps down at its renew
 *     deadline and stays a standby once it can reach the API server again.
 * Failover time: from the kill or the cut to the first forward by another replica.
 */
import type { KubeConfig } from "@kubernetes/client-node";
import { silentLogger } from "../../../src/lib/log";
import { KubeLeaderLeaseStore } from "../../../src/relay/leaderLeaseStore";
import { RelayReplica } from "../../../src/relay/replica";
import { CuttableProxy, proxiedKubeConfig } from "../../support/cuttableProxy";
import { InProcessTransport } from "../../support/inProcessTransport";
import type { Deliverer } from "./delivery";
import { cappedResult } from "./drivers";
import { sleep } from "./random";

/** Short terms, to keep a run short; renew deadline below lease duration as always. */
export const CHAOS_ELECTION_TIMING = { leaseDurationMs: 4_000, renewDeadlineMs: 2_500, retryPeriodMs: 500 };

export interface ElectedRelaysOptions {
  /** The host cluster as the harness sees it; each replica gets a proxy in front of `server`. */
  hostKubeConfig: KubeConfig;
  server: URL;
  destination: KubeConfig;
  namespace: string;
  deliverer: Deliverer;
  replicas: number;
  capMs: number;
}

interface Member {
  identity: string;
  proxy: CuttableProxy;
  replica: RelayReplica;
  dead: boolean;
}

export interface Failover {
  kind: "killed" | "partitioned";
  /** From the kill or cut to the first forward by another replica. Undefined: none came. */
  ms: number | undefined;
}

export class ElectedRelays {
  private readonly members: Member[] = [];
  /** Forwards in time order, by identity: for the failover times and the "one leader at a time" check. */
  private readonly forwards: Array<{ identity: string; at: number }> = [];
  readonly failovers: Failover[] = [];
  /** Every kill, partition, restart and gap: who led, when it began, when the next leader first forwarded. */
  private readonly handovers: Array<{ from: string; at: number; successorAt: number }> = [];
  private generation = 0;

  constructor(private readonly options: ElectedRelaysOptions) {}

  async start(): Promise<void> {
    for (let i = 0; i < this.options.replicas; i++) this.members.push(await this.newMember());
    for (const member of this.members) member.replica.start();
  }

  private async newMember(): Promise<Member> {
    const { deliverer, capMs } = this.options;
    const identity = `relay-${this.generation++}`;
    const proxy = await CuttableProxy.start(this.options.server);
    const view = proxiedKubeConfig(this.options.hostKubeConfig, proxy.url);
    const replica = new RelayReplica({
      relay: {
        kubeConfig: view,
        transport: new InProcessTransport(async (request) => {
          if (member.dead) throw new Error(`${identity} is dead`);
          this.forwards.push({ identity, at: Date.now() });
          return cappedResult(await deliverer.deliver(request), capMs);
        }),
        clusters: [{ name: "destination", kubeConfig: this.options.destination }],
        namespace: this.options.namespace,
        resyncMs: 5_000,
        watchBackoff: { initialMs: 100, maxMs: 1_000 },
        retryBackoff: { initialMs: 100, maxMs: 1_000 },
        stopTimeoutMs: 5_000,
        log: silentLogger,
      },
      election: {
        ...CHAOS_ELECTION_TIMING,
        store: new KubeLeaderLeaseStore(view, this.options.namespace, "dvm-relay"),
        identity,
      },
      log: silentLogger,
    });
    const member: Member = { identity, proxy, replica, dead: false };
    return member;
  }

  private leader(): Member | undefined {
    return this.members.find((m) => !m.dead && m.replica.role() === "leader");
  }

  /** Waits (up to `timeoutMs`) for a live leader. */
  async waitForLeader(timeoutMs = 20_000): Promise<string | undefined> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      const leader = this.leader();
      if (leader) return leader.identity;
      await sleep(50);
    }
    return undefined;
  }

  /** Kills the leader; resolves when another replica forwards (or after `timeoutMs`). */
  async killLeader(timeoutMs = 30_000): Promise<Failover> {
    await this.waitForLeader();
    const leader = this.leader();
    if (!leader) throw new Error("no relay leader to kill within 20 s");
    const at = Date.now();
    leader.dead = true;
    leader.proxy.cut();
    return this.record("killed", leader, at, timeoutMs);
  }

  /** Cuts the leader off the API server until another replica forwards, then heals the partition. */
  async partitionLeader(timeoutMs = 30_000): Promise<Failover> {
    await this.waitForLeader();
    const leader = this.leader();
    if (!leader) throw new Error("no relay leader to partition within 20 s");
    const at = Date.now();
    leader.proxy.cut();
    const failover = await this.record("partitioned", leader, at, timeoutMs);
    leader.proxy.resume();
    return failover;
  }

  private async record(kind: Failover["kind"], from: Member, at: number, timeoutMs: number): Promise<Failover> {
    const deadline = at + timeoutMs;
    let first: number | undefined;
    while (first === undefined && Date.now() < deadline) {
      first = this.forwards.find((f) => f.at >= at && f.identity !== from.identity)?.at;
      if (first === undefined) await sleep(20);
    }
    const failover = { kind, ms: first === undefined ? undefined : first - at };
    this.failovers.push(failover);
    this.handovers.push({ from: from.identity, at, successorAt: first ?? Number.POSITIVE_INFINITY });
    return failover;
  }

  /**
   * Forwards a replaced leader sent after its successor's first forward (until the next failover or
   * restart): zero when one leader at a time forwards.
   */
  overlappingForwards(): number {
    let overlapping = 0;
    this.handovers.forEach((handover, i) => {
      const until = this.handovers[i + 1]?.at ?? Number.POSITIVE_INFINITY;
      overlapping += this.forwards.filter((f) => f.identity === handover.from && f.at >= handover.successorAt && f.at < until).length;
    });
    return overlapping;
  }

  /** Cuts every replica off the API server (all proxies), for the 410 gap. */
  cutAll(): void {
    for (const member of this.members) member.proxy.cut();
  }

  /** Ends the gap: every replica stepped down meanwhile, so any of them may lead next (a new term for all). */
  resumeAll(): void {
    for (const member of this.members) if (!member.dead) member.proxy.resume();
    this.handovers.push({ from: "", at: Date.now(), successorAt: Number.POSITIVE_INFINITY });
  }

  watchConnected(): boolean {
    return this.leader()?.replica.stats().watchConnected ?? false;
  }

  /** Stops every live replica (the leader releases the Lease) and starts as many new ones. */
  async restart(): Promise<void> {
    const live = this.members.filter((m) => !m.dead);
    this.handovers.push({ from: this.leader()?.identity ?? "", at: Date.now(), successorAt: Number.POSITIVE_INFINITY });
    await Promise.all(live.map((m) => m.replica.stop()));
    for (const member of live) member.dead = true;
    const fresh = await Promise.all(live.map(() => this.newMember()));
    this.members.push(...fresh);
    for (const member of fresh) member.replica.start();
  }

  async stop(): Promise<void> {
    await Promise.all(this.members.map((m) => m.replica.stop().catch(() => undefined)));
    await Promise.all(this.members.map((m) => m.proxy.close()));
  }
}
