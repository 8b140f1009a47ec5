/**
 * Leader election on a Lease, as client-go's leaderelection package does it, so that of several relay
 * replicas exactly one lists, watches and forwards.
 *
 * - A candidate takes the Lease when it does not exist, was released, or has not changed for the
 *   holder's lease duration. "Changed" is judged by the candidate's own clock from the moment it saw a
 *   new resourceVersion, never by comparing its clock with the holder's renewTime: clocks of two
 *   machines may disagree, their rates may not (much).
 * - Every write is conditioned on the resourceVersion just read (optimistic concurrency), so two
 *   candidates can never both win the same round.
 * - The leader renews every retry period and steps down (stops its work) when it has not renewed for
 *   the renew deadline, measured from when it *sent* its last successful renewal. The deadline is below
 *   the lease duration, so a partitioned leader has stopped before any standby may take over: two
 *   leaders never work at once. The gap (duration minus deadline) must cover the time the work takes
 *   to stop and any difference in clock rates.
 * - A clean stop steps down first, then releases the Lease (holder ""), so a standby takes over at its
 *   next attempt instead of after the lease duration.
 */
import { ControllerError } from "../contracts/controllerError";
import { type Clock, systemClock } from "../lib/clock";
import { definedFields } from "../lib/definedFields";
import { errorMessage } from "../lib/errorMessage";
import { jsonLogger, type Logger } from "../lib/log";
import type { LeaderLeaseRecord, LeaderLeaseStore, StoredLeaderLease } from "./leaderLeaseStore";

export interface LeaderElectionTiming {
  /** A Lease not renewed for this long (as a candidate observes it) may be taken over. Whole seconds: the Lease stores seconds. */
  leaseDurationMs: number;
  /** The leader steps down when its last successful renewal was sent this long ago. Below leaseDurationMs. */
  renewDeadlineMs: number;
  /** Between attempts to acquire or renew. Below renewDeadlineMs, so a leader gets several tries. */
  retryPeriodMs: number;
}

/** client-go's defaults: a dead leader is replaced within about 15 s, a partitioned one stops after 10 s. */
export const LEADER_ELECTION_DEFAULTS: LeaderElectionTiming = { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000 };

/** What is wrong with `timing`, naming the setting, or undefined when it is safe. */
export function leaderElectionTimingProblem(timing: LeaderElectionTiming): { field: keyof LeaderElectionTiming; message: string } | undefined {
  if (timing.leaseDurationMs % 1_000 !== 0 || timing.leaseDurationMs < 1_000) {
    return { field: "leaseDurationMs", message: "must be a whole number of seconds, at least 1 s (the Lease stores seconds)" };
  }
  if (timing.renewDeadlineMs >= timing.leaseDurationMs) {
    return { field: "renewDeadlineMs", message: "must be below the lease duration, or a partitioned leader could still work when a standby takes over" };
  }
  if (timing.retryPeriodMs <= 0 || timing.retryPeriodMs >= timing.renewDeadlineMs) {
    return { field: "retryPeriodMs", message: "must be above 0 and below the renew deadline, so a leader gets to renew before it must step down" };
  }
  return undefined;
}

/** A timing or identity setting that cannot work: a missing setting, so unexpected like ConfigurationError. */
export class LeaderElectionConfigError extends ControllerError {
  override readonly name = "LeaderElectionConfigError";
  readonly disposition = "unexpected";
}

export interface LeaderElectorOptions extends Partial<LeaderElectionTiming> {
  store: LeaderLeaseStore;
  /** This candidate's name in the Lease: unique among the replicas (the pod name). */
  identity: string;
  /** Now the leader: start the work. */
  onStartedLeading: () => void;
  /**
   * No longer the leader (renew deadline passed, someone else holds the Lease, or stop()): stop the
   * work. The elector does not lead again, nor release the Lease, before this resolves.
   */
  onStoppedLeading: (why: string) => Promise<void>;
  /** Default: JSON lines with component "relay". */
  log?: Logger;
  clock?: Clock;
}

/** What /healthz and /readyz report about the election. */
export interface LeadershipStats {
  identity: string;
  /** "namespace/name" of the Lease. */
  lease: string;
  leading: boolean;
  /** The holder the Lease named when last read ("" when released); absent before the first read. */
  holder?: string;
  /** ISO time of the last successful read or write of the Lease. */
  lastContactAt?: string;
  /** Times this replica became the leader. */
  terms: number;
  /** Failed attempts in a row (reads or writes of the Lease that did not answer or were refused). */
  failures: number;
  lastError?: string;
}

/**
 * A standby reads the Lease this many times per retry period, so it sees the leader's last renewal
 * within a fraction of a period and takes over within about lease duration + retry period / 4 of the
 * leader's end (one more GET per fraction: cheap, it is one small object).
 */
const STANDBY_LOOKS_PER_RETRY_PERIOD = 4;

type Attempt = { kind: "acquired"; sentAt: number } | { kind: "heldByOther"; holder: string; expiresInMs: number };

export class LeaderElector {
  private readonly timing: LeaderElectionTiming;
  private readonly log: Logger;
  private readonly clock: Clock;
  private leading = false;
  private stopped = false;
  private running: Promise<void> | undefined;
  private wake: (() => void) | undefined;
  private deadlineTimer: ReturnType<typeof setTimeout> | undefined;
  /** The work's stop, while it runs: nothing leads again or releases before it is done. */
  private steppingDown: Promise<void> = Promise.resolve();
  /** The resourceVersion last seen and when (this clock) it was first seen: the basis of expiry. */
  private observed: { resourceVersion: string; at: number; holder: string } | undefined;
  private lastContactAt: number | undefined;
  private terms = 0;
  private failures = 0;
  private lastError: string | undefined;

  constructor(private readonly options: LeaderElectorOptions) {
    this.timing = {
      leaseDurationMs: options.leaseDurationMs ?? LEADER_ELECTION_DEFAULTS.leaseDurationMs,
      renewDeadlineMs: options.renewDeadlineMs ?? LEADER_ELECTION_DEFAULTS.renewDeadlineMs,
      retryPeriodMs: options.retryPeriodMs ?? LEADER_ELECTION_DEFAULTS.retryPeriodMs,
    };
    const problem = leaderElectionTimingProblem(this.timing);
    if (problem) throw new LeaderElectionConfigError(`leader election ${problem.field}: ${problem.message}`);
    if (options.identity.length === 0) throw new LeaderElectionConfigError("leader election identity: must not be empty");
    this.log = (options.log ?? jsonLogger({ component: "relay" })).child({ lease: options.store.where, identity: options.identity });
    this.clock = options.clock ?? systemClock;
  }

  start(): void {
    if (this.running || this.stopped) return;
    this.running = this.loop();
  }

  /**
   * Steps down at once (waiting for the work to stop), lets an attempt in flight end, then releases the
   * Lease so a standby takes over at its next look instead of after the lease duration.
   */
  async stop(): Promise<void> {
    this.stopped = true;
    this.wake?.();
    const wasLeading = this.leading;
    this.stepDown("stopping");
    await this.steppingDown;
    await this.running;
    if (wasLeading) await this.release();
  }

  isLeader(): boolean {
    return this.leading;
  }

  /**
   * In good standing: the Lease was read or written within the lease duration. A standby in good
   * standing is ready to take over; one that cannot reach the Lease is not.
   */
  inContact(): boolean {
    return this.lastContactAt !== undefined && this.clock.now() - this.lastContactAt < this.timing.leaseDurationMs;
  }

  snapshot(): LeadershipStats {
    return definedFields({
      identity: this.options.identity,
      lease: this.options.store.where,
      leading: this.leading,
      holder: this.observed?.holder,
      lastContactAt: this.lastContactAt === undefined ? undefined : new Date(this.lastContactAt).toISOString(),
      terms: this.terms,
      failures: this.failures,
      lastError: this.lastError,
    });
  }

  private async loop(): Promise<void> {
    while (!this.stopped) {
      const startedAt = this.clock.now();
      let nextInMs = this.timing.retryPeriodMs;
      try {
        // An API call that has not answered within the renew deadline is abandoned: by then a leader
        // has stepped down anyway, and the next attempt reads the Lease afresh.
        const attempt = await withTimeout(this.attempt(), this.timing.renewDeadlineMs);
        if (this.stopped) break;
        this.failures = 0;
        this.lastError = undefined;
        if (attempt.kind === "acquired") await this.renewed(attempt.sentAt);
        else {
          if (this.leading) this.stepDown(`the Lease is held by ${attempt.holder}`);
          // Look again soon, and right when the holder's lease runs out if that is sooner.
          nextInMs = Math.max(0, Math.min(this.standbyLookMs(), attempt.expiresInMs));
        }
      } catch (error) {
        this.failures += 1;
        this.lastError = errorMessage(error);
        // The first failure after a success is news; the ones that follow are the same story.
        const report = this.failures === 1 ? this.log.warn : this.log.debug;
        report.call(this.log, "leader election attempt failed", { error: this.lastError, leading: this.leading, failures: this.failures });
        if (!this.leading) nextInMs = this.standbyLookMs();
      }
      await this.sleep(nextInMs - (this.clock.now() - startedAt));
    }
  }

  private standbyLookMs(): number {
    return Math.max(1, Math.round(this.timing.retryPeriodMs / STANDBY_LOOKS_PER_RETRY_PERIOD));
  }

  /** One round: read the Lease, and write ourselves in if it is ours, free or expired. */
  private async attempt(): Promise<Attempt> {
    const sentAt = this.clock.now();
    const { store, identity } = this.options;
    const current = await store.get();
    if (!current) {
      const created = await store.create({ ...this.mine(), leaseTransitions: 0, acquireTime: new Date(sentAt) });
      this.see(created);
      return { kind: "acquired", sentAt };
    }
    this.see(current);
    const { record } = current;
    const holder = record.holderIdentity;
    if (holder !== "" && holder !== identity) {
      const expiresInMs = this.observed!.at + record.leaseDurationSeconds * 1_000 - this.clock.now();
      if (expiresInMs > 0) return { kind: "heldByOther", holder, expiresInMs };
    }
    const ours = holder === identity;
    const written = await store.update(
      {
        ...this.mine(),
        leaseTransitions: ours ? record.leaseTransitions : record.leaseTransitions + 1,
        acquireTime: ours && record.acquireTime ? record.acquireTime : new Date(sentAt),
      },
      current.resourceVersion,
    );
    this.see(written);
    if (!ours) this.log.info("took over the Lease", { from: holder || "(released)", transitions: written.record.leaseTransitions });
    return { kind: "acquired", sentAt };
  }

  private mine(): Omit<LeaderLeaseRecord, "leaseTransitions"> {
    return { holderIdentity: this.options.identity, leaseDurationSeconds: this.timing.leaseDurationMs / 1_000, renewTime: new Date(this.clock.now()) };
  }

  /** Records a read or write; a new resourceVersion restarts the holder's lease as this replica sees it. */
  private see(lease: StoredLeaderLease): void {
    const now = this.clock.now();
    this.lastContactAt = now;
    const holder = lease.record.holderIdentity;
    if (this.observed?.resourceVersion === lease.resourceVersion) return;
    if (this.observed?.holder !== holder && holder !== this.options.identity) {
      this.log.info("leader observed", { holder: holder || "(released)" });
    }
    this.observed = { resourceVersion: lease.resourceVersion, at: now, holder };
  }

  /** A successful acquire or renew sent at `sentAt`: lead (again) until sentAt + renew deadline. */
  private async renewed(sentAt: number): Promise<void> {
    const remainingMs = sentAt + this.timing.renewDeadlineMs - this.clock.now();
    if (remainingMs <= 0) {
      // The answer came too late to count: the deadline has passed (or is passing) already.
      this.stepDown("the renewal answered after the renew deadline");
      return;
    }
    if (!this.leading) {
      await this.steppingDown;
      // The previous term's work took a while to stop: lead only if this renewal still counts.
      if (this.stopped || sentAt + this.timing.renewDeadlineMs <= this.clock.now()) return;
      this.leading = true;
      this.terms += 1;
      this.log.info("started leading", { term: this.terms });
      this.armDeadline(sentAt + this.timing.renewDeadlineMs - this.clock.now());
      try {
        this.options.onStartedLeading();
      } catch (error) {
        this.stepDown(`starting the work failed: ${errorMessage(error)}`);
      }
      return;
    }
    this.armDeadline(remainingMs);
  }

  private armDeadline(ms: number): void {
    clearTimeout(this.deadlineTimer);
    this.deadlineTimer = setTimeout(() => this.stepDown(`no renewal within the renew deadline (${this.timing.renewDeadlineMs} ms)`), Math.max(0, ms));
  }

  /** Stops leading at once (synchronously: no forward starts after this), then lets the work wind down. */
  private stepDown(why: string): void {
    clearTimeout(this.deadlineTimer);
    this.deadlineTimer = undefined;
    if (!this.leading) return;
    this.leading = false;
    const level = why === "stopping" ? this.log.info : this.log.warn;
    level.call(this.log, "stopped leading", { why, term: this.terms });
    const previous = this.steppingDown;
    this.steppingDown = previous.then(() =>
      this.options.onStoppedLeading(why).catch((error: unknown) => this.log.error("stopping the work failed", { error: errorMessage(error) })),
    );
  }

  /** Gives the Lease up (holder ""), if it is still ours; best effort, a standby otherwise waits it out. */
  private async release(): Promise<void> {
    try {
      await withTimeout(
        (async () => {
          const current = await this.options.store.get();
          if (!current || current.record.holderIdentity !== this.options.identity) return;
          await this.options.store.update({ ...current.record, holderIdentity: "", renewTime: new Date(this.clock.now()) }, current.resourceVersion);
          this.log.info("released the Lease");
        })(),
        this.timing.renewDeadlineMs,
      );
    } catch (error) {
      this.log.warn("could not release the Lease; a standby takes over when it expires", { error: errorMessage(error) });
    }
  }

  private sleep(ms: number): Promise<void> {
    if (this.stopped || ms <= 0) return Promise.resolve();
    return new Promise((resolve) => {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const done = () => {
        clearTimeout(timer);
        this.wake = undefined;
        resolve();
      };
      timer = setTimeout(done, ms);
      this.wake = done;
    });
  }
}

class AttemptTimeoutError extends ControllerError {
  override readonly name = "AttemptTimeoutError";
  readonly disposition = "retryable";
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new AttemptTimeoutError(`no answer from the API server within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
