/**
 * Bounds a phase body by its ledger lease, in every host (Lambda or one process). Another invocation may
 * take the phase over once the lease has expired by its own clock; so the body must have stopped before
 * that, by the holder's clock, with room for the two clocks to disagree. The body gets:
 *   - a deadline: the lease's end minus a margin (and the host's own deadline, e.g. Lambda's timeout);
 *     at the deadline the body's signal aborts and every cluster call it makes from then on is refused;
 *   - a heartbeat (renew) for bodies that legitimately run long: it extends the lease in the ledger,
 *     fenced by the attempt number, and moves the deadline; a renewal that finds the claim lost aborts
 *     the body at once.
 * Clock-skew assumption: the clocks of all hosts (Lambda, the relay's cluster, `npm start`) stay within
 * MAX_CLOCK_SKEW_MS of each other (NTP or the Amazon Time Sync Service keep them within milliseconds).
 */

import { ControllerError } from "../contracts/controllerError";
import type { PhaseLease } from "../contracts/lease";
import type { Cluster, MigrationClusters } from "../kube/cluster";
import type { KubeObject, ObjectRef } from "../kube/objects";
import { type Claim, LostClaimError, type PhaseLedger } from "../ledger";
import type { Clock } from "../lib/clock";

/** The largest disagreement between two hosts' clocks this design tolerates. */
export const MAX_CLOCK_SKEW_MS = 2_000;
/** Time for a request the body sent just before its deadline to land (API server or DynamoDB). */
export const IN_FLIGHT_ALLOWANCE_MS = 3_000;
/** Default margin between a body's deadline and its lease's end: covers skew and in-flight requests. */
export const DEFAULT_LEASE_MARGIN_MS = MAX_CLOCK_SKEW_MS + IN_FLIGHT_ALLOWANCE_MS;

/** The body ran into its deadline without renewing its lease; the phase is retried. */
export class LeaseDeadlineError extends ControllerError {
  override readonly name = "LeaseDeadlineError";
  readonly disposition = "retryable";
  constructor(readonly deadlineMs: number) {
    super(`the phase body did not finish within its lease (deadline ${deadlineMs} ms after it started) and was stopped`);
  }
}

export interface BodyLeaseOptions {
  ledger: PhaseLedger;
  claim: Claim;
  leaseMs: number;
  marginMs: number;
  clock: Clock;
  /** The host's own end (ms since the epoch), e.g. when Lambda stops the invocation; already net of a reserve. */
  hostDeadlineAt?: number;
  /**
   * When the host really stops the invocation (Lambda kills it). The claim's lease was cut to end there
   * (the runner's claimLeaseMs), and renewals never reach past it: a body killed with its host holds the
   * phase no longer than the host lived.
   */
  hostEndAt?: number;
}

/** Room kept before the host's end for the write that ends an attempt to land. */
export const HOST_END_ROOM_MS = 1_000;

/**
 * The lease to claim for a host that ends at `hostEndAt`: the runner's lease, cut to end when the host
 * does (never below `minimumMs`, so a claim made at the last moment is still a valid lease).
 */
export function leaseWithin(leaseMs: number, now: number, hostEndAt: number | undefined, minimumMs: number): number {
  if (hostEndAt === undefined) return leaseMs;
  return Math.min(leaseMs, Math.max(minimumMs, hostEndAt - now));
}

/** Until when a write that ends an attempt is worth retrying: the lease's end, and not past the host's. */
export function ledgerWriteDeadline(leaseExpiresAt: number, hostEndAt: number | undefined): number {
  return Math.min(leaseExpiresAt, (hostEndAt ?? Number.POSITIVE_INFINITY) - HOST_END_ROOM_MS);
}

export class BodyLease implements PhaseLease {
  private readonly controller = new AbortController();
  private expiresAt: number;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private readonly startedAt: number;
  /** Calls (cluster or renewal) refused after the stop: a body that got one did not finish its work. */
  private refused = 0;

  constructor(private readonly options: BodyLeaseOptions) {
    if (!(options.marginMs >= 0 && options.marginMs < options.leaseMs)) {
      throw new Error(`lease margin must be at least 0 and below the lease (${options.marginMs} ms of ${options.leaseMs} ms)`);
    }
    this.expiresAt = options.claim.leaseExpiresAt;
    this.startedAt = options.clock.now();
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** When the body must have stopped, by this host's clock. */
  deadline(): number {
    return Math.min(this.expiresAt - this.options.marginMs, this.options.hostDeadlineAt ?? Number.POSITIVE_INFINITY);
  }

  /** Until when the write that ends this attempt (complete, fail) is worth retrying. */
  ledgerWriteDeadline(): number {
    return ledgerWriteDeadline(this.expiresAt, this.options.hostEndAt);
  }

  async renew(): Promise<void> {
    if (this.signal.aborted) this.refused++;
    this.throwIfAborted();
    try {
      const leaseMs = leaseWithin(this.options.leaseMs, this.options.clock.now(), this.options.hostEndAt, 1);
      this.expiresAt = await this.options.ledger.renew(this.options.claim, leaseMs);
    } catch (error) {
      if (error instanceof LostClaimError) this.abort(error);
      throw error;
    }
    this.throwIfAborted();
    this.schedule();
  }

  /**
   * Runs the body under the deadline. Resolves or rejects with the body's own result when it ends in
   * time; rejects with LeaseDeadlineError or LostClaimError when it was stopped. After a stop it waits
   * for the body to notice (at most until the lease ends, less the skew), so the caller releases the
   * claim only once the body is over whenever the body honours its signal. A body that returns an
   * outcome within that wait without having been refused anything finished its work with calls sent
   * before the deadline (answers in flight at it): that outcome stands, as the completion is fenced by
   * the attempt anyway, so the work is not thrown away and repeated by the next attempt.
   */
  async run<T>(body: () => Promise<T>): Promise<T> {
    this.schedule();
    const settled = body().then(
      (value) => ({ ok: true as const, value }),
      (error: unknown) => ({ ok: false as const, error }),
    );
    const aborted = new Promise<"aborted">((resolve) => {
      if (this.signal.aborted) resolve("aborted");
      else this.signal.addEventListener("abort", () => resolve("aborted"), { once: true });
    });
    try {
      const first = await Promise.race([settled, aborted]);
      if (first !== "aborted" && !this.signal.aborted) {
        if (first.ok) return first.value;
        throw first.error;
      }
      const graceMs = Math.max(0, this.expiresAt - MAX_CLOCK_SKEW_MS - this.options.clock.now());
      const late = await Promise.race([settled, delay(graceMs).then(() => "gave up" as const)]);
      if (late !== "gave up" && late.ok && this.refused === 0 && this.signal.reason instanceof LeaseDeadlineError) return late.value;
      throw this.signal.reason;
    } finally {
      this.stop();
    }
  }

  /** Wraps the clusters so a body that ignores its signal still cannot change anything after the stop. */
  fence(clusters: MigrationClusters): MigrationClusters {
    // The clock is asked too: a process frozen past its deadline may resume before its timer fires.
    const stopped = (): Error | undefined => {
      if (!this.signal.aborted && this.options.clock.now() >= this.deadline()) this.abort(new LeaseDeadlineError(this.deadline() - this.startedAt));
      if (!this.signal.aborted) return undefined;
      this.refused++;
      return this.signal.reason as Error;
    };
    return {
      ...clusters,
      host: fencedCluster(clusters.host, stopped),
      source: fencedCluster(clusters.source, stopped),
      destination: fencedCluster(clusters.destination, stopped),
    };
  }

  private schedule(): void {
    if (this.timer) clearTimeout(this.timer);
    if (this.signal.aborted) return;
    const wait = Math.max(0, this.deadline() - this.options.clock.now());
    this.timer = setTimeout(() => this.abort(new LeaseDeadlineError(this.deadline() - this.startedAt)), wait);
    // A deadline must never keep a process alive on its own.
    this.timer.unref?.();
  }

  private abort(reason: Error): void {
    if (!this.signal.aborted) this.controller.abort(reason);
  }

  private stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private throwIfAborted(): void {
    if (this.signal.aborted) throw this.signal.reason;
  }
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref?.());
}

/** A Cluster whose every call is refused once `stopped()` names a reason (the lease is no longer ours). */
export function fencedCluster(cluster: Cluster, stopped: () => Error | undefined): Cluster {
  const check = () => {
    const reason = stopped();
    if (reason) throw reason;
  };
  return {
    name: cluster.name,
    get<T extends KubeObject = KubeObject>(ref: ObjectRef) {
      check();
      return cluster.get<T>(ref);
    },
    ensure<T extends KubeObject>(object: T) {
      check();
      return cluster.ensure(object);
    },
    list<T extends KubeObject = KubeObject>(kind: { apiVersion: string; kind: string }, namespace: string | undefined, labels: Record<string, string>) {
      check();
      return cluster.list<T>(kind, namespace, labels);
    },
    delete(ref: ObjectRef, options?: { uid?: string }) {
      check();
      return cluster.delete(ref, options);
    },
    patchAnnotations<T extends KubeObject = KubeObject>(ref: ObjectRef, annotations: Record<string, string | null>, resourceVersion: string) {
      check();
      return cluster.patchAnnotations<T>(ref, annotations, resourceVersion);
    },
    patchGuarded<T extends KubeObject = KubeObject>(ref: ObjectRef, patch: Record<string, unknown>, resourceVersion: string) {
      check();
      return cluster.patchGuarded<T>(ref, patch, resourceVersion);
    },
    patchStatus(ref: ObjectRef, status: Record<string, unknown>) {
      check();
      return cluster.patchStatus(ref, status);
    },
    podLogs(namespace: string, name: string, container: string, tailLines: number) {
      check();
      return cluster.podLogs(namespace, name, container, tailLines);
    },
    serves(kind: { apiVersion: string; kind: string }) {
      check();
      return cluster.serves(kind);
    },
  };
}
