/**
 * The harness's own list+watch of one collection, independent of the relay's (an instrument that shares
 * code with what it measures proves less). Lists once, watches from the list's resourceVersion with
 * bookmarks, resumes from the last resourceVersion when a watch ends (an API server restart), and lists
 * again when the server answers 410 Gone. Every object seen, listed or watched, goes to `onObject`.
 */
import { type KubeConfig, KubernetesObjectApi, Watch } from "@kubernetes/client-node";
import { sleep } from "./random";

export interface Collection {
  apiVersion: string;
  kind: string;
  /** Watch path of the whole collection, e.g. "/api/v1/pods". */
  path: string;
  /** List only this namespace (the watch path names it too). */
  namespace?: string;
  labelSelector?: string;
}

export type ObservedEvent = "LISTED" | "ADDED" | "MODIFIED" | "DELETED";

export interface FollowStats {
  lists: number;
  watches: number;
  errors: number;
}

export class Follow {
  private readonly objects: KubernetesObjectApi;
  private readonly watcher: Watch;
  private resourceVersion: string | undefined;
  private stopped = false;
  private abort: AbortController | undefined;
  private loopDone: Promise<void> | undefined;
  private syncedResolve!: () => void;
  /** Resolves after the first list was delivered. */
  readonly synced = new Promise<void>((resolve) => (this.syncedResolve = resolve));
  readonly stats: FollowStats = { lists: 0, watches: 0, errors: 0 };

  constructor(
    kubeConfig: KubeConfig,
    private readonly collection: Collection,
    private readonly onObject: (event: ObservedEvent, object: unknown) => void,
  ) {
    this.objects = KubernetesObjectApi.makeApiClient(kubeConfig);
    this.watcher = new Watch(kubeConfig);
  }

  start(): this {
    this.loopDone ??= this.loop();
    return this;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.abort?.abort();
    await this.loopDone;
  }

  private async loop(): Promise<void> {
    let failures = 0;
    while (!this.stopped) {
      try {
        if (this.resourceVersion === undefined) await this.list();
        const ended = await this.watchOnce();
        if (ended === "expired") this.resourceVersion = undefined;
        failures = ended === "failed" ? failures + 1 : 0;
      } catch {
        this.stats.errors++;
        failures++;
      }
      if (failures > 0 && !this.stopped) await sleep(Math.min(1_000, 50 * 2 ** Math.min(failures, 5)));
    }
  }

  private async list(): Promise<void> {
    const { apiVersion, kind, namespace, labelSelector } = this.collection;
    const listed = await this.objects.list(apiVersion, kind, namespace, undefined, undefined, undefined, undefined, labelSelector);
    this.stats.lists++;
    for (const item of listed.items) this.onObject("LISTED", item);
    this.resourceVersion = listed.metadata?.resourceVersion;
    this.syncedResolve();
  }

  /** One watch request, until it ends: "closed" (resume), "expired" (410: list again) or "failed". */
  private watchOnce(): Promise<"closed" | "expired" | "failed"> {
    return new Promise((resolve) => {
      let outcome: "closed" | "expired" | "failed" = "closed";
      let events = 0;
      const openedAt = Date.now();
      this.stats.watches++;
      const params: Record<string, string | number | boolean> = {
        allowWatchBookmarks: true,
        timeoutSeconds: 120,
        ...(this.resourceVersion ? { resourceVersion: this.resourceVersion } : {}),
        ...(this.collection.labelSelector ? { labelSelector: this.collection.labelSelector } : {}),
      };
      this.watcher
        .watch(
          this.collection.path,
          params,
          (type: string, object: unknown) => {
            const meta = (object as { metadata?: { resourceVersion?: string } } | undefined)?.metadata;
            if (type === "ERROR") {
              const code = (object as { code?: number } | undefined)?.code;
              outcome = code === 410 ? "expired" : "failed";
              return;
            }
            events++;
            if (meta?.resourceVersion) this.resourceVersion = meta.resourceVersion;
            if (type === "ADDED" || type === "MODIFIED" || type === "DELETED") this.onObject(type, object);
          },
          (error: unknown) => {
            if (error) {
              const status = (error as { statusCode?: number }).statusCode;
              outcome = status === 410 ? "expired" : this.stopped ? "closed" : "failed";
              if (outcome === "failed") this.stats.errors++;
            }
            // A watch that a stopping server ends at once is a failure, not a reason to spin.
            if (outcome === "closed" && events === 0 && Date.now() - openedAt < 200 && !this.stopped) outcome = "failed";
            resolve(outcome);
          },
        )
        .then((abort) => {
          this.abort = abort;
          if (this.stopped) abort.abort();
        })
        .catch(() => resolve("failed"));
    });
  }
}
