/**
 * One replica of the relay Deployment. With leader election, the Relay (list, watch, forward) exists
 * only while this replica leads: a new one per term, so a new leader starts from a fresh list, and a
 * replica that steps down closes its queue at once. Without it, the one Relay runs from start to stop.
 */
import type { Logger } from "../lib/log";
import { type LeaderElectionTiming, LeaderElector, type LeadershipStats } from "./leaderElection";
import type { LeaderLeaseStore } from "./leaderLeaseStore";
import type { LeadershipHooks } from "./metrics";
import { RELAY_DEFAULTS, Relay, type RelayOptions, type RelayStats } from "./relay";

export type ReplicaRole = "leader" | "standby" | "only replica";

/** What /healthz and /readyz report: the role, the election, and the relay's own stats while it runs. */
export type ReplicaStats = { role: ReplicaRole; leadership?: LeadershipStats } & Partial<RelayStats>;

export interface ReplicaElection extends LeaderElectionTiming {
  store: LeaderLeaseStore;
  identity: string;
}

export interface RelayReplicaOptions {
  relay: RelayOptions;
  /** Absent: this is the only replica and always forwards. */
  election?: ReplicaElection;
  log: Logger;
  /** Told when this replica starts or stops leading (src/relay/metrics.ts). */
  metrics?: LeadershipHooks;
}

export class RelayReplica {
  private relay: Relay | undefined;
  private readonly elector: LeaderElector | undefined;

  constructor(private readonly options: RelayReplicaOptions) {
    const { election } = options;
    if (!election) return;
    // A replica that steps down must have stopped before a standby may take over (lease duration minus
    // renew deadline later); forwards still in flight by then are not waited for any longer.
    const stepDownTimeoutMs = Math.min(options.relay.stopTimeoutMs ?? RELAY_DEFAULTS.stopTimeoutMs, election.leaseDurationMs - election.renewDeadlineMs);
    this.elector = new LeaderElector({
      ...election,
      log: options.log,
      onStartedLeading: () => {
        options.metrics?.leadershipChanged(true);
        this.startRelay();
      },
      onStoppedLeading: async (why) => {
        const relay = this.relay;
        this.relay = undefined;
        await relay?.stop(why === "stopping" ? undefined : stepDownTimeoutMs);
        // After the stop: a watch event still arriving while it winds down would bring a series back.
        options.metrics?.leadershipChanged(false);
      },
    });
  }

  start(): void {
    if (this.elector) this.elector.start();
    else this.startRelay();
  }

  /** Stops forwarding (letting forwards in flight finish) and, when leading, hands the Lease back. */
  async stop(): Promise<void> {
    if (this.elector) await this.elector.stop();
    else await this.relay?.stop();
  }

  role(): ReplicaRole {
    if (!this.elector) return "only replica";
    return this.elector.isLeader() ? "leader" : "standby";
  }

  /**
   * Ready: a leader (or the only replica) whose DVM watch is synced and open; a standby that can reach
   * its Lease, so it can take over. A standby is ready but does not forward.
   */
  ready(): boolean {
    if (this.elector && !this.elector.isLeader()) return this.elector.inContact();
    return this.relay?.ready() ?? false;
  }

  stats(): ReplicaStats {
    return {
      role: this.role(),
      ...(this.elector ? { leadership: this.elector.snapshot() } : {}),
      ...this.relay?.stats(),
    };
  }

  private startRelay(): void {
    this.relay = new Relay(this.options.relay);
    this.relay.start();
  }
}
