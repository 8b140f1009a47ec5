/**
 * The relay lists DVMs as a Table of the CRD's relay columns (src/relay/resources.ts), against the real
 * API server and the CRD as shipped: what it reads of each DVM is what it would read of the whole object,
 * and DVMs padded by their creator cost it a few hundred bytes each, not their size.
 */
import { randomUUID } from "node:crypto";
import { CoreV1Api, CustomObjectsApi, type KubeConfig, PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DVM_API_VERSION, DVM_GROUP, DVM_KIND, DVM_PLURAL, DVM_VERSION } from "../../src/dvm/types";
import { KubeRest } from "../../src/kube/rest";
import { parseObservedDvm } from "../../src/relay/observed";
import { DVM_PAGE_SIZE, dvmLister, dvmPath } from "../../src/relay/resources";
import { testClusters } from "../support/clusters";

const PAD = "x".repeat(200 * 1024);
const DVMS = 6;
let kubeConfig: KubeConfig;
const namespace = `relay-list-${randomUUID().slice(0, 8)}`;

beforeAll(async () => {
  kubeConfig = testClusters().source;
  await kubeConfig.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: namespace } } });
  const api = kubeConfig.makeApiClient(CustomObjectsApi);
  for (let i = 0; i < DVMS; i++) {
    const created = (await api.createNamespacedCustomObject({
      group: DVM_GROUP,
      version: DVM_VERSION,
      namespace,
      plural: DVM_PLURAL,
      body: {
        apiVersion: DVM_API_VERSION,
        kind: DVM_KIND,
        metadata: { name: `padded-${i}`, annotations: { pad: PAD }, ...(i % 3 === 0 ? { finalizers: ["example.com/hold"] } : {}) },
        spec: { persistentVolumeClaims: [{ name: "data", namespace: "app", targetStorageClass: "standard", targetAccessModes: ["ReadWriteOnce"] }] },
      },
    })) as { metadata: { name: string } };
    if (i % 2 === 0)
      await api.patchNamespacedCustomObjectStatus(
        {
          group: DVM_GROUP,
          version: DVM_VERSION,
          namespace,
          plural: DVM_PLURAL,
          name: created.metadata.name,
          body: { status: { phase: "CreateDestinationPVCs" } },
        },
        setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
      );
    // One being deleted, held by its finalizer: the relay must see its deletionTimestamp.
    if (i === 0) await api.deleteNamespacedCustomObject({ group: DVM_GROUP, version: DVM_VERSION, namespace, plural: DVM_PLURAL, name: created.metadata.name });
  }
});

afterAll(async () => {
  const api = kubeConfig.makeApiClient(CustomObjectsApi);
  for (let i = 0; i < DVMS; i += 3)
    await api
      .patchNamespacedCustomObject(
        { group: DVM_GROUP, version: DVM_VERSION, namespace, plural: DVM_PLURAL, name: `padded-${i}`, body: { metadata: { finalizers: null } } },
        setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
      )
      .catch(() => undefined);
  await kubeConfig.makeApiClient(CoreV1Api).deleteNamespace({ name: namespace });
});

describe("the relay's DVM list against the API server", () => {
  it("reads of each DVM what it reads of the whole object", async () => {
    const full = (await kubeConfig
      .makeApiClient(CustomObjectsApi)
      .listNamespacedCustomObject({ group: DVM_GROUP, version: DVM_VERSION, namespace, plural: DVM_PLURAL })) as {
      items: unknown[];
    };
    const listed = await dvmLister(kubeConfig, namespace)();
    expect(listed.items).toHaveLength(DVMS);
    const byName = (items: unknown[]) =>
      new Map(
        items.map((item) => {
          const parsed = parseObservedDvm(item);
          return [parsed.ok ? parsed.dvm.name : "(unparsed)", parsed];
        }),
      );
    const seen = byName(listed.items);
    expect(seen).toEqual(byName(full.items));
    expect(seen.get("padded-0")).toMatchObject({ ok: true, dvm: { deleting: true } });
    expect(seen.get("padded-2")).toMatchObject({ ok: true, dvm: { phase: "CreateDestinationPVCs", generation: 1 } });
  });

  it("is sent a few hundred bytes per DVM, whatever the DVM holds", async () => {
    const text = await new KubeRest(kubeConfig).request<unknown>(
      {
        method: "GET",
        path: dvmPath(namespace),
        accept: "application/json;as=Table;v=v1;g=meta.k8s.io",
        query: { includeObject: "None", limit: DVM_PAGE_SIZE },
      },
      "list",
    );
    expect(JSON.stringify(text).length).toBeLessThan(DVMS * 1024);
  });
});
