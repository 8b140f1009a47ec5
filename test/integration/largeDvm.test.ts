/**
 * A DVM at the largest size the controller supports (MAX_PVCS_PER_DVM PVCs, long names) migrates to
 * Completed on two real control planes (kwok runs the pods, DynamoDB Local holds the ledger) with no
 * phase repeated: no takeover, no retry, every non-waiting body entered once (src/report/executions.ts).
 * Its server pods are split by the operator's volume count, and every record stays inside its store.
 */

import { CoreV1Api } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoPhaseLedger } from "../../src/aws/ledger";
import { MAX_OUTCOME_BYTES } from "../../src/aws/ledger/codec";
import { createPhaseRunner } from "../../src/aws/phaseRunner";
import { findCondition } from "../../src/dvm/conditions";
import { ITINERARIES, PHASES } from "../../src/dvm/itinerary";
import { MAX_PVCS_PER_DVM } from "../../src/dvm/limits";
import { serverGroupNames } from "../../src/phases/names";
import { executionsOf } from "../../src/report/executions";
import { testClusters } from "../support/clusters";
import { type FreshTable, freshLedgerTable } from "../support/dynamo";
import {
  CreationCounter,
  countedBodies,
  createDvm,
  createMigrationFixture,
  driveToCompletion,
  leftovers,
  type MigrationFixture,
  readDvm,
  requestFor,
  TEST_MIGRATION_POLICY,
} from "../support/migration";

const clusters = testClusters();
const run = Date.now().toString(36);
const PER_SERVER_POD = 16;
let fixture: MigrationFixture;
let table: FreshTable;
let source: string;
let target: string;

/** Long names (200 characters) so the records are near their worst. */
const pvcName = (i: number) => `data-${String(i).padStart(3, "0")}-${"x".repeat(191)}`;

beforeAll(async () => {
  fixture = await createMigrationFixture(clusters, run);
  table = await freshLedgerTable();
  source = `big-${run}`;
  target = `big-${run}-dst`;
  const core = clusters.source.makeApiClient(CoreV1Api);
  await core.createNamespace({ body: { metadata: { name: source } } });
  for (let i = 0; i < MAX_PVCS_PER_DVM; i += 10)
    await Promise.all(
      Array.from({ length: 10 }, (_, j) =>
        core.createNamespacedPersistentVolumeClaim({
          namespace: source,
          body: { metadata: { name: pvcName(i + j) }, spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } } } },
        }),
      ),
    );
}, 120_000);

afterAll(async () => {
  await table?.drop();
});

describe(`a DVM of ${MAX_PVCS_PER_DVM} PVCs, the most the controller supports`, () => {
  it("completes with no phase repeated, its server pods split and every record inside its store", async () => {
    const spec = {
      destinationCluster: fixture.spec.destinationCluster,
      transfer: { maxConcurrentVolumes: 50 },
      persistentVolumeClaims: Array.from({ length: MAX_PVCS_PER_DVM }, (_, i) => ({
        name: pvcName(i),
        namespace: source,
        targetNamespace: target,
        targetStorageClass: fixture.storageClass,
        targetAccessModes: ["ReadWriteOnce"],
      })),
    };
    const dvm = await createDvm(clusters.source, fixture.dvmNamespace, "move-hundred", spec);
    const { uid } = dvm.metadata;
    const onDestination = await CreationCounter.start(clusters.destination, uid, ["/api/v1/pods", "/api/v1/services", "/api/v1/secrets"]);
    const onSource = await CreationCounter.start(clusters.source, uid, ["/api/v1/pods"]);
    const { bodies, entered } = countedBodies();
    const runner = createPhaseRunner({
      hostKubeConfig: clusters.source,
      ledgerTableName: table.tableName,
      dynamo: table.client,
      bodies,
      policy: { ...TEST_MIGRATION_POLICY, transfer: { ...TEST_MIGRATION_POLICY.transfer, maxVolumesPerServerPod: PER_SERVER_POD } },
    });

    const results = await driveToCompletion(runner, requestFor(dvm), { maxSteps: 2_000 });
    onDestination.stop();
    onSource.stop();

    const done = await readDvm(clusters.source, fixture.dvmNamespace, "move-hundred");
    expect(done.status.phase).toBe("Completed");
    expect(findCondition(done.status.conditions, "Succeeded")?.status).toBe("True");
    expect(done.status.rsyncOperations?.filter((op) => op.succeeded)).toHaveLength(MAX_PVCS_PER_DVM);

    // No repeat: each ledger entry ran once (no takeover, no re-run after a failure), no invocation retried.
    const history = await new DynamoPhaseLedger({ client: table.client, tableName: table.tableName }).history(uid);
    const steps = ITINERARIES.VolumeMigration.filter((p) => p !== "Completed");
    expect(history.map((e) => e.key.phase)).toEqual(steps);
    const repeats = history.map((e) => [e.key.phase, executionsOf(e, PHASES[e.key.phase].waits, Date.now()).repeated] as const).filter(([, n]) => n > 0);
    expect(repeats).toEqual([]);
    expect(history.every((e) => e.state === "COMPLETED" && e.takeovers === 0 && e.failures === 0)).toBe(true);
    for (const phase of steps) if (!PHASES[phase].waits) expect(entered.get(phase), phase).toBe(1);
    expect(results.filter((r) => r.kind === "retry" || r.kind === "duplicate")).toEqual([]);

    // ceil(100 / 16) = 7 server pods, each with its Service, each created once; one client pod per PVC.
    const groups = Math.ceil(MAX_PVCS_PER_DVM / PER_SERVER_POD);
    expect(onDestination.repeated()).toEqual([]);
    expect(onDestination.count(`/api/v1/pods:${target}/`)).toBe(groups);
    expect(onDestination.count(`/api/v1/services:${target}/`)).toBe(groups);
    expect(onDestination.count(`/api/v1/pods:${target}/${serverGroupNames({ uid }, groups - 1).serverPod}`)).toBe(1);
    expect(onSource.repeated()).toEqual([]);
    expect(onSource.count(`/api/v1/pods:${source}/`)).toBe(MAX_PVCS_PER_DVM);
    expect(await leftovers(clusters.destination, uid, [target])).toEqual([]);

    // Every record inside its store, with room: the DVM in etcd, each ledger item's outcome in DynamoDB.
    const dvmBytes = Buffer.byteLength(JSON.stringify({ spec: done.spec, status: done.status }));
    const outcomeBytes = Math.max(...history.map((e) => Buffer.byteLength(JSON.stringify(e.outcome ?? {}))));
    console.info(`DVM of ${MAX_PVCS_PER_DVM} PVCs: ${dvmBytes} bytes in etcd; largest ledger outcome ${outcomeBytes} bytes`);
    expect(dvmBytes).toBeLessThan(0.5 * 1.5 * 1024 * 1024);
    expect(outcomeBytes).toBeLessThan(0.5 * MAX_OUTCOME_BYTES);
  }, 600_000);
});
