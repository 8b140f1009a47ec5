/**
 * Where the pods that mount a source PVC run, on a source cluster with several (kwok) nodes: a volume in
 * use by a running app pod can only be mounted on that pod's node (ReadWriteOnce), so the rsync client is
 * pinned there; a volume nobody mounts is left to the scheduler, which follows its PV's node affinity.
 * Whole migrations, driven the way the relay drives them.
 */

import { CoreV1Api, type V1Node } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { KWOK_NODE_ANNOTATION } from "../../infra/dev/local/kwok";
import { LABEL } from "../../src/contracts/labels";
import { PHASE_BODIES } from "../../src/phases";
import { CLIENT_ROLE } from "../../src/phases/rsyncOperations";
import { testClusters } from "../support/clusters";
import { type FreshTable, freshLedgerTable } from "../support/dynamo";
import { createDvm, createMigrationFixture, driveToCompletion, type MigrationFixture, readDvm, requestFor, testPhaseRunner } from "../support/migration";
import { found } from "../support/poll";

const clusters = testClusters();
const run = Date.now().toString(36);
const core = clusters.source.makeApiClient(CoreV1Api);
const NODES = [`placement-1-${run}`, `placement-2-${run}`, `placement-3-${run}`];
const NODE_2 = NODES[1]!;
let fixture: MigrationFixture;
let table: FreshTable;

async function kwokNode(name: string): Promise<void> {
  const capacity = { cpu: "64", memory: "256Gi", pods: "110" };
  const node: V1Node = {
    metadata: { name, annotations: { [KWOK_NODE_ANNOTATION]: "fake" }, labels: { "kubernetes.io/hostname": name } },
    status: { allocatable: capacity, capacity },
  };
  await core.createNode({ body: node });
  await found(
    `kwok to mark node ${name} Ready`,
    async () => {
      const read = await core.readNode({ name });
      return read.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") ?? false;
    },
    { timeoutMs: 30_000, intervalMs: 100, retryErrors: true },
  );
}

beforeAll(async () => {
  fixture = await createMigrationFixture(clusters, `pl-${run}`);
  table = await freshLedgerTable();
  for (const name of NODES) await kwokNode(name);
});

afterAll(async () => {
  for (const name of NODES) await core.deleteNode({ name }).catch(() => undefined);
  await table?.drop();
});

/** Drives the fixture's migration; returns each client pod's spec.affinity by the PVC it mounts. */
async function migrateAndRecordClientAffinity(name: string): Promise<Record<string, unknown>> {
  const affinityByClaim: Record<string, unknown> = {};
  const runner = testPhaseRunner(clusters, table, {
    bodies: {
      ...PHASE_BODIES,
      // The client pods are gone after cleanup: look at them right after the phase that makes them.
      RunRsyncOperations: async (ctx) => {
        const outcome = await PHASE_BODIES.RunRsyncOperations(ctx);
        for (const namespace of [fixture.namespaces.shop, fixture.namespaces.ops]) {
          const pods = await core.listNamespacedPod({ namespace, labelSelector: `${LABEL.dvmUid}=${ctx.dvm.uid},${LABEL.role}=${CLIENT_ROLE}` });
          for (const pod of pods.items) {
            const claim = pod.spec?.volumes?.find((v) => v.name === "source")?.persistentVolumeClaim?.claimName ?? "";
            affinityByClaim[`${namespace}/${claim}`] = pod.spec?.affinity ?? null;
          }
        }
        return outcome;
      },
    },
  });
  const dvm = await createDvm(clusters.source, fixture.dvmNamespace, name, fixture.spec);
  await driveToCompletion(runner, requestFor(dvm));
  expect((await readDvm(clusters.source, fixture.dvmNamespace, name)).status?.phase).toBe("Completed");
  return affinityByClaim;
}

const onlyNode = (node: string) => ({
  nodeAffinity: {
    requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchFields: [{ key: "metadata.name", operator: "In", values: [node] }] }] },
  },
});

describe("the rsync client of a source volume", () => {
  it("runs on the node of the app pod that has the ReadWriteOnce volume mounted; a volume nobody mounts gets no pin", async () => {
    const { shop, ops } = fixture.namespaces;
    await core.createNamespacedPod({
      namespace: shop,
      body: {
        metadata: { name: "app" },
        spec: {
          nodeName: NODE_2,
          containers: [{ name: "app", image: "app:1", volumeMounts: [{ name: "data", mountPath: "/data" }] }],
          volumes: [{ name: "data", persistentVolumeClaim: { claimName: "db" } }],
        },
      },
    });
    await found("the app pod Running", async () => (await core.readNamespacedPod({ namespace: shop, name: "app" })).status?.phase === "Running", {
      timeoutMs: 30_000,
      intervalMs: 100,
      retryErrors: true,
    });

    const affinity = await migrateAndRecordClientAffinity(`in-use-${run}`);

    expect(affinity).toEqual({ [`${shop}/db`]: onlyNode(NODE_2), [`${shop}/media`]: null, [`${ops}/logs`]: null });
  });
});
