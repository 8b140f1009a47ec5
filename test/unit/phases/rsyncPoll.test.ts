/**
 * One poll of RunRsyncOperations at MAX_PVCS_PER_DVM volumes: its calls go out a bounded number at a
 * time (not one after another, two or three per volume), and nothing new starts after the deadline.
 */

import { describe, expect, it } from "vitest";
import type { PhaseLease } from "../../../src/contracts/lease";
import { MAX_PVCS_PER_DVM } from "../../../src/dvm/limits";
import type { Cluster } from "../../../src/kube/cluster";
import { runRsyncOperations, VOLUME_POLL_CONCURRENCY } from "../../../src/phases/rsyncOperations";
import { fakeContext } from "../../support/phaseContext";

const SPEC = {
  persistentVolumeClaims: Array.from({ length: MAX_PVCS_PER_DVM }, (_, i) => ({
    name: `pvc-${i}`,
    namespace: "shop",
    targetStorageClass: "fast",
    targetAccessModes: ["ReadWriteOnce"],
  })),
};

/** A cluster whose every call takes a turn of the event loop, counting how many are in flight at once. */
function slow(cluster: Cluster, meter: { inFlight: number; most: number; calls: number }, onCall: () => unknown = () => {}): Cluster {
  return new Proxy(cluster, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver);
      if (typeof value !== "function") return value;
      return async (...args: unknown[]) => {
        meter.calls++;
        onCall();
        meter.most = Math.max(meter.most, ++meter.inFlight);
        try {
          await new Promise((resolve) => setImmediate(resolve));
          return await value.apply(target, args);
        } finally {
          meter.inFlight--;
        }
      };
    },
  });
}

describe(`one poll of RunRsyncOperations with ${MAX_PVCS_PER_DVM} volumes`, () => {
  it(`sends its calls ${VOLUME_POLL_CONCURRENCY} at a time at most, and more than one at a time`, async () => {
    const { ctx } = fakeContext(SPEC);
    const meter = { inFlight: 0, most: 0, calls: 0 };
    ctx.clusters = { ...ctx.clusters, source: slow(ctx.clusters.source, meter), host: slow(ctx.clusters.host, meter) };
    const outcome = await runRsyncOperations(ctx);
    expect(outcome.kind).toBe("wait");
    expect(meter.calls).toBeGreaterThanOrEqual(2 * MAX_PVCS_PER_DVM);
    expect(meter.most).toBeGreaterThan(1);
    expect(meter.most).toBeLessThanOrEqual(VOLUME_POLL_CONCURRENCY);
  });

  it("begins no volume after the body's deadline and ends with the deadline's reason", async () => {
    const { ctx } = fakeContext(SPEC);
    const meter = { inFlight: 0, most: 0, calls: 0 };
    const controller = new AbortController();
    const lease: PhaseLease = { signal: controller.signal, renew: async () => {} };
    ctx.lease = lease;
    // The deadline passes at the tenth call.
    const source = slow(ctx.clusters.source, meter, () => meter.calls === 10 && controller.abort(new Error("deadline")));
    ctx.clusters = { ...ctx.clusters, source, host: slow(ctx.clusters.host, meter) };
    await expect(runRsyncOperations(ctx)).rejects.toThrow("deadline");
    expect(meter.calls).toBeLessThanOrEqual(10 + VOLUME_POLL_CONCURRENCY);
  });
});
