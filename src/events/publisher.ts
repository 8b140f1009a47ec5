/**
 * Sends outgoing CloudEvents without ever holding up or failing the work that produced them.
 *
 *   publish / publishLater   return at once; events wait in a bounded queue (a full queue drops the
 *                            new event and counts it) and one background worker sends them in order;
 *   retries                  a failed send is retried with capped exponential backoff ("full jitter")
 *                            up to maxAttempts, unless the sink says retrying is pointless (HTTP 4xx);
 *   flush(deadline)          waits until everything queued is sent or given up, or the deadline
 *                            passes, whichever comes first; it never throws. A Lambda handler calls it
 *                            before returning so events are not left in a frozen container; what the
 *                            deadline cuts off stays queued and goes out with the next invocation.
 *
 * Counts: sent, failed (given up after retries, or the event could not be built), dropped (queue full).
 */

import type { CloudEventV1 } from "cloudevents";
import { ControllerError, dispositionOf, type ErrorDisposition } from "../contracts/controllerError";
import { backoffDelay } from "../lib/backoff";
import { errorMessage } from "../lib/errorMessage";
import { type Logger, silentLogger } from "../lib/log";

/** Where events go (HTTP endpoint, EventBridge bus). */
export interface EventSink {
  /** Short name for logs and the metrics' Sink dimension ("http", "eventbridge"). */
  readonly name: string;
  /** Sends one event; throws (preferably a SendError) when it was not accepted. */
  send(event: CloudEventV1<unknown>, signal: AbortSignal): Promise<void>;
}

/** A send that failed; `retryable` false when trying again cannot help (a 4xx, a refused entry). */
export class SendError extends ControllerError {
  override readonly name: string = "SendError";
  constructor(
    message: string,
    readonly retryable: boolean,
  ) {
    super(message);
  }
  get disposition(): ErrorDisposition {
    return this.retryable ? "retryable" : "terminal";
  }
}

export interface PublisherCounts {
  sent: number;
  failed: number;
  dropped: number;
}

export interface FlushResult extends PublisherCounts {
  /** Events still queued or being built when flush returned (non-zero only after a timeout). */
  pending: number;
  timedOut: boolean;
}

export interface EventPublisherOptions {
  sink: EventSink;
  /** Events waiting (or being sent), at most; another one is dropped. Default 100. */
  maxQueue?: number;
  /** Tries per event, the first included. Default 3. */
  maxAttempts?: number;
  /** Upper bound of the first backoff, doubling per retry up to maxDelayMs. Default 100 and 1,000 ms. */
  baseDelayMs?: number;
  maxDelayMs?: number;
  /** One send's time limit. Default 2,000 ms. */
  sendTimeoutMs?: number;
  log?: Logger;
  /** Injectable for tests. */
  sleep?: (ms: number) => Promise<void>;
  random?: () => number;
}

interface Queued {
  event: CloudEventV1<unknown>;
}

export class EventPublisher {
  readonly sink: EventSink;
  private readonly maxQueue: number;
  private readonly maxAttempts: number;
  private readonly baseDelayMs: number;
  private readonly maxDelayMs: number;
  private readonly sendTimeoutMs: number;
  private readonly log: Logger;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly random: () => number;

  private readonly queue: Queued[] = [];
  private readonly builds = new Set<Promise<void>>();
  private worker: Promise<void> | undefined;
  private readonly totals: PublisherCounts = { sent: 0, failed: 0, dropped: 0 };

  constructor(options: EventPublisherOptions) {
    this.sink = options.sink;
    this.maxQueue = Math.max(1, options.maxQueue ?? 100);
    this.maxAttempts = Math.max(1, options.maxAttempts ?? 3);
    this.baseDelayMs = options.baseDelayMs ?? 100;
    this.maxDelayMs = options.maxDelayMs ?? 1_000;
    this.sendTimeoutMs = options.sendTimeoutMs ?? 2_000;
    this.log = options.log ?? silentLogger;
    this.sleep = options.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
    this.random = options.random ?? Math.random;
  }

  /** Counts since this publisher was created. */
  counts(): PublisherCounts {
    return { ...this.totals };
  }

  /** Events queued or being sent, plus builds not finished yet. */
  pending(): number {
    return this.queue.length + this.builds.size;
  }

  /** Queues events; returns how many were accepted (the rest were dropped: the queue was full). */
  publish(...events: CloudEventV1<unknown>[]): number {
    let accepted = 0;
    for (const event of events) {
      if (this.queue.length >= this.maxQueue) {
        this.totals.dropped++;
        this.log.warn("event dropped: the send queue is full", { type: event.type, subject: event.subject, maxQueue: this.maxQueue });
        continue;
      }
      this.queue.push({ event });
      accepted++;
    }
    if (accepted > 0) this.startWorker();
    return accepted;
  }

  /**
   * Queues the events `build` produces (e.g. after a ledger read) once it resolves; returns at once.
   * A build that fails counts as one failed event.
   */
  publishLater(build: () => Promise<readonly CloudEventV1<unknown>[]>): void {
    const pending: Promise<void> = Promise.resolve()
      .then(build)
      .then(
        (events) => void this.publish(...events),
        (error: unknown) => {
          this.totals.failed++;
          this.log.warn("events could not be built; not sent", { error: errorMessage(error) });
        },
      )
      .finally(() => this.builds.delete(pending));
    this.builds.add(pending);
  }

  /** Waits for the queue to empty, at most `deadlineMs`; never throws. */
  async flush(deadlineMs: number): Promise<FlushResult> {
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<true>((resolve) => {
      timer = setTimeout(() => resolve(true), Math.max(0, deadlineMs));
    });
    try {
      const timedOut = await Promise.race([this.idle().then(() => false as const), deadline]);
      const pending = this.pending();
      if (timedOut && pending > 0) this.log.warn("events still pending at the flush deadline; they stay queued", { pending, deadlineMs });
      return { ...this.counts(), pending, timedOut: timedOut && pending > 0 };
    } finally {
      clearTimeout(timer);
    }
  }

  private async idle(): Promise<void> {
    while (this.builds.size > 0 || this.worker) {
      await Promise.allSettled([...this.builds]);
      if (this.worker) await this.worker;
    }
  }

  private startWorker(): void {
    if (this.worker) return;
    const worker: Promise<void> = this.drain().finally(() => {
      this.worker = undefined;
      // An event queued while the last send finished: keep going.
      if (this.queue.length > 0) this.startWorker();
    });
    this.worker = worker;
  }

  private async drain(): Promise<void> {
    for (let item = this.queue[0]; item; item = this.queue[0]) {
      const sent = await this.sendWithRetries(item.event);
      this.queue.shift();
      if (sent) this.totals.sent++;
      else this.totals.failed++;
    }
  }

  private async sendWithRetries(event: CloudEventV1<unknown>): Promise<boolean> {
    for (let attempt = 1; ; attempt++) {
      try {
        await this.sink.send(event, AbortSignal.timeout(this.sendTimeoutMs));
        return true;
      } catch (error) {
        // Anything but a refusal is tried again: a sink's own failures are not marked.
        const retryable = dispositionOf(error) !== "terminal";
        const attributes = { type: event.type, id: event.id, sink: this.sink.name, attempt, error: errorMessage(error) };
        if (!retryable || attempt >= this.maxAttempts) {
          this.log.warn(retryable ? "event not sent: retries exhausted" : "event not sent: refused by the sink", attributes);
          return false;
        }
        this.log.debug("event send failed; retrying", attributes);
        await this.sleep(this.backoffMs(attempt));
      }
    }
  }

  /** Full jitter: uniform in [0, min(max, base * 2^(attempt-1))). */
  backoffMs(attempt: number): number {
    return backoffDelay(attempt, { initialMs: this.baseDelayMs, maxMs: this.maxDelayMs, jitter: "full", random: this.random });
  }
}
