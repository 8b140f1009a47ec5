/**
 * A wait phase ends on the event it waits for, not on its poll: a whole migration through the relay (real
 * API servers, kwok running the pods, DynamoDB Local holding the ledger, the runner in process) with every
 * pod-driven wait's requeue and the relay's poll spacing set to ten minutes. The migration can only get
 * past those waits within the test's bound if the relay forwards the pod changes (server pod Running,
 * client pod Succeeded, transfer pod gone) when they happen. No timing is asserted beyond that bound.
 */

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EXECUTABLE_PHASES, type ExecutablePhaseName, type PhaseName } from "../../src/dvm/itinerary";
import { jsonLogger, silentLogger } from "../../src/lib/log";
import { PHASE_BODIES } from "../../src/phases";
import type { PhaseBody } from "../../src/phases/types";
import { Relay } from "../../src/relay/relay";
import { testClusters } from "../support/clusters";
import { type FreshTable, freshLedgerTable } from "../support/dynamo";
import { InProcessTransport } from "../support/inProcessTransport";
import { createDvm, createMigrationFixture, type MigrationFixture, readDvm, testPhaseRunner } from "../support/migration";
import { until } from "../support/poll";

/** Far beyond the test's bound: a wait that ends on its poll fails the test. */
const LONG_POLL_MS = 600_000;
/** How late an Event-mode "not yet" answers: longer than kwok takes to start or finish a pod and emit its changes. */
const SLOW_NOT_YET_MS = 5_000;
/** The test's bound on the whole migration (about 5 s on an idle machine; kwok finishes a client pod after about 1 s). */
const BOUND_MS = 240_000;
/** The waits a watched pod's change ends (EnsureRsyncEndpointReady waits for a Service address, which the relay does not watch). */
const POD_DRIVEN_WAITS: readonly PhaseName[] = [
  "WaitForStaleRsyncResourcesTerminated",
  "WaitForRsyncTransferPodsRunning",
  "RunRsyncOperations",
  "WaitForRsyncResourcesTerminated",
];
const log = process.env.DVM_RELAY_TEST_LOGS ? jsonLogger({ component: "event-waits-test" }, "debug") : silentLogger;

const clusters = testClusters();
const run = `ev${Date.now().toString(36)}`;
let fixture: MigrationFixture;
let table: FreshTable;

/**
 * The real phase bodies; a pod-driven wait's "not yet" asks to be polled again only after LONG_POLL_MS,
 * and, with `slowNotYetMs`, is that much late, as an invocation on a busy function is: the pod change it
 * waits for then arrives while it still holds the phase.
 */
function longPollBodies(waits: Map<string, number>, slowNotYetMs = 0): Record<ExecutablePhaseName, PhaseBody> {
  const wrap =
    (phase: ExecutablePhaseName): PhaseBody =>
    async (ctx) => {
      const outcome = await PHASE_BODIES[phase](ctx);
      if (outcome.kind !== "wait" || !POD_DRIVEN_WAITS.includes(phase)) return outcome;
      waits.set(phase, (waits.get(phase) ?? 0) + 1);
      if (slowNotYetMs > 0) await sleep(slowNotYetMs);
      return { ...outcome, afterMs: LONG_POLL_MS };
    };
  return Object.fromEntries(EXECUTABLE_PHASES.map((phase) => [phase, wrap(phase)])) as Record<ExecutablePhaseName, PhaseBody>;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

beforeAll(async () => {
  fixture = await createMigrationFixture(clusters, run);
  table = await freshLedgerTable();
});

afterAll(async () => {
  await table?.drop();
});

describe("wait phases driven by the relay", () => {
  // RequestResponse: the relay sees each answer, and a change that came in flight is forwarded after it.
  // Event (the deployed default): the relay sees no answer; a change that met the previous invocation
  // still holding the phase ("busy", unseen) is checked again a second later (eventModeRecheckMs).
  for (const mode of ["RequestResponse", "Event"] as const) {
    it(`end on the pod change they wait for, with the poll ten minutes away (${mode})`, { timeout: BOUND_MS + 60_000 }, async () => {
      const waits = new Map<string, number>();
      const runner = testPhaseRunner(clusters, table, { bodies: longPollBodies(waits, mode === "Event" ? SLOW_NOT_YET_MS : 0) });
      const inFlight = new Set<Promise<unknown>>();
      const transport =
        mode === "RequestResponse"
          ? new InProcessTransport((request) => runner.run(request))
          : new InProcessTransport(async (request) => {
              // Accepted at once, run in the background, the answer dropped: Lambda's Event invocation.
              const running = runner.run(request).catch(() => undefined);
              inFlight.add(running);
              void running.finally(() => inFlight.delete(running));
              return undefined;
            });
      const relay = new Relay({
        kubeConfig: clusters.source,
        transport,
        namespace: fixture.dvmNamespace,
        clusters: fixture.sameCluster ? [] : [{ name: "destination", kubeConfig: clusters.destination }],
        resyncMs: 0,
        pollMs: LONG_POLL_MS,
        log,
      });
      relay.start();
      try {
        const dvm = await createDvm(clusters.source, fixture.dvmNamespace, `on-event-${mode.toLowerCase()}`, fixture.spec);
        // On failure: where it stopped, and how often each wait said "not yet" before it.
        const notYets = () => `waits that said "not yet": ${JSON.stringify(Object.fromEntries(waits))}`;
        const phase = await until(
          "the DVM to finish",
          async () => (await readDvm(clusters.source, fixture.dvmNamespace, dvm.metadata.name)).status?.phase,
          (phase) => phase === "Completed" || phase === "Failed",
          { timeoutMs: BOUND_MS, intervalMs: 200, context: notYets },
        );
        expect(phase, notYets()).toBe("Completed");
        // kwok finishes a client pod about 1 s after it runs: RunRsyncOperations said "not yet" at least
        // once, so an event, not a poll, moved it on.
        expect(waits.get("RunRsyncOperations") ?? 0).toBeGreaterThan(0);
      } finally {
        await relay.stop(5_000);
        await Promise.all(inFlight);
      }
    });
  }
});
