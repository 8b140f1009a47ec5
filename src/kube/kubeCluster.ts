/** Cluster over a real API server. Every read goes to the server: there is no cache. */

import type { Cluster, EnsureResult } from "./cluster";
import { toKubeApiError } from "./errors";
import type { KubeConfig } from "./kubeConfig";
import { type KubeObject, labelSelector, type ObjectRef, refOfObject } from "./objects";
import { KubeRest, resourcePath } from "./rest";

function describe(ref: ObjectRef): string {
  return `${ref.kind} ${ref.namespace ? `${ref.namespace}/` : ""}${ref.name}`;
}

interface ApiResourceList {
  resources: { name: string; kind: string; namespaced: boolean }[];
}

interface ResourceInfo {
  plural: string;
  namespaced: boolean;
}

const MERGE_PATCH = "application/merge-patch+json";

/**
 * A bound on one log read: the log belongs to a pod that runs in a tenant's namespace, and lines without an
 * end must not fill the function's memory. The API server cuts at this many bytes from the start of the
 * tail it selected, so it is set well above a finished attempt's tail (10,000 lines of rsync's output,
 * whose statistics come last): 4 MiB.
 */
export const POD_LOG_LIMIT_BYTES = 4 * 1024 * 1024;

export class KubeCluster implements Cluster {
  readonly rest: KubeRest;
  /** Discovery answers per group/version, kept for the life of the client (they do not change). */
  private readonly discovery = new Map<string, Promise<ApiResourceList | undefined>>();

  constructor(
    readonly name: string,
    readonly kubeConfig: KubeConfig,
  ) {
    this.rest = new KubeRest(kubeConfig);
  }

  async get<T extends KubeObject = KubeObject>(ref: ObjectRef): Promise<T | undefined> {
    const action = `${this.name}: read ${describe(ref)}`;
    try {
      const info = await this.resource(ref);
      return await this.rest.request<T>(
        { method: "GET", path: resourcePath(ref.apiVersion, info.plural, info.namespaced ? ref.namespace : undefined, ref.name) },
        action,
      );
    } catch (error) {
      const e = toKubeApiError(error, action);
      if (e.isNotFound) return undefined;
      throw e;
    }
  }

  async ensure<T extends KubeObject>(object: T): Promise<EnsureResult<T>> {
    const ref = refOfObject(object);
    const info = await this.resource(ref);
    try {
      const created = await this.rest.request<T>(
        { method: "POST", path: resourcePath(ref.apiVersion, info.plural, info.namespaced ? ref.namespace : undefined), body: object },
        `${this.name}: create ${describe(ref)}`,
      );
      return { object: created, created: true };
    } catch (error) {
      const e = toKubeApiError(error, `${this.name}: create ${describe(ref)}`);
      if (!e.isAlreadyExists) throw e;
      const existing = await this.get<T>(ref);
      // Deleted between our create and read: report the conflict so the caller retries.
      if (!existing) throw e;
      return { object: existing, created: false };
    }
  }

  async list<T extends KubeObject = KubeObject>(
    kind: { apiVersion: string; kind: string },
    namespace: string | undefined,
    labels: Record<string, string>,
  ): Promise<T[]> {
    const action = `${this.name}: list ${kind.kind} in ${namespace ?? "all namespaces"}`;
    const info = await this.resource(kind).catch((error) => {
      const e = toKubeApiError(error, action);
      // A kind the server does not serve (e.g. Route on plain Kubernetes) has no objects.
      if (e.isNotFound) return undefined;
      throw e;
    });
    if (!info) return [];
    const selector = labelSelector(labels);
    const result = await this.rest.request<{ items: T[] }>(
      {
        method: "GET",
        path: resourcePath(kind.apiVersion, info.plural, info.namespaced ? namespace : undefined),
        query: { labelSelector: selector || undefined },
      },
      action,
    );
    // Items of a list carry no apiVersion/kind of their own.
    return result.items.map((item) => ({ ...item, apiVersion: kind.apiVersion, kind: kind.kind }));
  }

  async delete(ref: ObjectRef, options: { uid?: string } = {}): Promise<"deleted" | "absent" | "replaced"> {
    const action = `${this.name}: delete ${describe(ref)}`;
    try {
      const info = await this.resource(ref);
      await this.rest.request(
        {
          method: "DELETE",
          path: resourcePath(ref.apiVersion, info.plural, info.namespaced ? ref.namespace : undefined, ref.name),
          query: { propagationPolicy: "Background" },
          ...(options.uid ? { body: { kind: "DeleteOptions", apiVersion: "v1", preconditions: { uid: options.uid } } } : {}),
        },
        action,
      );
      return "deleted";
    } catch (error) {
      const e = toKubeApiError(error, action);
      if (e.isNotFound) return "absent";
      // The precondition failed: the name now belongs to another object.
      if (options.uid && e.isConflict) return "replaced";
      throw e;
    }
  }

  async patchAnnotations<T extends KubeObject = KubeObject>(ref: ObjectRef, annotations: Record<string, string | null>, resourceVersion: string): Promise<T> {
    const info = await this.resource(ref);
    return await this.rest.request<T>(
      {
        method: "PATCH",
        path: resourcePath(ref.apiVersion, info.plural, info.namespaced ? ref.namespace : undefined, ref.name),
        body: { metadata: { resourceVersion, annotations } },
        contentType: MERGE_PATCH,
      },
      `${this.name}: annotate ${describe(ref)}`,
    );
  }

  async patchGuarded<T extends KubeObject = KubeObject>(ref: ObjectRef, patch: Record<string, unknown>, resourceVersion: string): Promise<T> {
    const info = await this.resource(ref);
    const metadata = { ...((patch.metadata as Record<string, unknown> | undefined) ?? {}), resourceVersion };
    return await this.rest.request<T>(
      {
        method: "PATCH",
        path: resourcePath(ref.apiVersion, info.plural, info.namespaced ? ref.namespace : undefined, ref.name),
        body: { ...patch, metadata },
        contentType: MERGE_PATCH,
      },
      `${this.name}: patch ${describe(ref)}`,
    );
  }

  async patchStatus(ref: ObjectRef, status: Record<string, unknown>): Promise<void> {
    const info = await this.resource(ref);
    await this.rest.request(
      { method: "PATCH", path: resourcePath(ref.apiVersion, info.plural, ref.namespace, ref.name, "status"), body: { status }, contentType: MERGE_PATCH },
      `${this.name}: patch status of ${describe(ref)}`,
    );
  }

  /** The last `tailLines` lines of a container's log, never more than POD_LOG_LIMIT_BYTES of them. */
  async podLogs(namespace: string, name: string, container: string, tailLines: number): Promise<string> {
    try {
      return await this.rest.request<string>(
        {
          method: "GET",
          path: resourcePath("v1", "pods", namespace, name, "log"),
          query: { container, tailLines, limitBytes: POD_LOG_LIMIT_BYTES },
          text: true,
        },
        `${this.name}: logs of pod ${namespace}/${name}`,
      );
    } catch (error) {
      const e = toKubeApiError(error, `${this.name}: logs of pod ${namespace}/${name}`);
      // No logs yet (container not started, or a fake kubelet that has none): nothing to parse.
      if (e.isNotFound || e.statusCode === 400) return "";
      throw e;
    }
  }

  async serves(kind: { apiVersion: string; kind: string }): Promise<boolean> {
    const list = await this.discover(kind.apiVersion);
    return Boolean(list?.resources.some((r) => r.kind === kind.kind && !r.name.includes("/")));
  }

  private discover(apiVersion: string): Promise<ApiResourceList | undefined> {
    let answer = this.discovery.get(apiVersion);
    if (!answer) {
      const path = apiVersion.includes("/") ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
      answer = this.rest.request<ApiResourceList>({ method: "GET", path }, `${this.name}: discover ${apiVersion}`).catch((error) => {
        this.discovery.delete(apiVersion);
        const e = toKubeApiError(error, `${this.name}: discover ${apiVersion}`);
        if (e.isNotFound) return undefined;
        throw e;
      });
      this.discovery.set(apiVersion, answer);
    }
    return answer;
  }

  private async resource(kind: { apiVersion: string; kind: string }): Promise<ResourceInfo> {
    const list = await this.discover(kind.apiVersion);
    const found = list?.resources.find((r) => r.kind === kind.kind && !r.name.includes("/"));
    if (!found)
      throw toKubeApiError(
        { code: 404, body: { reason: "NotFound", message: `the server does not serve ${kind.apiVersion} ${kind.kind}` } },
        `${this.name}: resolve ${kind.kind}`,
      );
    return { plural: found.name, namespaced: found.namespaced };
  }
}
