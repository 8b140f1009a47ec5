import { describe, expect, it } from "vitest";
import type { PodObject } from "../../../src/kube/objects";
import { nodeHoldingClaim, pinnedToNode, sourcePodAffinity } from "../../../src/phases/sourcePlacement";
import { fakeContext, pvc, TWO_NAMESPACE_SPEC } from "../../support/phaseContext";

const pod = (name: string, claim: string, nodeName: string | undefined, phase = "Running"): PodObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: "shop" },
  spec: { ...(nodeName ? { nodeName } : {}), volumes: [{ name: "data", persistentVolumeClaim: { claimName: claim } }] },
  status: { phase },
});

describe("nodeHoldingClaim", () => {
  it("is the node of a scheduled, unfinished pod that mounts the claim", () => {
    expect(nodeHoldingClaim([pod("other", "logs", "node-1"), pod("app", "db", "node-2")], "db")).toBe("node-2");
    expect(nodeHoldingClaim([pod("starting", "db", "node-3", "Pending")], "db")).toBe("node-3");
  });

  it("ignores unscheduled and finished pods; ties go to the first name", () => {
    expect(nodeHoldingClaim([pod("a", "db", undefined, "Pending"), pod("b", "db", "node-1", "Succeeded"), pod("c", "db", "node-1", "Failed")], "db")).toBe(
      undefined,
    );
    expect(nodeHoldingClaim([pod("b", "db", "node-2"), pod("a", "db", "node-1")], "db")).toBe("node-1");
  });
});

describe("sourcePodAffinity", () => {
  const spec = { persistentVolumeClaims: [TWO_NAMESPACE_SPEC.persistentVolumeClaims[0]] };

  it("pins a ReadWriteOnce volume in use to the app's node", async () => {
    const { ctx, source } = fakeContext(spec);
    source.add(pvc("shop", "db"));
    source.add(pod("app", "db", "node-2"));
    expect(await sourcePodAffinity(ctx, { namespace: "shop", name: "db" })).toEqual(pinnedToNode("node-2"));
    expect(pinnedToNode("node-2")).toEqual({
      nodeAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution: {
          nodeSelectorTerms: [{ matchFields: [{ key: "metadata.name", operator: "In", values: ["node-2"] }] }],
        },
      },
    });
  });

  it("leaves a volume nobody mounts, and one several nodes may mount, to the scheduler", async () => {
    const idle = fakeContext(spec);
    idle.source.add(pvc("shop", "db"));
    expect(await sourcePodAffinity(idle.ctx, { namespace: "shop", name: "db" })).toBeUndefined();

    const shared = fakeContext(spec);
    shared.source.add(pvc("shop", "db", { status: { phase: "Bound", accessModes: ["ReadWriteMany"] } }));
    shared.source.add(pod("app", "db", "node-2"));
    expect(await sourcePodAffinity(shared.ctx, { namespace: "shop", name: "db" })).toBeUndefined();
  });
});
