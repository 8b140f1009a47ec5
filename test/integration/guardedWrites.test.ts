/**
 * The guarded writes of the Cluster interface on a real API server: the in-use mark's annotation patch
 * (resourceVersion guard, src/phases/pvcUse.ts), the quiesce patch of spec and annotations (the same
 * guard, src/phases/quiesce.ts) and the cleanup's delete with a uid precondition (src/phases/cleanup.ts).
 */
import { CoreV1Api } from "@kubernetes/client-node";
import { beforeAll, describe, expect, it } from "vitest";
import { KubeApiError } from "../../src/kube/errors";
import { KubeCluster } from "../../src/kube/kubeCluster";
import { type KubeObject, refOf } from "../../src/kube/objects";
import { testClusters } from "../support/clusters";

const clusters = testClusters();
const NAMESPACE = `guarded-${Date.now().toString(36)}`;
const cluster = new KubeCluster("source", clusters.source);
const configMap = (name: string): KubeObject => ({ apiVersion: "v1", kind: "ConfigMap", metadata: { name, namespace: NAMESPACE }, data: { a: "1" } });

beforeAll(async () => {
  await clusters.source.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: NAMESPACE } } });
});

describe("guarded writes on the API server", () => {
  it("patches annotations only at the resourceVersion read, and removes one with null", async () => {
    const { object } = await cluster.ensure(configMap("marked"));
    const ref = refOf("ConfigMap", NAMESPACE, "marked");
    const marked = await cluster.patchAnnotations(ref, { "example.com/mark": "mine" }, object.metadata.resourceVersion!);
    expect(marked.metadata.annotations).toEqual({ "example.com/mark": "mine" });
    const stale = await cluster.patchAnnotations(ref, { "example.com/mark": "theirs" }, object.metadata.resourceVersion!).catch((e: unknown) => e);
    expect(stale).toBeInstanceOf(KubeApiError);
    expect((stale as KubeApiError).isConflict).toBe(true);
    const cleared = await cluster.patchAnnotations(ref, { "example.com/mark": null }, marked.metadata.resourceVersion!);
    expect(cleared.metadata.annotations ?? {}).toEqual({});
  });

  it("patches spec and annotations in one write at the resourceVersion read; an empty patch confirms a read without writing", async () => {
    const { object } = await cluster.ensure(configMap("quiesced"));
    const ref = refOf("ConfigMap", NAMESPACE, "quiesced");
    const written = await cluster.patchGuarded(
      ref,
      { metadata: { annotations: { "example.com/was": "1" } }, data: { a: "0" } },
      object.metadata.resourceVersion!,
    );
    expect([written.metadata.annotations, written.data]).toEqual([{ "example.com/was": "1" }, { a: "0" }]);
    // The read it was decided on is stale: refused, for a change and for the empty confirmation alike.
    for (const patch of [{ data: { a: "2" } }, {}]) {
      const stale = await cluster.patchGuarded(ref, patch, object.metadata.resourceVersion!).catch((e: unknown) => e);
      expect((stale as KubeApiError).isConflict).toBe(true);
    }
    // At the current version the empty patch passes and writes nothing (quiesce.ts's "nothing to do").
    const confirmed = await cluster.patchGuarded(ref, {}, written.metadata.resourceVersion!);
    expect(confirmed.metadata.resourceVersion).toBe(written.metadata.resourceVersion);
  });

  it("deletes with a uid precondition only the object of that uid", async () => {
    const { object } = await cluster.ensure(configMap("replaced"));
    const ref = refOf("ConfigMap", NAMESPACE, "replaced");
    expect(await cluster.delete(ref, { uid: "00000000-0000-4000-8000-000000000000" })).toBe("replaced");
    expect(await cluster.get(ref)).toBeDefined();
    expect(await cluster.delete(ref, { uid: object.metadata.uid! })).toBe("deleted");
    expect(await cluster.delete(ref, { uid: object.metadata.uid! })).toBe("absent");
  });
});
