/**
 * A minimal stand-in for kube-scheduler: binds every pod that has no spec.nodeName to one node (the
 * kwok node), through the pods/binding subresource as the real scheduler does. The controller creates
 * pods without nodeName, so without this they would stay Pending forever on a local control plane.
 *
 * List-then-watch with a field selector; when the watch ends (timeout, 410, network) it lists again, so
 * a pod missed in between is still bound. Binding an already-bound pod answers 409 and is ignored.
 */
import { appendFileSync } from "node:fs";
import { CoreV1Api, type KubeConfig, type V1Pod, Watch } from "@kubernetes/client-node";
import { statusCode } from "./crds";

const UNBOUND = "spec.nodeName=";

export class PodBinder {
  private stopped = false;
  private abort: AbortController | undefined;
  private loop: Promise<void> | undefined;
  private readonly inFlight = new Set<string>();
  private readonly core: CoreV1Api;
  /** Number of pods this binder has bound (tests read it). */
  bound = 0;

  constructor(
    private readonly kc: KubeConfig,
    private readonly nodeName: string,
    private readonly logFile: string,
  ) {
    this.core = kc.makeApiClient(CoreV1Api);
  }

  start(): void {
    this.loop ??= this.run();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.abort?.abort();
    await this.loop;
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      try {
        const list = await this.core.listPodForAllNamespaces({ fieldSelector: UNBOUND });
        for (const pod of list.items) void this.bind(pod);
        await this.watchFrom(list.metadata?.resourceVersion);
      } catch (err) {
        if (!this.stopped) this.log(`list/watch failed, retrying: ${String(err)}`);
        await new Promise((r) => setTimeout(r, 500));
      }
    }
  }

  /** Resolves when the watch ends for any reason. */
  private watchFrom(resourceVersion: string | undefined): Promise<void> {
    return new Promise((resolve) => {
      new Watch(this.kc)
        .watch(
          "/api/v1/pods",
          { fieldSelector: UNBOUND, resourceVersion, allowWatchBookmarks: true },
          (type, obj: V1Pod) => {
            if (type === "ADDED" || type === "MODIFIED") void this.bind(obj);
          },
          () => resolve(),
        )
        .then((ac) => {
          this.abort = ac;
          if (this.stopped) ac.abort();
        })
        .catch(() => resolve());
    });
  }

  private async bind(pod: V1Pod): Promise<void> {
    const { name, namespace, uid } = pod.metadata ?? {};
    if (!name || !namespace || !uid || pod.spec?.nodeName || pod.metadata?.deletionTimestamp) return;
    if (this.inFlight.has(uid)) return;
    this.inFlight.add(uid);
    try {
      await this.core.createNamespacedPodBinding({
        name,
        namespace,
        body: {
          apiVersion: "v1",
          kind: "Binding",
          metadata: { name, namespace, uid },
          target: { apiVersion: "v1", kind: "Node", name: this.nodeName },
        },
      });
      this.bound++;
      this.log(`bound ${namespace}/${name} to ${this.nodeName}`);
    } catch (err) {
      // 409: already bound (by us, earlier); 404: deleted meanwhile. Anything else is worth a line.
      const code = statusCode(err);
      if (code !== 409 && code !== 404) this.log(`binding ${namespace}/${name} failed: ${String(err)}`);
    } finally {
      this.inFlight.delete(uid);
    }
  }

  private log(line: string): void {
    try {
      appendFileSync(this.logFile, `${new Date().toISOString()} ${line}\n`);
    } catch {
      // The log dir may already be gone during shutdown.
    }
  }
}
