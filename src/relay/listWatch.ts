/**
 * List-then-watch of one collection, the way an informer keeps up without keeping a cache: list once
 * for a starting resourceVersion, watch from it (with bookmarks, so it stays fresh while quiet), resume
 * from the last resourceVersion seen whenever a watch ends, and list again only when the server says
 * that resourceVersion has expired (410 Gone). The caller keeps whatever index it needs.
 */
import { type KubeConfig, Watch } from "@kubernetes/client-node";
import { toKubeApiError } from "../kube/errors";
import { type BackoffOptions, backoffDelay } from "../lib/backoff";
import type { Clock } from "../lib/clock";
import { errorMessage } from "../lib/errorMessage";
import type { Logger } from "../lib/log";

export type WatchEventType = "ADDED" | "MODIFIED" | "DELETED";

export interface ListResult {
  items: unknown[];
  /** The collection's resourceVersion: where the watch starts. */
  resourceVersion: string;
}

export interface ListWatchOptions {
  /** For logs and stats, e.g. "dvms" or "pods@source". */
  name: string;
  kubeConfig: KubeConfig;
  /** Collection path, e.g. "/api/v1/pods" or "/apis/g/v/namespaces/ns/plural". */
  path: string;
  labelSelector?: string;
  list: () => Promise<ListResult>;
  /** After the first list (initial) and after every re-list that follows an expired resourceVersion. */
  onList: (items: unknown[], initial: boolean) => void;
  onEvent: (type: WatchEventType, object: unknown) => void;
  /**
   * Server-side timeout of each watch request, in seconds. Default: random in [300, 600) per watch,
   * as client-go does, so that many relays do not reconnect in step.
   */
  timeoutSeconds?: number;
  /** Between failed lists or broken watches. */
  backoff?: BackoffOptions;
  log: Logger;
  clock: Clock;
}

export interface ListWatchStats {
  name: string;
  /** A watch request is open now. */
  connected: boolean;
  /** The first list has been delivered. */
  synced: boolean;
  resourceVersion?: string;
  /** Clock time of the last event (bookmarks included), if any. */
  lastEventAt?: number;
  /** Watch requests opened so far (each resume is one more). */
  watches: number;
  /** Lists so far, the first one included. */
  lists: number;
  /** Failed lists, failed watches and ERROR events. */
  errors: number;
}

type WatchEnd = { kind: "closed"; events: number; elapsedMs: number } | { kind: "expired" } | { kind: "failed"; error: unknown };

/** A watch open this much longer than its own server-side timeout is dead: abort it and resume. */
const STALE_GRACE_MS = 30_000;

export class ListWatch {
  private readonly watcher: Watch;
  private readonly stats: ListWatchStats;
  private stopped = false;
  private running: Promise<void> | undefined;
  private controller: AbortController | undefined;
  private wake: (() => void) | undefined;

  constructor(private readonly options: ListWatchOptions) {
    this.watcher = new Watch(options.kubeConfig);
    this.stats = { name: options.name, connected: false, synced: false, watches: 0, lists: 0, errors: 0 };
  }

  start(): void {
    if (this.running) return;
    this.running = this.loop();
  }

  /** Ends the current watch and the loop; resolves when the loop is done or `timeoutMs` passed. */
  async stop(timeoutMs = 5_000): Promise<void> {
    this.stopped = true;
    this.controller?.abort();
    this.wake?.();
    if (!this.running) return;
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([this.running, new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)))]);
    clearTimeout(timer);
  }

  snapshot(): ListWatchStats {
    return { ...this.stats };
  }

  private async loop(): Promise<void> {
    let failures = 0;
    const log = this.options.log;
    while (!this.stopped) {
      if (this.stats.resourceVersion === undefined) {
        let listed: ListResult;
        try {
          listed = await this.options.list();
        } catch (error) {
          this.stats.errors += 1;
          failures += 1;
          const reason = toKubeApiError(error, `list ${this.options.path}`);
          log.warn("list failed; retrying", { watch: this.options.name, error: reason.message, statusCode: reason.statusCode, failures });
          await this.sleep(backoffDelay(failures, this.options.backoff));
          continue;
        }
        if (this.stopped) return;
        const initial = this.stats.lists === 0;
        this.stats.lists += 1;
        this.stats.resourceVersion = listed.resourceVersion;
        try {
          this.options.onList(listed.items, initial);
        } catch (error) {
          log.error("handling a list failed", { watch: this.options.name, error: errorMessage(error) });
        }
        this.stats.synced = true;
      }

      const end = await this.watchOnce(this.stats.resourceVersion);
      if (this.stopped) return;
      switch (end.kind) {
        case "closed":
          // A watch the server ends at once with nothing in it is as good as a failure: back off
          // rather than spin.
          if (end.events === 0 && end.elapsedMs < 1_000) {
            failures += 1;
            await this.sleep(backoffDelay(failures, this.options.backoff));
          } else {
            failures = 0;
          }
          break;
        case "expired":
          log.info("resourceVersion expired; listing again", { watch: this.options.name, resourceVersion: this.stats.resourceVersion });
          delete this.stats.resourceVersion;
          failures = 0;
          break;
        case "failed":
          this.stats.errors += 1;
          failures += 1;
          log.warn("watch failed; resuming", { watch: this.options.name, error: errorMessage(end.error), failures });
          await this.sleep(backoffDelay(failures, this.options.backoff));
          break;
        default: {
          const unexpected: never = end;
          throw new Error(`unexpected watch end ${JSON.stringify(unexpected)}`);
        }
      }
    }
  }

  /** One watch request from `resourceVersion`; resolves when it ends, however it ends. */
  private watchOnce(resourceVersion: string): Promise<WatchEnd> {
    const { clock, log } = this.options;
    const timeoutSeconds = this.options.timeoutSeconds ?? 300 + Math.floor(Math.random() * 300);
    const startedAt = clock.now();
    let events = 0;
    let expired = false;
    let ended = false;

    return new Promise<WatchEnd>((resolve) => {
      const finish = (end: WatchEnd) => {
        if (ended) return;
        ended = true;
        clearTimeout(staleTimer);
        this.stats.connected = false;
        this.controller = undefined;
        resolve(end);
      };
      const staleTimer = setTimeout(
        () => {
          log.warn("watch outlived its timeout; reconnecting", { watch: this.options.name, timeoutSeconds });
          this.controller?.abort();
          finish({ kind: "closed", events, elapsedMs: clock.now() - startedAt });
        },
        timeoutSeconds * 1_000 + STALE_GRACE_MS,
      );
      staleTimer.unref?.();

      const onEvent = (type: string, object: unknown) => {
        if (ended) return;
        events += 1;
        this.stats.lastEventAt = clock.now();
        const version = resourceVersionOf(object);
        switch (type) {
          case "ADDED":
          case "MODIFIED":
          case "DELETED":
            // The position moves on even if the object cannot be handled: a bad object is skipped.
            if (version) this.stats.resourceVersion = version;
            try {
              this.options.onEvent(type, object);
            } catch (error) {
              log.error("handling an event failed; skipped", { watch: this.options.name, type, error: errorMessage(error) });
            }
            break;
          case "BOOKMARK":
            if (version) this.stats.resourceVersion = version;
            break;
          case "ERROR": {
            const status = object as { code?: unknown; reason?: unknown; message?: unknown } | null;
            if (status?.code === 410 || status?.reason === "Expired" || status?.reason === "Gone") {
              expired = true;
            } else {
              this.stats.errors += 1;
              log.warn("watch reported an error", { watch: this.options.name, status: status ?? undefined });
            }
            break;
          }
          default:
            log.warn("unknown watch event type; skipped", { watch: this.options.name, type });
        }
      };

      const onDone = (error: unknown) => {
        if (this.stopped) return finish({ kind: "closed", events, elapsedMs: clock.now() - startedAt });
        if (expired || statusCodeOf(error) === 410) return finish({ kind: "expired" });
        if (error) return finish({ kind: "failed", error });
        finish({ kind: "closed", events, elapsedMs: clock.now() - startedAt });
      };

      this.stats.watches += 1;
      this.watcher
        .watch(
          this.options.path,
          {
            resourceVersion,
            allowWatchBookmarks: true,
            timeoutSeconds,
            ...(this.options.labelSelector ? { labelSelector: this.options.labelSelector } : {}),
          },
          onEvent,
          onDone,
        )
        .then(
          (controller) => {
            // done() may already have run (a refused request): then this watch is not connected.
            if (ended) return;
            this.controller = controller;
            this.stats.connected = true;
            if (this.stopped) controller.abort();
          },
          (error: unknown) => finish({ kind: "failed", error }),
        );
    });
  }

  private sleep(ms: number): Promise<void> {
    if (this.stopped || ms <= 0) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.wake = done;
    });
  }
}

function resourceVersionOf(object: unknown): string | undefined {
  const version = (object as { metadata?: { resourceVersion?: unknown } } | null | undefined)?.metadata?.resourceVersion;
  return typeof version === "string" && version.length > 0 ? version : undefined;
}

function statusCodeOf(error: unknown): number | undefined {
  const e = error as { statusCode?: unknown; code?: unknown } | null | undefined;
  if (typeof e?.statusCode === "number") return e.statusCode;
  return typeof e?.code === "number" ? e.code : undefined;
}
