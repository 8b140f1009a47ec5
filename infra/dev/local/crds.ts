/**
 * Installs the CustomResourceDefinitions in a folder (infra/deploy/crds) into a cluster and waits until the
 * API server serves them. Create-or-replace, so it can run again against a cluster that has older
 * copies (npm start against an existing cluster does exactly that).
 *
 * The CRDs are sent as raw JSON through the custom-objects client on purpose: client-node's typed
 * ApiextensionsV1Api serializes by its model's property names (`_default`, `_enum`,
 * `x_kubernetes_preserve_unknown_fields`, ...) and silently drops the real JSON keys (`default`, `enum`,
 * `x-kubernetes-preserve-unknown-fields`) of an object read from YAML.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { ApiextensionsV1Api, CustomObjectsApi, type KubeConfig, type V1CustomResourceDefinition } from "@kubernetes/client-node";
import { parseAllDocuments } from "yaml";
import { waitFor } from "./wait";

export function readCrds(dir: string): V1CustomResourceDefinition[] {
  const crds: V1CustomResourceDefinition[] = [];
  for (const file of readdirSync(dir)
    .filter((f) => /\.ya?ml$/.test(f))
    .sort()) {
    for (const doc of parseAllDocuments(readFileSync(join(dir, file), "utf8"))) {
      if (doc.errors.length > 0) throw new Error(`${file}: ${doc.errors[0]?.message}`);
      const obj = doc.toJS() as V1CustomResourceDefinition | null;
      if (obj?.kind === "CustomResourceDefinition") crds.push(obj);
    }
  }
  return crds;
}

const CRD_RESOURCE = { group: "apiextensions.k8s.io", version: "v1", plural: "customresourcedefinitions" };

export async function installCrds(kc: KubeConfig, dir: string, timeoutMs = 30_000): Promise<string[]> {
  const api = kc.makeApiClient(ApiextensionsV1Api);
  const raw = kc.makeApiClient(CustomObjectsApi);
  const crds = readCrds(dir);
  for (const crd of crds) {
    const name = crd.metadata?.name;
    if (!name) throw new Error(`a CRD in ${dir} has no metadata.name`);
    try {
      await raw.createClusterCustomObject({ ...CRD_RESOURCE, body: crd });
    } catch (err) {
      if (statusCode(err) !== 409) throw err;
      const existing = (await raw.getClusterCustomObject({ ...CRD_RESOURCE, name })) as V1CustomResourceDefinition;
      await raw.replaceClusterCustomObject({
        ...CRD_RESOURCE,
        name,
        body: { ...crd, metadata: { ...crd.metadata, resourceVersion: existing.metadata?.resourceVersion } },
      });
    }
  }
  const names = crds.map((c) => c.metadata!.name!);
  for (const name of names) {
    await waitFor(
      `CRD ${name} to be Established`,
      async () => {
        const crd = await api.readCustomResourceDefinition({ name });
        return crd.status?.conditions?.some((c) => c.type === "Established" && c.status === "True") ?? false;
      },
      timeoutMs,
    );
  }
  return names;
}

/** HTTP status of a client-node ApiException (or undefined for other errors). */
export function statusCode(err: unknown): number | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === "number" ? code : undefined;
}
