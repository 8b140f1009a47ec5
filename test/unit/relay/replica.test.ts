/**
 * A relay replica's role and readiness while it stands by: ready (and saying "standby") as long as it
 * can read its Lease, not ready once it cannot, and no relay running meanwhile. The leading side, with
 * a real API server, is in test/integration/relayFailover.test.ts.
 */
import { KubeConfig } from "@kubernetes/client-node";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { silentLogger } from "../../../src/lib/log";
import { RelayReplica } from "../../../src/relay/replica";
import { InProcessTransport } from "../../support/inProcessTransport";
import { Link, MemoryLeaderLease } from "../../support/memoryLeaderLease";

const TIMING = { leaseDurationMs: 4_000, renewDeadlineMs: 2_500, retryPeriodMs: 500 };

describe("RelayReplica as a standby", () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it("is ready but not leading while another replica holds the Lease, and not ready once it cannot read it", async () => {
    const lease = new MemoryLeaderLease();
    lease.create({ holderIdentity: "relay-a", leaseDurationSeconds: 4, leaseTransitions: 0 });
    const link = new Link(lease);
    let forwards = 0;
    const replica = new RelayReplica({
      relay: {
        kubeConfig: new KubeConfig(),
        transport: new InProcessTransport(async () => {
          forwards += 1;
          return undefined;
        }),
        log: silentLogger,
      },
      election: { ...TIMING, store: link, identity: "relay-b" },
      log: silentLogger,
    });
    expect(replica.ready()).toBe(false);
    replica.start();
    // The holder keeps renewing (as seen by b: the Lease keeps changing).
    const renewals = setInterval(() => {
      const current = lease.get()!;
      lease.update({ ...current.record, renewTime: new Date() }, current.resourceVersion);
    }, TIMING.retryPeriodMs);
    await vi.advanceTimersByTimeAsync(10_000);
    expect(replica.role()).toBe("standby");
    expect(replica.ready()).toBe(true);
    expect(replica.stats()).toEqual({ role: "standby", leadership: expect.objectContaining({ identity: "relay-b", leading: false, holder: "relay-a" }) });

    link.state = "cut";
    await vi.advanceTimersByTimeAsync(TIMING.leaseDurationMs + 10);
    expect(replica.role()).toBe("standby");
    expect(replica.ready()).toBe(false);
    expect(forwards).toBe(0);

    clearInterval(renewals);
    link.state = "up";
    const stopping = replica.stop();
    await vi.runAllTimersAsync();
    await stopping;
  });

  it("tells its metrics when it starts and stops leading (the leader gauge and transitions, src/relay/metrics.ts)", async () => {
    const lease = new MemoryLeaderLease();
    const changes: boolean[] = [];
    // A cluster nobody answers at: the relay starts (its lists fail and retry), so the term lasts.
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromOptions({
      clusters: [{ name: "c", server: "http://127.0.0.1:9", skipTLSVerify: true }],
      users: [{ name: "u" }],
      contexts: [{ name: "x", cluster: "c", user: "u" }],
      currentContext: "x",
    });
    const replica = new RelayReplica({
      relay: { kubeConfig, transport: new InProcessTransport(async () => undefined), log: silentLogger, resyncMs: 0 },
      election: { ...TIMING, store: new Link(lease), identity: "relay-a" },
      log: silentLogger,
      metrics: { leadershipChanged: (leading) => changes.push(leading) },
    });
    replica.start();
    await vi.advanceTimersByTimeAsync(2_000);
    expect(replica.role()).toBe("leader");
    expect(changes).toEqual([true]);
    const stopping = replica.stop();
    await vi.runAllTimersAsync();
    await stopping;
    expect(changes).toEqual([true, false]);
  });

  it("without leader election it is the only replica", () => {
    const replica = new RelayReplica({
      relay: { kubeConfig: new KubeConfig(), transport: new InProcessTransport(async () => undefined), log: silentLogger },
      log: silentLogger,
    });
    expect(replica.role()).toBe("only replica");
    expect(replica.stats()).toEqual({ role: "only replica" });
  });
});
