/**
 * Objects a tenant plants with a DVM's labels (src/phases/cleanup.ts): a foreign finalizer cannot make
 * the cleanup wait for ever, an object under a name the DVM never gives is neither deleted nor waited
 * for, and a delete removes only the object that was listed.
 */
import { describe, expect, it } from "vitest";
import { KINDS, type KubeObject, refOf } from "../../../src/kube/objects";
import { deleteTransferResources, FOREIGN_FINALIZER_GRACE_MS, waitForTransferResourcesGone } from "../../../src/phases/cleanup";
import { clientPodName, dvmShortId, transferLabels } from "../../../src/phases/names";
import { fakeContext, TWO_NAMESPACE_SPEC } from "../../support/phaseContext";

const NOW = Date.parse("2026-12-03T08:00:00Z");

function setup() {
  const made = fakeContext(TWO_NAMESPACE_SPEC, { now: NOW });
  const pod = (name: string, extra: Partial<KubeObject["metadata"]> = {}): KubeObject => ({
    ...KINDS.Pod,
    metadata: { name, namespace: "shop", labels: transferLabels(made.ctx.dvm, "client"), uid: `uid-${name}`, ...extra },
  });
  return { ...made, pod };
}

describe("objects planted with a DVM's labels", () => {
  it("a foreign finalizer holds the wait only for a bounded time, then a warning names the object", async () => {
    const { ctx, source, pod } = setup();
    const name = clientPodName(ctx.dvm, ctx.volumes[0]!, 1);
    const deletedAt = (ago: number) => new Date(NOW - ago).toISOString();
    source.add(pod(name, { finalizers: ["tenant.example.com/never"], deletionTimestamp: deletedAt(60_000) }));
    expect(await waitForTransferResourcesGone(ctx)).toMatchObject({ kind: "wait" });

    source.mutate(refOf("Pod", "shop", name), (o) => {
      o.metadata.deletionTimestamp = deletedAt(FOREIGN_FINALIZER_GRACE_MS + 1_000);
    });
    const outcome = await waitForTransferResourcesGone(ctx);
    expect(outcome).toMatchObject({ kind: "advance", warnings: [{ category: "Warn", reason: "ResourcesLeftBehind" }] });
    expect(outcome.warnings?.[0]?.message).toContain(`Pod shop/${name} (finalizers tenant.example.com/never)`);
  });

  it("one under a name the DVM never gives is neither deleted nor waited for", async () => {
    const { ctx, source, pod } = setup();
    source.add(pod("innocent-app", { finalizers: ["tenant.example.com/never"], deletionTimestamp: new Date(NOW).toISOString() }));
    source.add(pod("unrelated-app"));
    await deleteTransferResources({ progressRecords: true })(ctx);
    expect(await waitForTransferResourcesGone(ctx)).toEqual({ kind: "advance" });
    expect(await source.get(refOf("Pod", "shop", "unrelated-app"))).toBeDefined();
  });

  it("a delete removes the object that was listed, not one that replaced it under its name", async () => {
    const { ctx, source, pod } = setup();
    const name = `dvm-${dvmShortId(ctx.dvm)}-rsync-client`;
    source.add(pod(name));
    const list = source.list.bind(source);
    source.list = (async (...args: Parameters<typeof list>) => {
      const listed = await list(...args);
      // Between the list and the delete, the object is deleted and another takes its name.
      if (listed.some((o) => o.metadata.name === name)) {
        await source.delete(refOf("Pod", "shop", name));
        source.add(pod(name, { uid: "the-replacement" }));
      }
      return listed;
    }) as typeof source.list;
    await deleteTransferResources({ progressRecords: true })(ctx);
    expect((await source.get(refOf("Pod", "shop", name)))?.metadata.uid).toBe("the-replacement");
  });
});
