/**
 * Issue 24 item 9: a kubeconfig Secret missing for a moment (rotation by delete and re-create) or a
 * credential refused for a moment (401) must not fail a migration; one that stays wrong fails it after
 * the grace (5 minutes by default, counted from the first failure, which retries do not restart), and
 * cleanup retries it too, then gives up naming what it left. The runner with in-memory stand-ins.
 */

import { beforeEach, describe, expect, it } from "vitest";
import type { ReconcileRequest } from "../../../src/contracts/request";
import { findCondition } from "../../../src/dvm/conditions";
import { EXECUTABLE_PHASES, type ExecutablePhaseName, type PhaseName } from "../../../src/dvm/itinerary";
import { KubeApiError } from "../../../src/kube/errors";
import { ClusterCredentialsUnavailableError, type ClusterResolver } from "../../../src/kube/resolver";
import { advance, type PhaseBody, type PhaseContext, type PhaseOutcome } from "../../../src/phases/types";
import { DEFAULT_CREDENTIAL_GRACE_MS } from "../../../src/runner/credentialGrace";
import { PhaseRunner } from "../../../src/runner/runner";
import { FakeCluster } from "../../support/fakeCluster";
import { MemoryLedger } from "../../support/memoryLedger";
import { MemoryDvmStore } from "../../support/memoryStore";

const SPEC = {
  persistentVolumeClaims: [{ name: "data", namespace: "openshift-migration", targetStorageClass: "standard", targetAccessModes: ["ReadWriteOnce"] }],
  destinationCluster: { kubeconfigSecretRef: { name: "dst" } },
};
const MISSING = "spec.destinationCluster.kubeconfigSecretRef.name: Secret openshift-migration/dst not found";

type Bodies = Record<ExecutablePhaseName, PhaseBody>;

describe("a cluster credential missing or refused", () => {
  let now: number;
  let store: MemoryDvmStore;
  let ledger: MemoryLedger;
  let request: ReconcileRequest;
  /** Whether the kubeconfig Secret is there; the resolver reads it on every invocation. */
  let secretPresent: boolean;
  const destination = new FakeCluster("destination");
  const clock = { now: () => now };
  const executions = new Map<string, number>();
  /** The destination cluster each body got (cleanup must not run against a stand-in). */
  const reached = new Map<string, string>();

  beforeEach(() => {
    now = Date.parse("2026-01-01T00:00:00Z");
    store = new MemoryDvmStore(SPEC);
    ledger = new MemoryLedger(() => now);
    secretPresent = true;
    executions.clear();
    reached.clear();
    const { uid, namespace, name } = store.current().metadata;
    request = { uid, namespace, name };
  });

  const resolver: ClusterResolver = {
    resolve: async (_namespace, spec) => {
      const host = new FakeCluster("host");
      if (spec.destinationCluster && !secretPresent) throw new ClusterCredentialsUnavailableError([MISSING]);
      return { host, source: host, destination, sameCluster: false };
    },
  };

  function bodies(overrides: Partial<Record<PhaseName, (ctx: PhaseContext) => Promise<PhaseOutcome>>> = {}): Bodies {
    return Object.fromEntries(
      EXECUTABLE_PHASES.map((phase) => [
        phase,
        async (ctx: PhaseContext) => {
          executions.set(phase, (executions.get(phase) ?? 0) + 1);
          reached.set(phase, ctx.clusters.destination.name);
          return (overrides[phase] ?? (async () => advance()))(ctx);
        },
      ]),
    ) as unknown as Bodies;
  }

  const runner = (b: Bodies) => new PhaseRunner({ store, ledger, clusters: resolver, bodies: b, clock, leaseMs: 60_000 });
  const status = () => store.current().status;
  const credentialCondition = () => findCondition(status().conditions, "ClusterCredentialsUnavailable");

  it("a Secret deleted and re-created (rotation) does not fail the migration", async () => {
    const r = runner(bodies());
    await r.run(request); // Started
    secretPresent = false;
    expect(await r.run(request)).toMatchObject({ kind: "retry", phase: "CleanStaleRsyncResources" });
    now += 10_000;
    expect(await r.run(request)).toMatchObject({ kind: "retry" });
    expect(credentialCondition()).toMatchObject({ status: "True", lastTransitionTime: "2026-01-01T00:00:00.000Z", durable: true });
    expect(credentialCondition()?.message).toContain(MISSING);
    secretPresent = true;
    now += 10_000;
    expect(await r.run(request)).toMatchObject({ kind: "advanced", phase: "CleanStaleRsyncResources" });
    expect(status().itinerary).toBe("VolumeMigration");
    expect(status().errors).toBeUndefined();
    // Working again: the record goes, so a later failure starts its own clock.
    expect(credentialCondition()).toBeUndefined();
  });

  it("a Secret that stays missing fails the migration after the grace, counted from the first failure", async () => {
    const r = runner(bodies());
    await r.run(request);
    secretPresent = false;
    const first = now;
    let result = await r.run(request);
    for (let i = 0; result.kind === "retry" && i < 100; i++) {
      now += 30_000;
      result = await r.run(request);
    }
    expect(result).toMatchObject({ kind: "advanced", phase: "CleanStaleRsyncResources", next: "MigrationFailed" });
    // Retries every 30 s did not restart the clock: it failed at the first try at or past the grace.
    expect(now - first).toBe(DEFAULT_CREDENTIAL_GRACE_MS);
    expect(status().errors?.[0]).toMatch(
      new RegExp(`^${MISSING.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")}: still failing 300 s after the first failure at 2026-01-01T00:00:00.000Z`),
    );
    expect(findCondition(status().conditions, "Failed")?.status).toBe("True");
  });

  it("cleanup retries a missing Secret too, then gives up naming what it left", async () => {
    const r = runner(bodies({ RunRsyncOperations: async () => ({ kind: "fail", errors: ["rsync failed"] }) }));
    for (let i = 0; i < 40 && status().phase !== "CleanupAfterFailure"; i++) await r.run(request);
    expect(status().phase).toBe("CleanupAfterFailure");
    // Missing for a moment during cleanup: retried, and cleanup then runs against the real destination.
    secretPresent = false;
    expect(await r.run(request)).toMatchObject({ kind: "retry", phase: "CleanupAfterFailure" });
    secretPresent = true;
    now += 10_000;
    expect(await r.run(request)).toMatchObject({ kind: "advanced", phase: "CleanupAfterFailure" });
    expect(reached.get("CleanupAfterFailure")).toBe("destination");
    expect(credentialCondition()).toBeUndefined();

    // Missing for good: retried until the grace is over, then cleanup gives up with a condition.
    secretPresent = false;
    const first = now;
    let result = await r.run(request);
    for (let i = 0; result.kind === "retry" && i < 100; i++) {
      now += 60_000;
      result = await r.run(request);
    }
    expect(result).toMatchObject({ kind: "advanced", phase: "WaitForCleanupAfterFailure" });
    expect(now - first).toBe(DEFAULT_CREDENTIAL_GRACE_MS);
    expect(executions.get("WaitForCleanupAfterFailure")).toBeUndefined();
    const left = findCondition(status().conditions, "CleanupIncomplete");
    expect(left).toMatchObject({ status: "True", durable: true });
    expect(left?.message).toContain(`dvm.migration.openshift.io/uid=${request.uid}`);
    expect(left?.message).toContain("openshift-migration of the source cluster and openshift-migration of the destination");
    expect(left?.message).toContain(MISSING);
    // The last cleanup step (restoring quiesced applications) cannot reach the cluster either: given up too.
    expect(await r.run(request)).toMatchObject({ kind: "advanced", phase: "UnquiesceAfterFailure" });
    expect(status().phase).toBe("Completed");
  });

  it("a credential the cluster keeps refusing (401) fails the migration after the grace instead of retrying forever", async () => {
    let refusing = 0;
    const r = runner(
      bodies({
        CleanStaleRsyncResources: async () => {
          refusing++;
          throw new KubeApiError("destination: list Pod in openshift-migration: Unauthorized", 401, "Unauthorized");
        },
      }),
    );
    await r.run(request);
    let result = await r.run(request);
    for (let i = 0; result.kind === "retry" && i < 100; i++) {
      now += 60_000;
      result = await r.run(request);
    }
    expect(result).toMatchObject({ kind: "advanced", next: "MigrationFailed" });
    expect(refusing).toBe(6);
    expect(status().errors?.[0]).toMatch(
      /^destination: list Pod in openshift-migration: Unauthorized \(401: the cluster refused the credential\): still failing 300 s/,
    );
  });
});
