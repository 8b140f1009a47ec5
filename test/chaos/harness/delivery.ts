/**
 * Delivery of reconcile requests to a target, with the event-stream faults:
 *   - duplicates: each request is delivered 2 to 3 times, concurrently with a little jitter, in shuffled
 *     order, and half the time one copy is held back and delivered with the next request (reordered:
 *     an older request arrives after a newer one);
 *   - stale replay: right after an invocation moved the DVM to its next phase, the request it was given
 *     (the previous resourceVersion) is delivered again, and the target's read is served the DVM as it
 *     was before that write, as a lagging informer cache would.
 * Errors (a killed worker, a thrown invocation) become a "retry" result, as a relay would retry.
 */
import type { ReconcileRequest, RunResult } from "../../../src/contracts/request";
import type { DvmHistory } from "./observatory";
import { between, type Random, shuffle, sleep } from "./random";
import type { InvokeHints, Target } from "./targets";

export interface DeliveryFaults {
  duplicates: boolean;
  staleReplay: boolean;
}

export interface DeliveryCounts {
  /** Requests handed to the deliverer (by a driver or a relay). */
  requests: number;
  /** Invocations of the target, all copies and replays included. */
  invocations: number;
  /** Extra copies delivered. */
  duplicates: number;
  /** Copies held back and delivered after a newer request. */
  reordered: number;
  staleReplays: number;
  /** Stale replays whose read was served the older version (it was still in the watch history). */
  staleReads: number;
  /** Invocations that failed (thrown error, killed process). */
  errors: number;
}

export const ERROR_RETRY_MS = 200;

export function delayOf(result: RunResult): number {
  if ("requeueAfterMs" in result) return result.requeueAfterMs;
  if ("retryAfterMs" in result) return result.retryAfterMs;
  return 0;
}

export class Deliverer {
  readonly counts: DeliveryCounts = { requests: 0, invocations: 0, duplicates: 0, reordered: 0, staleReplays: 0, staleReads: 0, errors: 0 };
  private readonly late = new Map<string, ReconcileRequest[]>();

  constructor(
    readonly target: Target,
    private readonly history: DvmHistory,
    private readonly faults: DeliveryFaults,
    private readonly random: Random,
  ) {}

  async deliver(request: ReconcileRequest): Promise<RunResult> {
    this.counts.requests++;
    if (!this.faults.duplicates) return this.deliverOne(request);
    const copies = between(this.random, 2, 3);
    this.counts.duplicates += copies - 1;
    let batch: ReconcileRequest[] = Array.from({ length: copies }, (_, i) => ({
      ...request,
      reason: `${request.reason ?? "delivery"} (copy ${i + 1}/${copies})`,
    }));
    batch.push(...(this.late.get(request.uid) ?? []));
    this.late.delete(request.uid);
    batch = shuffle(this.random, batch);
    if (this.random() < 0.5) {
      this.late.set(request.uid, [batch.pop()!]);
      this.counts.reordered++;
    }
    const jitters = batch.map((_, i) => (i === 0 ? 0 : Math.floor(this.random() * 40)));
    const results = await Promise.all(batch.map(async (copy, i) => (await sleep(jitters[i]!), this.deliverOne(copy))));
    return combine(results);
  }

  private async deliverOne(request: ReconcileRequest): Promise<RunResult> {
    const result = await this.invoke(request, {});
    if (this.faults.staleReplay && result.kind === "advanced") {
      const staleDvm = this.history.at(request.uid, request.resourceVersion);
      this.counts.staleReplays++;
      if (staleDvm) this.counts.staleReads++;
      await this.invoke({ ...request, reason: `stale replay at resourceVersion ${request.resourceVersion}` }, staleDvm ? { staleDvm } : {});
    }
    return result;
  }

  private async invoke(request: ReconcileRequest, hints: InvokeHints): Promise<RunResult> {
    this.counts.invocations++;
    try {
      return await this.target.invoke(request, hints);
    } catch (error) {
      this.counts.errors++;
      return { kind: "retry", phase: "", error: error instanceof Error ? error.message : String(error), retryAfterMs: ERROR_RETRY_MS };
    }
  }
}

/** What the driver acts on when several copies answered: finished wins, then the soonest follow-up. */
export function combine(results: RunResult[]): RunResult {
  const finished = results.find((r) => r.kind === "finished" || r.kind === "gone");
  if (finished) return finished;
  return results.reduce((best, r) => (delayOf(r) < delayOf(best) ? r : best));
}
