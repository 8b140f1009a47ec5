/**
 * Outgoing CloudEvents of real migrations: the runner on the two control planes and DynamoDB Local,
 * wired as the phase function wires it (createPhaseRunnerWithEvents, settings from the environment),
 * sending to an HTTP sink that is a node:http server in this test.
 *
 *   - sink up: one phase.completed per phase with the ledger's timings, one migration.succeeded at the
 *     end, and no credential of the migration (rsync password, TLS keys, the destination kubeconfig)
 *     in any request the sink received;
 *   - sink down (connection refused) and sink hanging: the migration completes as usual, failures and
 *     drops are counted, and no invocation waits on events longer than the flush deadline (plus a
 *     generous margin for a busy machine: a bound, not a benchmark).
 */

import { readFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { createServer as createTcpServer, type Socket, type Server as TcpServer } from "node:net";
import { CoreV1Api } from "@kubernetes/client-node";
import { HTTP } from "cloudevents";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { findFreePort } from "../../infra/dev/local/ports";
import { type PhaseEvents, type PublishingMetrics, phaseEventsFromEnv } from "../../src/aws/eventPublisherFromEnv";
import { DynamoPhaseLedger } from "../../src/aws/ledger";
import { createPhaseRunnerWithEvents } from "../../src/aws/runnerFromEnv";
import { type ExecutablePhaseName, ITINERARIES } from "../../src/dvm/itinerary";
import type { FlushResult } from "../../src/events/publisher";
import type { FlushingRunner } from "../../src/events/runnerEvents";
import { MIGRATION_SUCCEEDED, MigrationFinishedDataSchema, PHASE_COMPLETED, PhaseCompletedDataSchema } from "../../src/events/schema";
import { silentLogger } from "../../src/lib/log";
import { PHASE_BODIES } from "../../src/phases";
import { transferNames } from "../../src/phases/names";
import type { PhaseBody } from "../../src/phases/types";
import type { PhaseRunner } from "../../src/runner/runner";
import { testClusters } from "../support/clusters";
import { dynamoEndpoint, type FreshTable, freshLedgerTable } from "../support/dynamo";
import { createDvm, createMigrationFixture, driveToCompletion, type MigrationFixture, requestFor, TEST_MIGRATION_POLICY } from "../support/migration";
import { missing } from "../support/requirements";

const available = inject("clusters") && dynamoEndpoint();
const run = `ev${Date.now().toString(36)}`;
const STEPS = ITINERARIES.VolumeMigration.filter((p) => p !== "Completed");

interface Received {
  headers: Record<string, string>;
  body: string;
}

/** An HTTP sink: records every request and answers 202. */
async function startSink(): Promise<{ url: string; received: Received[]; server: Server }> {
  const received: Received[] = [];
  const server = createServer((req: IncomingMessage, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      received.push({ headers: req.headers as Record<string, string>, body: Buffer.concat(chunks).toString("utf8") });
      res.writeHead(202).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/events/t0ken`, received, server };
}

/** A sink that accepts connections and never answers. */
async function startBlackhole(): Promise<{ url: string; server: TcpServer; sockets: Set<Socket> }> {
  const sockets = new Set<Socket>();
  const server = createTcpServer((socket) => {
    sockets.add(socket);
    socket.on("error", () => undefined);
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`, server, sockets };
}

class MetricsRecorder implements PublishingMetrics {
  readonly totals: Record<string, number> = {};
  addDimension() {}
  addMetric(name: string, _unit: string, value: number) {
    this.totals[name] = (this.totals[name] ?? 0) + value;
  }
  publishStoredMetrics() {}
}

describe.skipIf(missing("the clusters and DynamoDB test services", available, "run without DVM_TEST_SERVICES"))("outgoing events of a migration", () => {
  const clusters = available ? testClusters() : undefined;
  let fixture: MigrationFixture;
  let table: FreshTable;
  const servers: { close(): unknown }[] = [];

  beforeAll(async () => {
    fixture = await createMigrationFixture(clusters!, run);
    table = await freshLedgerTable();
  });

  afterAll(async () => {
    for (const server of servers) server.close();
    await table?.drop();
  });

  function runnerFor(env: NodeJS.ProcessEnv, bodies: Record<ExecutablePhaseName, PhaseBody> = PHASE_BODIES) {
    const metrics = new MetricsRecorder();
    const events = phaseEventsFromEnv({ DVM_EVENTS_SOURCE: `dvm-serverless/${run}`, ...env }, silentLogger, { metrics }) as PhaseEvents;
    expect(events).toBeDefined();
    // Every flush, as the phase function does it at the end of each invocation, timed.
    const flushes: { ms: number; result: FlushResult }[] = [];
    const flush = events.publisher.flush.bind(events.publisher);
    events.publisher.flush = async (deadlineMs) => {
      const started = performance.now();
      const result = await flush(deadlineMs);
      flushes.push({ ms: performance.now() - started, result });
      return result;
    };
    const runner = createPhaseRunnerWithEvents(
      { hostKubeConfig: clusters!.source, ledgerTableName: table.tableName, dynamo: table.client, bodies, leaseMs: 30_000, policy: TEST_MIGRATION_POLICY },
      events,
    );
    return { runner, events, metrics, flushes };
  }

  /** driveToCompletion needs run() only, which the flushing runner has. */
  const drive = (runner: FlushingRunner, request: Parameters<FlushingRunner["run"]>[0]) => driveToCompletion(runner as unknown as PhaseRunner, request);

  it("sends phase.completed for each phase with the ledger's timings, then migration.succeeded, and no secret", async () => {
    const sink = await startSink();
    servers.push(sink.server);
    // The credentials this migration makes, read while they exist (they are deleted at the end).
    const secrets = new Set<string>();
    const core = clusters!.source.makeApiClient(CoreV1Api);
    const bodies = { ...PHASE_BODIES };
    bodies.CreatePVProgressCRs = async (ctx) => {
      const names = transferNames(ctx.dvm);
      for (const name of [names.credentialsSecret, names.pkiSecret]) {
        const secret = await core.readNamespacedSecret({ namespace: fixture.dvmNamespace, name });
        for (const value of Object.values(secret.data ?? {})) {
          secrets.add(value);
          // Decoded too, and each line of a PEM block on its own.
          for (const line of Buffer.from(value, "base64").toString("utf8").split("\n")) if (line.length >= 16 && !line.startsWith("-----")) secrets.add(line);
        }
      }
      return PHASE_BODIES.CreatePVProgressCRs(ctx);
    };
    for (const line of readFileSync(clusters!.info.destination.kubeconfigPath, "utf8").split("\n")) {
      const value = /(client-key-data|client-certificate-data|token|password):\s*(\S{16,})/.exec(line)?.[2];
      if (value) secrets.add(value);
    }

    const { runner, metrics, flushes } = runnerFor({ DVM_EVENTS_SINK: "http", DVM_EVENTS_HTTP_URL: sink.url, DVM_EVENTS_HTTP_MODE: "structured" }, bodies);
    const dvm = await createDvm(clusters!.source, fixture.dvmNamespace, "events-up", fixture.spec);
    await drive(runner, requestFor(dvm));
    const { uid } = dvm.metadata;

    const events = sink.received.map(
      (r) => HTTP.toEvent({ headers: r.headers, body: r.body }) as ReturnType<typeof HTTP.toEvent> & { type: string; data: Record<string, unknown> },
    );
    for (const r of sink.received) expect(r.headers["content-type"]).toMatch(/^application\/cloudevents\+json/);
    const completed = events.filter((e) => e.type === PHASE_COMPLETED);
    expect(completed.map((e) => e.data.phase)).toEqual(STEPS);
    expect(events.at(-1)!.type).toBe(MIGRATION_SUCCEEDED);
    expect(events.filter((e) => e.type === MIGRATION_SUCCEEDED)).toHaveLength(1);
    expect(events).toHaveLength(STEPS.length + 1);

    // The timings are the ledger's, entry for entry.
    const history = await new DynamoPhaseLedger({ client: table.client, tableName: table.tableName }).history(uid);
    for (const event of completed) {
      expect(event).toMatchObject({ source: `dvm-serverless/${run}`, subject: `${fixture.dvmNamespace}/events-up` });
      const data = PhaseCompletedDataSchema.parse(event.data);
      const entry = history.find((e) => e.key.phase === data.phase)!;
      expect(data).toMatchObject({ uid, namespace: fixture.dvmNamespace, name: "events-up", result: "advanced", attempts: entry.attempts });
      expect(Date.parse(data.startedAt)).toBe(entry.startedAt);
      expect(Date.parse(data.finishedAt)).toBe(entry.finishedAt);
      expect(data.elapsedSeconds).toBe(entry.elapsedSeconds);
    }
    const finished = MigrationFinishedDataSchema.parse(events.at(-1)!.data);
    expect(finished).toMatchObject({ uid, phases: STEPS.length, errors: [] });
    expect(Date.parse(finished.startedAt)).toBe(Math.min(...history.map((e) => e.startedAt)));
    expect(Date.parse(finished.finishedAt)).toBe(Math.max(...history.map((e) => e.finishedAt ?? 0)));
    expect(finished.elapsedSeconds).toBeGreaterThan(0);

    // Nothing the migration used as a credential went out.
    expect(secrets.size).toBeGreaterThanOrEqual(3);
    const wire = sink.received.map((r) => `${JSON.stringify(r.headers)}\n${r.body}`).join("\n");
    for (const secret of secrets) expect(wire.includes(secret), `a credential (${secret.length} characters) was sent`).toBe(false);
    expect(wire).not.toMatch(/PRIVATE KEY|client-key-data|kubeconfig/i);

    expect(metrics.totals).toMatchObject({ EventsSent: STEPS.length + 1, EventsFailed: 0, EventsDropped: 0 });
    expect(flushes.every((f) => !f.result.timedOut)).toBe(true);
  });

  it("completes the migration when the sink is down, counting the failures", async () => {
    const port = await findFreePort();
    const { runner, metrics, flushes, events } = runnerFor({
      DVM_EVENTS_SINK: "http",
      DVM_EVENTS_HTTP_URL: `http://127.0.0.1:${port}/`,
      DVM_EVENTS_FLUSH_MS: "1500",
    });
    const dvm = await createDvm(clusters!.source, fixture.dvmNamespace, "events-down", {
      ...fixture.spec,
      persistentVolumeClaims: (fixture.spec.persistentVolumeClaims as object[]).slice(0, 1),
    });
    const results = await drive(runner, requestFor(dvm));
    expect(results.at(-1)).toEqual({ kind: "finished", phase: "Completed" });
    expect(results.filter((r) => r.kind === "retry")).toEqual([]);
    // Refused connections fail fast: every event was tried (with retries) and given up within its invocation.
    expect(events.publisher.counts()).toEqual({ sent: 0, failed: STEPS.length + 1, dropped: 0 });
    expect(metrics.totals).toMatchObject({ EventsSent: 0, EventsFailed: STEPS.length + 1 });
    expect(flushes.length).toBe(results.length);
    for (const { ms } of flushes) expect(ms).toBeLessThan(1_500 + 1_000);
  });

  it("does not hold an invocation past the flush deadline when the sink hangs, and drops beyond the queue bound", async () => {
    const hole = await startBlackhole();
    servers.push({
      close: () => {
        for (const s of hole.sockets) s.destroy();
        return hole.server.close();
      },
    });
    const deadlineMs = 200;
    const { runner, flushes, events } = runnerFor({
      DVM_EVENTS_SINK: "http",
      DVM_EVENTS_HTTP_URL: hole.url,
      DVM_EVENTS_FLUSH_MS: String(deadlineMs),
      DVM_EVENTS_QUEUE: "3",
    });
    const dvm = await createDvm(clusters!.source, fixture.dvmNamespace, "events-hang", {
      ...fixture.spec,
      persistentVolumeClaims: (fixture.spec.persistentVolumeClaims as object[]).slice(0, 1),
    });
    const results = await drive(runner, requestFor(dvm));
    expect(results.at(-1)).toEqual({ kind: "finished", phase: "Completed" });
    expect(flushes.some((f) => f.result.timedOut)).toBe(true);
    for (const { ms } of flushes) expect(ms).toBeLessThan(deadlineMs + 1_000);
    const counts = events.publisher.counts();
    expect(counts.sent).toBe(0);
    expect(counts.dropped).toBeGreaterThan(0);
    // Everything is accounted for: sent, failed, dropped, or still waiting in the bounded queue.
    expect(counts.failed + counts.dropped + events.publisher.pending()).toBe(STEPS.length + 1);
    expect(events.publisher.pending()).toBeLessThanOrEqual(3);
  });
});
