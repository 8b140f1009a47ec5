/** Cluster over a real API server, with @kubernetes/client-node. Every read goes to the server. */
import {
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  KubernetesObjectApi,
  PatchStrategy,
  setHeaderOptions,
  type KubernetesObject,
} from "@kubernetes/client-node";
import type { Cluster, EnsureResult } from "./cluster";
import { toKubeApiError } from "./errors";
import { labelSelector, type KubeObject, type ObjectRef } from "./objects";

function describe(ref: ObjectRef): string {
  return `${ref.kind} ${ref.namespace ? `${ref.namespace}/` : ""}${ref.name}`;
}

/** Splits "group/version" (or "v1") for the custom-objects API. */
export function splitApiVersion(apiVersion: string): { group: string; version: string } {
  const slash = apiVersion.indexOf("/");
  return slash < 0 ? { group: "", version: apiVersion } : { group: apiVersion.slice(0, slash), version: apiVersion.slice(slash + 1) };
}

export class KubeCluster implements Cluster {
  private readonly objects: KubernetesObjectApi;
  private readonly core: CoreV1Api;
  private readonly custom: CustomObjectsApi;
  private readonly servedKinds = new Map<string, boolean>();

  constructor(
    readonly name: string,
    readonly kubeConfig: KubeConfig,
  ) {
    this.objects = KubernetesObjectApi.makeApiClient(kubeConfig);
    this.core = kubeConfig.makeApiClient(CoreV1Api);
    this.custom = kubeConfig.makeApiClient(CustomObjectsApi);
  }

  async get<T extends KubeObject = KubeObject>(ref: ObjectRef): Promise<T | undefined> {
    try {
      return (await this.objects.read({
        apiVersion: ref.apiVersion,
        kind: ref.kind,
        metadata: { name: ref.name, ...(ref.namespace ? { namespace: ref.namespace } : {}) },
      })) as unknown as T;
    } catch (error) {
      const e = toKubeApiError(error, `${this.name}: read ${describe(ref)}`);
      if (e.isNotFound) return undefined;
      throw e;
    }
  }

  async ensure<T extends KubeObject>(object: T): Promise<EnsureResult<T>> {
    const ref = { apiVersion: object.apiVersion, kind: object.kind, namespace: object.metadata.namespace, name: object.metadata.name };
    try {
      const created = await this.objects.create(object as unknown as KubernetesObject);
      return { object: created as unknown as T, created: true };
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
    try {
      const result = await this.objects.list(kind.apiVersion, kind.kind, namespace, undefined, undefined, undefined, undefined, labelSelector(labels));
      return result.items as unknown as T[];
    } catch (error) {
      const e = toKubeApiError(error, `${this.name}: list ${kind.kind} in ${namespace ?? "all namespaces"}`);
      // A kind the server does not serve (e.g. Route on plain Kubernetes) has no objects.
      if (e.isNotFound) return [];
      throw e;
    }
  }

  async delete(ref: ObjectRef): Promise<"deleted" | "absent"> {
    try {
      await this.objects.delete(
        { apiVersion: ref.apiVersion, kind: ref.kind, metadata: { name: ref.name, ...(ref.namespace ? { namespace: ref.namespace } : {}) } },
        undefined,
        undefined,
        undefined,
        undefined,
        "Background",
      );
      return "deleted";
    } catch (error) {
      const e = toKubeApiError(error, `${this.name}: delete ${describe(ref)}`);
      if (e.isNotFound) return "absent";
      throw e;
    }
  }

  async patchStatus(ref: ObjectRef, status: Record<string, unknown>): Promise<void> {
    const { group, version } = splitApiVersion(ref.apiVersion);
    try {
      await this.custom.patchNamespacedCustomObjectStatus(
        { group, version, namespace: ref.namespace ?? "", plural: await this.pluralOf(ref), name: ref.name, body: { status } },
        setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
      );
    } catch (error) {
      throw toKubeApiError(error, `${this.name}: patch status of ${describe(ref)}`);
    }
  }

  async podLogs(namespace: string, name: string, container: string, tailLines: number): Promise<string> {
    try {
      return await this.core.readNamespacedPodLog({ namespace, name, container, tailLines });
    } catch (error) {
      const e = toKubeApiError(error, `${this.name}: logs of pod ${namespace}/${name}`);
      // No logs yet (container not started, or a fake kubelet that has none): nothing to parse.
      if (e.isNotFound || e.statusCode === 400) return "";
      throw e;
    }
  }

  async serves(kind: { apiVersion: string; kind: string }): Promise<boolean> {
    const key = `${kind.apiVersion}/${kind.kind}`;
    const known = this.servedKinds.get(key);
    if (known !== undefined) return known;
    const { group, version } = splitApiVersion(kind.apiVersion);
    let served = false;
    try {
      const resources = group
        ? await this.custom.getAPIResources({ group, version })
        : await this.core.getAPIResources();
      served = resources.resources.some((r) => r.kind === kind.kind);
    } catch (error) {
      const e = toKubeApiError(error, `${this.name}: discover ${key}`);
      if (!e.isNotFound) throw e;
    }
    this.servedKinds.set(key, served);
    return served;
  }

  private async pluralOf(ref: ObjectRef): Promise<string> {
    const { group, version } = splitApiVersion(ref.apiVersion);
    const resources = await this.custom.getAPIResources({ group, version });
    const found = resources.resources.find((r) => r.kind === ref.kind && !r.name.includes("/"));
    if (!found) throw new Error(`${this.name}: the API server does not serve ${ref.apiVersion} ${ref.kind}`);
    return found.name;
  }
}

export function kubeConfigFromString(text: string, context?: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromString(text);
  if (context) kc.setCurrentContext(context);
  return kc;
}
