/**
 * Records stay inside their stores' limits: an outcome too large for a ledger item fails the DVM at once
 * (never a completion that fails on every retry while the claim stays held), and error texts entering
 * the status, the conditions and the ledger are bounded (src/dvm/limits.ts).
 */

import { beforeEach, describe, expect, it } from "vitest";
import type { ReconcileRequest } from "../../../src/contracts/request";
import { findCondition } from "../../../src/dvm/conditions";
import { EXECUTABLE_PHASES, type ExecutablePhaseName, type PhaseName } from "../../../src/dvm/itinerary";
import { MAX_CONDITION_MESSAGE_BYTES, MAX_ERROR_TEXT_BYTES, MAX_RECORDED_ERRORS } from "../../../src/dvm/limits";
import type { ClusterResolver } from "../../../src/kube/resolver";
import { advance, type PhaseBody, type PhaseOutcome } from "../../../src/phases/types";
import { PhaseRunner } from "../../../src/runner/runner";
import { FakeCluster } from "../../support/fakeCluster";
import { MemoryLedger } from "../../support/memoryLedger";
import { MemoryDvmStore } from "../../support/memoryStore";

const SPEC = {
  persistentVolumeClaims: [{ name: "data", namespace: "openshift-migration", targetStorageClass: "standard", targetAccessModes: ["ReadWriteOnce"] }],
};

type Bodies = Record<ExecutablePhaseName, PhaseBody>;

function bodiesWith(phase: PhaseName, body: () => Promise<PhaseOutcome>) {
  const executions = new Map<string, number>();
  const bodies = Object.fromEntries(
    EXECUTABLE_PHASES.map((p) => [
      p,
      async () => {
        executions.set(p, (executions.get(p) ?? 0) + 1);
        return p === phase ? body() : advance();
      },
    ]),
  ) as unknown as Bodies;
  return { bodies, executions };
}

const bytes = (text: string | undefined) => Buffer.byteLength(text ?? "");

describe("size bounds of what the runner records", () => {
  let now: number;
  let store: MemoryDvmStore;
  let ledger: MemoryLedger;
  let resolver: ClusterResolver;
  let request: ReconcileRequest;

  beforeEach(() => {
    now = Date.parse("2026-01-01T00:00:00Z");
    store = new MemoryDvmStore(SPEC);
    ledger = new MemoryLedger(() => now);
    const host = new FakeCluster("host");
    resolver = { resolve: async () => ({ host, source: host, destination: host, sameCluster: true }) };
    const { uid, namespace, name } = store.current().metadata;
    request = { uid, namespace, name };
  });

  const runner = (bodies: Bodies) => new PhaseRunner({ store, ledger, clusters: resolver, bodies, clock: { now: () => now }, leaseMs: 60_000 });

  async function runUntil(r: PhaseRunner, phase: PhaseName) {
    for (let i = 0; i < 50 && store.current().status.phase !== phase; i++) {
      await r.run(request);
      now += 1_000;
    }
  }

  it("fails the DVM at once when a phase's outcome is too large for a ledger item, holding no lease", async () => {
    // 2,000 per-PVC results of about 400 bytes: what a DVM far beyond MAX_PVCS_PER_DVM would record.
    const rsyncOperations = Array.from({ length: 2_000 }, (_, i) => ({
      pvcReference: { namespace: "openshift-migration", name: `pvc-${i}-${"x".repeat(300)}` },
      currentAttempt: 1,
      succeeded: true,
    }));
    const { bodies, executions } = bodiesWith("RunRsyncOperations", async () => advance({ rsyncOperations }));
    const r = runner(bodies);
    await runUntil(r, "RunRsyncOperations");
    const result = await r.run(request);
    expect(result).toMatchObject({ kind: "advanced", phase: "RunRsyncOperations", next: "MigrationFailed" });
    const entry = (await ledger.history(request.uid)).find((e) => e.key.phase === "RunRsyncOperations")!;
    expect(entry.state).toBe("COMPLETED");
    expect(entry.outcome).toMatchObject({ result: "failed", category: "Critical" });
    expect(entry.outcome?.statusUpdate).toBeUndefined();
    const failed = findCondition(store.current().status.conditions, "Failed");
    expect(failed?.message).toMatch(/RunRsyncOperations: the phase's outcome takes \d+ bytes, more than the 350000 a ledger record holds/);
    expect(store.current().status.itinerary).toBe("VolumeMigrationFailed");
    // Not run again: the failure was recorded, nothing waits for a lease to expire.
    now += 10 * 60_000;
    await r.run(request);
    expect(executions.get("RunRsyncOperations")).toBe(1);
  });

  it("bounds the errors a failing phase records, in count and in bytes, in the status and the ledger", async () => {
    const errors = Array.from({ length: 300 }, (_, i) => `spec.persistentVolumeClaims[${i}]: ${"é".repeat(4_000)}`);
    const { bodies } = bodiesWith("RunRsyncOperations", async () => ({ kind: "fail", errors }));
    const r = runner(bodies);
    await runUntil(r, "RunRsyncOperations");
    await r.run(request);
    const status = store.current().status;
    expect(status.errors).toHaveLength(MAX_RECORDED_ERRORS);
    expect(status.errors!.at(-1)).toBe(`... and ${300 - MAX_RECORDED_ERRORS + 1} more`);
    expect(Math.max(...status.errors!.map(bytes))).toBeLessThanOrEqual(MAX_ERROR_TEXT_BYTES);
    expect(bytes(findCondition(status.conditions, "Failed")?.message)).toBeLessThanOrEqual(MAX_CONDITION_MESSAGE_BYTES);
    const entry = (await ledger.history(request.uid)).find((e) => e.key.phase === "RunRsyncOperations")!;
    expect(entry.outcome!.errors).toHaveLength(MAX_RECORDED_ERRORS);
    expect(Math.max(...entry.outcome!.errors!.map(bytes))).toBeLessThanOrEqual(MAX_ERROR_TEXT_BYTES);
  });

  it("bounds the error of a retried attempt in the PhaseRetrying condition and the ledger", async () => {
    const { bodies } = bodiesWith("CreateDestinationNamespaces", async () => {
      throw new Error(`the API server said: ${"z".repeat(100_000)}`);
    });
    const r = runner(bodies);
    await runUntil(r, "CreateDestinationNamespaces");
    const result = await r.run(request);
    expect(result.kind).toBe("retry");
    const retrying = findCondition(store.current().status.conditions, "PhaseRetrying");
    expect(retrying?.message).toMatch(/^the API server said: z+…$/);
    expect(bytes(retrying?.message)).toBeLessThanOrEqual(MAX_ERROR_TEXT_BYTES);
    const entry = (await ledger.history(request.uid)).find((e) => e.key.phase === "CreateDestinationNamespaces")!;
    expect(bytes(entry.lastError)).toBeLessThanOrEqual(MAX_ERROR_TEXT_BYTES);
  });
});
