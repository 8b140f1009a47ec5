/**
 * Reading the project's Kubernetes manifests (infra/deploy/k8s, the kind overlay) and applying them to a
 * real API server, for the manifests' integration tests (test/integration/manifests/).
 */
import { spawnSync } from "node:child_process";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { type KubeConfig, type KubernetesObject, KubernetesObjectApi, PatchStrategy } from "@kubernetes/client-node";
import { parseAllDocuments } from "yaml";

export const ROOT = join(import.meta.dirname, "..", "..");
export const K8S_DIR = join(ROOT, "infra", "deploy", "k8s");
export const KIND_OVERLAY = join(ROOT, "infra", "dev", "kind", "host");
const FIELD_MANAGER = "dvm-manifests-test";

// biome-ignore lint/suspicious/noExplicitAny: parsed YAML/JSON, walked freely by the test
export type Manifest = KubernetesObject & Record<string, any>;

export function yamlFiles(dir: string): string[] {
  return readdirSync(dir)
    .flatMap((entry) => {
      const path = join(dir, entry);
      if (statSync(path).isDirectory()) return yamlFiles(path);
      return /\.ya?ml$/.test(entry) && entry !== "kustomization.yaml" ? [path] : [];
    })
    .sort();
}

export function parseYaml(text: string, origin: string): Manifest[] {
  return parseAllDocuments(text).flatMap((doc) => {
    if (doc.errors.length > 0) throw new Error(`${origin}: ${doc.errors[0]!.message}`);
    const value = doc.toJS() as Manifest | null;
    return value ? [value] : [];
  });
}

export function manifests(file: string): Manifest[] {
  return parseYaml(readFileSync(file, "utf8"), relative(ROOT, file));
}

export const describeObject = (m: Manifest) => `${m.kind} ${m.metadata?.namespace ? `${m.metadata.namespace}/` : ""}${m.metadata?.name}`;
export const clone = <T>(value: T): T => structuredClone(value);

export function kubectl(): string | undefined {
  const found = spawnSync("kubectl", ["version", "--client"], { encoding: "utf8" });
  return found.status === 0 ? "kubectl" : undefined;
}

// API helpers

export function statusCode(error: unknown): number | undefined {
  const e = error as { code?: number; statusCode?: number; response?: { statusCode?: number } };
  return e.code ?? e.statusCode ?? e.response?.statusCode;
}

export async function ignoreExists<T>(promise: Promise<T>): Promise<T | undefined> {
  try {
    return await promise;
  } catch (error) {
    if (statusCode(error) === 409) return undefined;
    throw error;
  }
}

export async function ignoreMissing(promise: Promise<unknown>): Promise<void> {
  try {
    await promise;
  } catch (error) {
    if (statusCode(error) !== 404) throw error;
  }
}

/**
 * Server-side dry run of one object: create with dryRun=All, or, when it exists already (the namespace
 * made for real, or an existing cluster that has infra/deploy/k8s applied), a dry-run server-side apply.
 */
export async function dryRun(kc: KubeConfig, object: Manifest): Promise<KubernetesObject> {
  const api = KubernetesObjectApi.makeApiClient(kc);
  try {
    return await api.create(clone(object), undefined, "All", FIELD_MANAGER);
  } catch (error) {
    if (statusCode(error) !== 409) throw new Error(`dry run of ${describeObject(object)}: ${errorText(error)}`);
    return api.patch(clone(object), undefined, "All", FIELD_MANAGER, true, PatchStrategy.ServerSideApply);
  }
}

export function errorText(error: unknown): string {
  const e = error as { body?: unknown; message?: string };
  const body = typeof e.body === "string" ? e.body : JSON.stringify(e.body);
  return `${e.message ?? String(error)} ${body ?? ""}`.trim();
}
