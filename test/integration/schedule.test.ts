/**
 * Scheduled stages against the real parts: the trigger (src/events/trigger.ts) creating DVMs on the
 * "source" control plane through KubeMigrationStore, its records of handled events in DynamoDB Local. A
 * schedule's input delivered twice (at once, and again later) creates one DVM; the history limit deletes
 * the oldest completed runs and never a running one, checked on the API server itself.
 */

import { CoreV1Api, CustomObjectsApi } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoHandledEvents, HANDLED_EVENT_RETENTION_SECONDS } from "../../src/aws/ledger";
import { DVM_GROUP, DVM_PLURAL, DVM_VERSION } from "../../src/dvm/types";
import { KubeMigrationStore } from "../../src/events/migrationStore";
import { triggerNamespaceRule } from "../../src/events/namespaces";
import { SCHEDULE_LABEL } from "../../src/events/schedule";
import { parseSourceAllowList } from "../../src/events/sources";
import { createTrigger, type Trigger } from "../../src/events/trigger";
import { KubeDvmStore } from "../../src/kube/dvmStore";
import { testClusters } from "../support/clusters";
import { type FreshTable, freshLedgerTable } from "../support/dynamo";
import { readDvm } from "../support/migration";

const clusters = testClusters();
const run = Date.now().toString(36);
const NAMESPACE = `sched-${run}`;
const SPEC = { persistentVolumeClaims: [{ name: "db", namespace: NAMESPACE, targetStorageClass: "fast", targetAccessModes: ["ReadWriteOnce"] }] };
let table: FreshTable;

/** The trigger as the function builds it, its clock at `now()` so that old scheduled times stay acceptable. */
function trigger(now: () => number, historyLimit: number): Trigger {
  return createTrigger({
    store: async () => new KubeMigrationStore(clusters.source),
    handledEvents: new DynamoHandledEvents({ client: table.client, tableName: table.tableName, retentionSeconds: HANDLED_EVENT_RETENTION_SECONDS }),
    allowedSources: parseSourceAllowList("schedule:*"),
    namespaces: triggerNamespaceRule({ allowedNamespaces: ["sched-*"], adminNamespaces: ["dvm-system"], allowAdminNamespaces: false }),
    scheduleHistoryLimit: historyLimit,
    clock: { now },
  });
}

async function runsOf(schedule: string): Promise<string[]> {
  const list = (await clusters.source.makeApiClient(CustomObjectsApi).listNamespacedCustomObject({
    group: DVM_GROUP,
    version: DVM_VERSION,
    namespace: NAMESPACE,
    plural: DVM_PLURAL,
    labelSelector: `${SCHEDULE_LABEL}=${schedule}`,
  })) as { items: { metadata: { name: string } }[] };
  return list.items.map((item) => item.metadata.name).sort();
}

/** What the controller writes when a migration ends: status.phase Completed (nothing runs them here). */
async function complete(name: string): Promise<void> {
  const dvm = await readDvm(clusters.source, NAMESPACE, name);
  await new KubeDvmStore(clusters.source).writeStatus(dvm, { phase: "Completed", itinerary: "VolumeMigration" });
}

beforeAll(async () => {
  await clusters.source.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: NAMESPACE } } });
  table = await freshLedgerTable();
});

afterAll(async () => {
  await table?.drop();
});

describe("a schedule's input", () => {
  it("delivered twice at once and once more later creates one Stage DVM for its time", async () => {
    const at = "2026-12-03T02:00:00Z";
    const input = { schedule: "twice", scheduledTime: at, namespace: NAMESPACE, spec: SPEC };
    const t = trigger(() => Date.parse(at) + 60_000, 3);
    const replies = await Promise.all([t.handleSchedule(input), t.handleSchedule(input)]);
    const later = await t.handleSchedule({ ...input, scheduledTime: "2026-12-03T03:00:00+01:00" });
    expect(replies.map((r) => r.status).sort()).toEqual([200, 201]);
    expect(later).toMatchObject({ status: 200, body: { result: "exists", migration: { name: "twice-20261203-020000" } } });
    expect(await runsOf("twice")).toEqual(["twice-20261203-020000"]);
    const dvm = await readDvm(clusters.source, NAMESPACE, "twice-20261203-020000");
    expect((dvm.spec as { migrationType?: string }).migrationType).toBe("Stage");
  });

  it("keeps the newest completed runs up to the history limit, deleting the oldest completed and never a running one", async () => {
    const hours = ["01", "02", "03", "04", "05"];
    const fire = async (hour: string) => {
      const at = `2026-12-03T${hour}:00:00Z`;
      const reply = await trigger(() => Date.parse(at) + 60_000, 2).handleSchedule({
        schedule: "nightly",
        scheduledTime: at,
        namespace: NAMESPACE,
        spec: SPEC,
      });
      expect(reply.status).toBe(201);
    };
    const name = (hour: string) => `nightly-20261203-${hour}0000`;
    for (const hour of hours.slice(0, 4)) await fire(hour);
    // 01:00 still runs; 02:00, 03:00 and 04:00 have completed.
    for (const hour of ["02", "03", "04"]) await complete(name(hour));
    await fire("05");
    // Completed: 02, 03, 04: the newest two stay, 02 is deleted; 01 runs and stays; 05 is new.
    expect(await runsOf("nightly")).toEqual([name("01"), name("03"), name("04"), name("05")]);
  });
});
