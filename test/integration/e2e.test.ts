/**
 * The real stack end to end: the relay watching the source cluster, the phase function behind
 * serverless-offline's Lambda Invoke API, the DynamoDB ledger, two control planes with kwok. The test
 * only creates a DVM through the API server and waits: nothing here drives a phase.
 */

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LocalController } from "../../infra/dev/local/controller";
import { DynamoPhaseLedger } from "../../src/aws/ledger";
import { findCondition } from "../../src/dvm/conditions";
import { ITINERARIES } from "../../src/dvm/itinerary";
import { silentLogger } from "../../src/lib/log";
import { testClusters } from "../support/clusters";
import { startTestController } from "../support/controller";
import { testDynamoClient } from "../support/dynamo";
import { createDvm, createMigrationFixture, type MigrationFixture, readDvm } from "../support/migration";
import { until } from "../support/poll";

const clusters = testClusters();
const run = `e2e${Date.now().toString(36)}`;
let fixture: MigrationFixture;
let controller: LocalController;

/** How long a wait of this file may take, polled every 500 ms. */
const WAIT = { timeoutMs: 150_000 };

beforeAll(async () => {
  fixture = await createMigrationFixture(clusters, run);
  controller = await startTestController(clusters, fixture, "e2e", silentLogger);
});

afterAll(async () => {
  await controller?.stop();
});

describe("the controller on the real stack", () => {
  it("migrates a DVM created through the API server to Completed, each phase completed once in the ledger", async () => {
    const created = await createDvm(clusters.source, fixture.dvmNamespace, "e2e-move", fixture.spec);
    const done = await until(
      "the DVM to complete",
      () => readDvm(clusters.source, fixture.dvmNamespace, "e2e-move"),
      (dvm) => dvm.status.phase === "Completed",
      WAIT,
    );
    expect(done.status.itinerary).toBe("VolumeMigration");
    expect(findCondition(done.status.conditions, "Succeeded")?.status).toBe("True");
    expect(done.status.rsyncOperations?.every((op) => op.succeeded)).toBe(true);
    // The controller passes its region and credentials to its own clients (it sets no AWS_* variables): so does the test.
    const ledger = new DynamoPhaseLedger({ client: testDynamoClient(), tableName: controller.ledgerTableName });
    const history = await ledger.history(created.metadata.uid);
    expect(history.map((e) => e.key.phase)).toEqual(ITINERARIES.VolumeMigration.filter((p) => p !== "Completed"));
    expect(history.every((e) => e.state === "COMPLETED" && e.takeovers === 0)).toBe(true);
    const health = (await (await fetch(controller.healthUrl)).json()) as { status: string; stats: { errors: number; forwarded: number } };
    expect(health.status).toBe("ready");
    expect(health.stats.forwarded).toBeGreaterThanOrEqual(history.length);
    // The same relay's /metrics (src/relay/metrics.ts): its forwards by result add up to the stats, and the
    // completed DVM's series are gone once the relay has seen the Completed event.
    const exposition = await until(
      "the completed DVM to leave /metrics",
      async () => (await fetch(controller.healthUrl.replace(/\/readyz$/, "/metrics"))).text(),
      (text) => !text.includes(created.metadata.uid),
      WAIT,
    );
    const forwards = [...exposition.matchAll(/^dvm_relay_forwards_total\{result="([a-z]+)"\} (\d+)$/gm)].map((m) => ({ result: m[1], count: Number(m[2]) }));
    expect(forwards.find((f) => f.result === "advanced")?.count).toBeGreaterThan(0);
    expect(forwards.reduce((sum, f) => sum + f.count, 0)).toBeGreaterThanOrEqual(history.length);
    expect(exposition).toMatch(/^dvm_relay_invoke_duration_seconds_count\{outcome="ok"\} [1-9]/m);
  });
});
