/**
 * In-memory Cluster for unit tests of phase decisions (pure logic). It counts creations per object, so
 * tests can assert that a side effect happened exactly once. Integration tests use the real API server.
 */
import type { Cluster, EnsureResult } from "../../src/kube/cluster";
import { KubeApiError } from "../../src/kube/errors";
import { type KubeObject, type ObjectRef, refOfObject } from "../../src/kube/objects";

const keyOf = (ref: ObjectRef) => `${ref.apiVersion}|${ref.kind}|${ref.namespace ?? ""}|${ref.name}`;

function mergePatch(target: unknown, patch: unknown): unknown {
  if (typeof patch !== "object" || patch === null || Array.isArray(patch)) return structuredClone(patch);
  const result: Record<string, unknown> = typeof target === "object" && target !== null && !Array.isArray(target) ? { ...(target as object) } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete result[key];
    else result[key] = mergePatch(result[key], value);
  }
  return result;
}

export class FakeCluster implements Cluster {
  readonly objects = new Map<string, KubeObject>();
  readonly creations = new Map<string, number>();
  readonly logs = new Map<string, string>();
  readonly servedKinds = new Set<string>();
  private version = 1;
  private serviceAddresses = 0;

  constructor(readonly name: string) {}

  add(...objects: KubeObject[]): this {
    for (const object of objects) this.objects.set(keyOf(refOfObject(object)), this.stamp(structuredClone(object)));
    return this;
  }

  async get<T extends KubeObject = KubeObject>(ref: ObjectRef): Promise<T | undefined> {
    const found = this.objects.get(keyOf(ref));
    return found ? (structuredClone(found) as T) : undefined;
  }

  async ensure<T extends KubeObject>(object: T): Promise<EnsureResult<T>> {
    const key = keyOf(refOfObject(object));
    const existing = this.objects.get(key);
    if (existing) return { object: structuredClone(existing) as T, created: false };
    this.creations.set(key, (this.creations.get(key) ?? 0) + 1);
    const stored = this.stamp(structuredClone(object));
    // As the API server does: a Service gets an address from the cluster's Service range.
    const spec = stored.spec as { clusterIP?: string } | undefined;
    if (stored.kind === "Service" && spec && !spec.clusterIP) spec.clusterIP = `198.19.0.${++this.serviceAddresses}`;
    this.objects.set(key, stored);
    return { object: structuredClone(stored) as T, created: true };
  }

  async list<T extends KubeObject = KubeObject>(
    kind: { apiVersion: string; kind: string },
    namespace: string | undefined,
    labels: Record<string, string>,
  ): Promise<T[]> {
    return [...this.objects.values()]
      .filter((o) => o.apiVersion === kind.apiVersion && o.kind === kind.kind)
      .filter((o) => namespace === undefined || o.metadata.namespace === namespace)
      .filter((o) => Object.entries(labels).every(([k, v]) => o.metadata.labels?.[k] === v))
      .map((o) => structuredClone(o) as T);
  }

  async delete(ref: ObjectRef, options: { uid?: string } = {}): Promise<"deleted" | "absent" | "replaced"> {
    const found = this.objects.get(keyOf(ref));
    if (!found) return "absent";
    if (options.uid && found.metadata.uid !== options.uid) return "replaced";
    this.objects.delete(keyOf(ref));
    return "deleted";
  }

  async patchAnnotations<T extends KubeObject = KubeObject>(ref: ObjectRef, annotations: Record<string, string | null>, resourceVersion: string): Promise<T> {
    const found = this.objects.get(keyOf(ref));
    if (!found) throw new KubeApiError(`${this.name}: annotate ${ref.kind} ${ref.name}`, 404, "NotFound");
    if (found.metadata.resourceVersion !== resourceVersion) throw new KubeApiError(`${this.name}: annotate ${ref.kind} ${ref.name}`, 409, "Conflict");
    const merged = { ...(found.metadata.annotations ?? {}) };
    for (const [key, value] of Object.entries(annotations)) {
      if (value === null) delete merged[key];
      else merged[key] = value;
    }
    found.metadata.annotations = merged;
    this.stamp(found);
    return structuredClone(found) as T;
  }

  /** A JSON merge patch (RFC 7386) guarded by resourceVersion, as the API server applies it. */
  async patchGuarded<T extends KubeObject = KubeObject>(ref: ObjectRef, patch: Record<string, unknown>, resourceVersion: string): Promise<T> {
    const found = this.objects.get(keyOf(ref));
    if (!found) throw new KubeApiError(`${this.name}: patch ${ref.kind} ${ref.name}`, 404, "NotFound");
    if (found.metadata.resourceVersion !== resourceVersion) throw new KubeApiError(`${this.name}: patch ${ref.kind} ${ref.name}`, 409, "Conflict");
    const merged = mergePatch(found, patch) as KubeObject;
    // As the API server: a patch that changes nothing writes nothing (the resourceVersion stays).
    if (JSON.stringify(merged) === JSON.stringify(found)) return structuredClone(found) as T;
    this.objects.set(keyOf(ref), this.stamp(merged));
    return structuredClone(merged) as T;
  }

  async patchStatus(ref: ObjectRef, status: Record<string, unknown>): Promise<void> {
    const found = this.objects.get(keyOf(ref));
    if (found) found.status = { ...((found.status as object) ?? {}), ...status };
  }

  async podLogs(namespace: string, name: string): Promise<string> {
    return this.logs.get(`${namespace}/${name}`) ?? "";
  }

  async serves(kind: { apiVersion: string; kind: string }): Promise<boolean> {
    return this.servedKinds.has(`${kind.apiVersion}/${kind.kind}`) || !kind.apiVersion.includes("openshift");
  }

  /** Test helper: set a field of a stored object (e.g. a pod's phase, as a kubelet would). */
  mutate(ref: ObjectRef, change: (object: KubeObject) => void): void {
    const found = this.objects.get(keyOf(ref));
    if (!found) throw new Error(`no ${keyOf(ref)}`);
    change(found);
  }

  totalCreations(kind?: string): number {
    return [...this.creations.entries()].filter(([k]) => !kind || k.split("|")[1] === kind).reduce((sum, [, n]) => sum + n, 0);
  }

  private stamp(object: KubeObject): KubeObject {
    object.metadata.resourceVersion = String(this.version++);
    object.metadata.uid ??= `uid-${this.version}`;
    return object;
  }
}
