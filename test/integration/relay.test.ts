/**
 * The watch relay against a real kube-apiserver (the harness's control planes): it forwards what it
 * sees, coalesces per uid, follows owned pods and progress records, resumes ended watches, re-lists
 * after 410 Gone, picks up where a stopped relay left off, forgets finished DVMs and survives garbage.
 * The transport is in-process and records every request. Behaviour is asserted, not speed: the one
 * figure checked is a lower bound (the hot-loop guard's spacing), which a slow machine cannot break.
 */

import { randomUUID } from "node:crypto";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { CoreV1Api, CustomObjectsApi, type KubeConfig, PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { type ControlPlane, defaultBinDir, startControlPlane } from "../../infra/dev/local/controlPlane";
import { LABEL } from "../../src/contracts/labels";
import type { ReconcileRequest, RunResult } from "../../src/contracts/request";
import { PHASE_NAMES, PHASES, phaseSpec } from "../../src/dvm/itinerary";
import { DVM_API_VERSION, DVM_GROUP, DVM_KIND, DVM_PLURAL, DVM_VERSION, DVMP_KIND, DVMP_PLURAL } from "../../src/dvm/types";
import { jsonLogger, silentLogger } from "../../src/lib/log";
import { Relay, type RelayOptions } from "../../src/relay/relay";
import { testClusters } from "../support/clusters";
import { CuttableProxy, proxiedKubeConfig } from "../support/cuttableProxy";
import { InProcessTransport } from "../support/inProcessTransport";
import { missing } from "../support/requirements";

const SPEC = {
  persistentVolumeClaims: [{ name: "data", namespace: "app", targetStorageClass: "standard", targetAccessModes: ["ReadWriteOnce"] }],
};
const WAIT_PHASE = PHASE_NAMES.find((p) => PHASES[p].waits)!;
const log = process.env.DVM_RELAY_TEST_LOGS ? jsonLogger({ component: "relay-test" }, "debug") : silentLogger;

/** An in-process transport that records requests and checks that no uid is ever forwarded twice at once. */
class RecordingTransport extends InProcessTransport {
  readonly requests: ReconcileRequest[] = [];
  /** Date.now() at the start of each forward and the phase the relay saw, parallel to `requests`. */
  readonly times: number[] = [];
  readonly phases: Array<string | undefined> = [];
  private readonly active = new Map<string, number>();
  maxConcurrentPerUid = 0;

  constructor(
    options: {
      /** How long each forward takes (to make overlaps possible). */
      delayMs?: number;
      /** The function's answer; default undefined (fire-and-forget). */
      result?: (request: ReconcileRequest) => RunResult | undefined;
      /** Throw instead of answering (e.g. a transport that is down). */
      fail?: (request: ReconcileRequest) => boolean;
      /** What the "function" does to the cluster before it answers. */
      effect?: (request: ReconcileRequest) => Promise<void>;
    } = {},
  ) {
    super(async (request, context) => {
      this.requests.push(request);
      this.times.push(Date.now());
      this.phases.push(context?.phase);
      const now = (this.active.get(request.uid) ?? 0) + 1;
      this.active.set(request.uid, now);
      this.maxConcurrentPerUid = Math.max(this.maxConcurrentPerUid, now);
      try {
        if (options.delayMs) await sleep(options.delayMs);
        if (options.fail?.(request)) throw new Error("transport down");
        await options.effect?.(request);
        return options.result?.(request);
      } finally {
        this.active.set(request.uid, this.active.get(request.uid)! - 1);
      }
    });
  }

  for(uid: string): ReconcileRequest[] {
    return this.requests.filter((r) => r.uid === uid);
  }
}

/** A RunResult that keeps a DVM quiet: "not yet, ask again in ten minutes". */
const quiet = (): RunResult => ({ kind: "waiting", phase: WAIT_PHASE, reason: "test", requeueAfterMs: 600_000 });

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Polls until `check` passes (returns without throwing), every 50 ms; the timeout is a safety net, not an assertion. */
const eventually = <T>(check: () => T | Promise<T>, timeoutMs = 30_000): Promise<T> => vi.waitFor(check, { timeout: timeoutMs, interval: 50 });

/** DVMs, progress records and pods in one cluster, in one fresh namespace. */
class Fixture {
  readonly custom: CustomObjectsApi;
  readonly core: CoreV1Api;

  constructor(
    readonly kubeConfig: KubeConfig,
    readonly namespace: string,
  ) {
    this.custom = kubeConfig.makeApiClient(CustomObjectsApi);
    this.core = kubeConfig.makeApiClient(CoreV1Api);
  }

  static async create(kubeConfig: KubeConfig, prefix = "relay-it"): Promise<Fixture> {
    const namespace = `${prefix}-${randomUUID().slice(0, 8)}`;
    await kubeConfig.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: namespace } } });
    return new Fixture(kubeConfig, namespace);
  }

  async createDvm(name: string): Promise<{ uid: string; resourceVersion: string }> {
    const created = (await this.custom.createNamespacedCustomObject({
      group: DVM_GROUP,
      version: DVM_VERSION,
      namespace: this.namespace,
      plural: DVM_PLURAL,
      body: { apiVersion: DVM_API_VERSION, kind: DVM_KIND, metadata: { name }, spec: SPEC },
    })) as { metadata: { uid: string; resourceVersion: string } };
    return created.metadata;
  }

  async patchStatus(name: string, status: Record<string, unknown>): Promise<void> {
    await this.custom.patchNamespacedCustomObjectStatus(
      { group: DVM_GROUP, version: DVM_VERSION, namespace: this.namespace, plural: DVM_PLURAL, name, body: { status } },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    );
  }

  /**
   * Progress as the relay sees it: a new status.phase (the spec is immutable, so the generation never
   * moves under a migration). Returns the new resourceVersion.
   */
  async advancePhase(name: string, step: number): Promise<string> {
    const written = (await this.custom.patchNamespacedCustomObjectStatus(
      { group: DVM_GROUP, version: DVM_VERSION, namespace: this.namespace, plural: DVM_PLURAL, name, body: { status: { phase: `Step${step}` } } },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    )) as { metadata: { resourceVersion: string } };
    return written.metadata.resourceVersion;
  }

  async deleteDvm(name: string): Promise<void> {
    await this.custom.deleteNamespacedCustomObject({ group: DVM_GROUP, version: DVM_VERSION, namespace: this.namespace, plural: DVM_PLURAL, name });
  }

  /** A pod labelled as a transfer pod of `uid` (or, with transfer false, only with the uid label). */
  async createOwnedPod(name: string, uid: string, transfer = true): Promise<void> {
    await this.core.createNamespacedPod({
      namespace: this.namespace,
      body: {
        metadata: { name, labels: { [LABEL.dvmUid]: uid, ...(transfer ? { [LABEL.transfer]: "true" } : {}) } },
        spec: { containers: [{ name: "c", image: "example.invalid/rsync:latest" }] },
      },
    });
  }

  async createOwnedProgress(name: string, uid: string): Promise<void> {
    await this.custom.createNamespacedCustomObject({
      group: DVM_GROUP,
      version: DVM_VERSION,
      namespace: this.namespace,
      plural: DVMP_PLURAL,
      body: { apiVersion: DVM_API_VERSION, kind: DVMP_KIND, metadata: { name, labels: { [LABEL.dvmUid]: uid } }, spec: { pvcName: "data" } },
    });
  }
}

const relays: Relay[] = [];
function startRelay(options: RelayOptions): Relay {
  const relay = new Relay({ log, resyncMs: 0, ...options });
  relays.push(relay);
  relay.start();
  return relay;
}

afterEach(async () => {
  await Promise.all(relays.splice(0).map((r) => r.stop(5_000)));
});

describe("relay against a real API server", () => {
  let host: KubeConfig;
  let destination: KubeConfig;

  beforeAll(() => {
    const clusters = testClusters();
    host = clusters.source;
    destination = clusters.destination;
  });

  it("forwards a request when a DVM is created", async () => {
    const fx = await Fixture.create(host);
    const transport = new RecordingTransport();
    const relay = startRelay({ kubeConfig: host, transport, namespace: fx.namespace });
    await eventually(() => expect(relay.stats().synced).toBe(true));
    const dvm = await fx.createDvm("created");
    const request = await eventually(() => {
      const [first] = transport.for(dvm.uid);
      expect(first).toBeDefined();
      return first!;
    });
    expect(request).toMatchObject({ uid: dvm.uid, namespace: fx.namespace, name: "created", generation: 1 });
    expect(relay.ready()).toBe(true);
  });

  it("coalesces rapid updates of one DVM and never forwards one uid twice at once", async () => {
    const fx = await Fixture.create(host);
    // Slow forwards: updates pile up while one is in flight.
    const transport = new RecordingTransport({ delayMs: 500, result: quiet });
    startRelay({ kubeConfig: host, transport, namespace: fx.namespace });
    const dvm = await fx.createDvm("busy");
    const updates = 25;
    let latest = dvm.resourceVersion;
    for (let i = 1; i <= updates; i++) latest = await fx.advancePhase("busy", i); // a new phase each time: "progress"
    const last = await eventually(() => {
      const requests = transport.for(dvm.uid);
      expect(requests.at(-1)?.resourceVersion).toBe(latest);
      return requests;
    });
    expect(transport.maxConcurrentPerUid).toBe(1);
    // Every update changed the phase, so none is throttled: only the queue's coalescing explains fewer forwards.
    expect(last.length).toBeLessThan(updates + 1);
  });

  it("a function that writes status on every poll of a wait phase does not drive itself in a hot loop", async () => {
    const fx = await Fixture.create(host);
    let polls = 0;
    // Fire-and-forget (no RunResult), and every invocation patches the status: each patch is a watch event.
    const transport = new RecordingTransport({
      effect: async () => fx.patchStatus("poller", { phase: WAIT_PHASE, polls: ++polls }),
    });
    startRelay({ kubeConfig: host, transport, namespace: fx.namespace });
    const dvm = await fx.createDvm("poller");
    await fx.patchStatus("poller", { phase: WAIT_PHASE });
    // Long enough for a few requeue delays of the wait phase.
    await sleep(phaseSpec(WAIT_PHASE).requeueMs * 2.5);
    const mine = transport.requests.flatMap((r, i) => (r.uid === dvm.uid ? [{ at: transport.times[i]!, phase: transport.phases[i] }] : []));
    const inWaitPhase = mine.filter((f) => f.phase === WAIT_PHASE);
    expect(inWaitPhase.length).toBeGreaterThanOrEqual(2);
    // Each forward caused a new event, yet forwards in the same phase are at least its requeue delay
    // apart (timer rounding aside): the loop runs at the poll rate, not at the speed of the API server.
    for (let i = 1; i < inWaitPhase.length; i++) {
      expect(inWaitPhase[i]!.at - inWaitPhase[i - 1]!.at).toBeGreaterThanOrEqual(phaseSpec(WAIT_PHASE).requeueMs - 20);
    }
    expect(polls).toBe(mine.length);
    expect(transport.maxConcurrentPerUid).toBe(1);
  });

  it("forwards the DVM that a labelled pod (on another cluster) or progress record belongs to; drops unknown uids", async () => {
    const fx = await Fixture.create(host);
    const dst = await Fixture.create(destination);
    const transport = new RecordingTransport({ result: quiet });
    const relay = startRelay({ kubeConfig: host, transport, namespace: fx.namespace, clusters: [{ name: "destination", kubeConfig: destination }] });
    const dvm = await fx.createDvm("owner");
    await eventually(() => expect(transport.for(dvm.uid).length).toBeGreaterThan(0));
    await eventually(() => expect(relay.stats().watches.every((w) => w.synced && w.connected)).toBe(true));

    // The progress record first: a forward's reason is that of the newest trigger queued for it (the
    // queue keeps the newest value), and the pod's own updates would replace the record's.
    await fx.createOwnedProgress("progress", dvm.uid);
    await eventually(() => expect(transport.for(dvm.uid).some((r) => /^progress .*\/progress added/.test(r.reason ?? ""))).toBe(true));

    const stranger = randomUUID();
    await dst.createOwnedPod("rsync-client", dvm.uid);
    await dst.createOwnedPod("someone-elses", stranger);
    // Not a transfer pod: outside the relay's pod watch (its selector), so it drives nothing.
    await dst.createOwnedPod("not-transfer", dvm.uid, false);
    await eventually(() => expect(transport.for(dvm.uid).some((r) => /^pod .*rsync-client .*@destination$/.test(r.reason ?? ""))).toBe(true));
    expect(transport.for(stranger)).toEqual([]);
    expect(transport.for(dvm.uid).filter((r) => (r.reason ?? "").includes("not-transfer"))).toEqual([]);
    expect(transport.maxConcurrentPerUid).toBe(1);
  });

  it("resumes a watch that the server ends, from its resourceVersion, without losing events", async () => {
    const fx = await Fixture.create(host);
    const transport = new RecordingTransport({ result: quiet });
    // The server closes every watch after a second: several resumes happen while DVMs come and go.
    const relay = startRelay({ kubeConfig: host, transport, namespace: fx.namespace, watchTimeoutSeconds: 1 });
    await eventually(() => expect(relay.stats().synced).toBe(true));
    const uids: string[] = [];
    for (let i = 0; i < 6; i++) {
      uids.push((await fx.createDvm(`dvm-${i}`)).uid);
      await sleep(400);
    }
    await eventually(() => {
      for (const uid of uids) expect(transport.for(uid).length).toBeGreaterThan(0);
    });
    const dvms = relay.stats().watches.find((w) => w.name === "dvms")!;
    expect(dvms.watches).toBeGreaterThan(2);
    // Resumed each time from the last resourceVersion: listed once, at the start.
    expect(dvms.lists).toBe(1);
  });

  it("a relay started after another one stopped mid-migration picks the DVM up from the list", async () => {
    const fx = await Fixture.create(host);
    const first = new RecordingTransport({ result: quiet });
    const relay1 = startRelay({ kubeConfig: host, transport: first, namespace: fx.namespace });
    const dvm = await fx.createDvm("handover");
    await fx.patchStatus("handover", { phase: WAIT_PHASE });
    await eventually(() => expect(first.for(dvm.uid).length).toBeGreaterThan(0));
    await relay1.stop();

    // The migration moves on while no relay runs.
    await fx.patchStatus("handover", { phase: "RunRsyncOperations" });
    const second = new RecordingTransport({ result: quiet });
    startRelay({ kubeConfig: host, transport: second, namespace: fx.namespace });
    const picked = await eventually(() => {
      const [request] = second.for(dvm.uid);
      expect(request).toBeDefined();
      return request!;
    });
    expect(picked).toMatchObject({ uid: dvm.uid, name: "handover", reason: "list" });
  });

  it("forgets Completed and deleted DVMs (memory bounded by live DVMs)", async () => {
    const fx = await Fixture.create(host);
    const transport = new RecordingTransport({ result: quiet });
    const relay = startRelay({ kubeConfig: host, transport, namespace: fx.namespace });
    const dvms = await Promise.all(["done", "gone", "alive", "finished"].map(async (name) => ({ name, ...(await fx.createDvm(name)) })));
    await eventually(() => {
      for (const d of dvms) expect(transport.for(d.uid).length).toBeGreaterThan(0);
    });
    expect(relay.stats().liveDvms).toBe(4);

    await fx.patchStatus("done", { phase: "Completed" });
    await fx.deleteDvm("gone");
    await eventually(() => expect(relay.stats().liveDvms).toBe(2));

    // A function that answers "finished" is forgotten too, without waiting for the event.
    const finishedUid = dvms.find((d) => d.name === "finished")!.uid;
    const answering = new RecordingTransport({ result: (r) => (r.uid === finishedUid ? { kind: "finished", phase: "Completed" } : quiet()) });
    await relay.stop();
    const relay2 = startRelay({ kubeConfig: host, transport: answering, namespace: fx.namespace });
    await eventually(() => {
      expect(answering.for(finishedUid).length).toBeGreaterThan(0);
      expect(relay2.stats().liveDvms).toBe(1);
    });
    // What is left is the live DVM's scheduled requeue, and nothing for the others.
    expect(relay2.stats().queuedUids).toBeLessThanOrEqual(1);
  });

  it("survives a DVM with a garbage status and keeps forwarding", async () => {
    const fx = await Fixture.create(host);
    const transport = new RecordingTransport({ result: quiet });
    const relay = startRelay({ kubeConfig: host, transport, namespace: fx.namespace });
    const bad = await fx.createDvm("garbage");
    await fx.patchStatus("garbage", { phase: "NoSuchPhase", conditions: "not a list", rsyncOperations: 42 });
    const good = await fx.createDvm("fine");
    await eventually(() => {
      expect(transport.for(good.uid).length).toBeGreaterThan(0);
      expect(transport.for(bad.uid).length).toBeGreaterThan(0);
    });
    // The garbage one is forwarded as is: the function reads it fresh and reports what is wrong.
    expect(relay.stats()).toMatchObject({ watchConnected: true, errors: 0 });
  });

  it("retries with backoff when the transport fails, until it is delivered", async () => {
    const fx = await Fixture.create(host);
    let failures = 0;
    const transport = new RecordingTransport({ result: quiet, fail: () => failures++ < 3 });
    const relay = startRelay({ kubeConfig: host, transport, namespace: fx.namespace, retryBackoff: { initialMs: 50, maxMs: 200 } });
    const dvm = await fx.createDvm("flaky");
    await eventually(() => expect(relay.stats().forwarded).toBe(1));
    expect(relay.stats().errors).toBe(3);
    expect(transport.for(dvm.uid).length).toBe(4);
  });
});

/**
 * 410 Gone needs an apiserver whose watch cache no longer holds the relay's resourceVersion: a
 * restart after compaction. The shared control planes cannot be restarted from a test worker, so this
 * suite starts its own (no kwok) and puts a TCP proxy between it and the relay to open a gap.
 */
const HAVE_BINARIES = existsSync(join(defaultBinDir(), "kube-apiserver")) && existsSync(join(defaultBinDir(), "etcd"));

describe.skipIf(missing("control-plane binaries (etcd, kube-apiserver)", HAVE_BINARIES, "bash infra/dev/controlplane/build.sh"))("relay after 410 Gone", () => {
  let plane: ControlPlane;
  let proxy: CuttableProxy;

  beforeAll(async () => {
    plane = await startControlPlane({ name: "relay-gone", withKwok: false });
    proxy = await CuttableProxy.start(new URL(plane.server));
  });

  afterAll(async () => {
    await Promise.all(relays.splice(0).map((r) => r.stop(5_000)));
    await proxy?.close();
    await plane?.stop();
  });

  it("re-lists, forgets DVMs deleted during the gap and forwards those created or changed in it", async () => {
    const admin = plane.kubeConfig();
    const fx = await Fixture.create(admin);
    const transport = new RecordingTransport({ result: quiet });
    const relay = startRelay({
      kubeConfig: proxiedKubeConfig(admin, proxy.url),
      transport,
      namespace: fx.namespace,
      watchHostPods: false,
      watchBackoff: { initialMs: 100, maxMs: 500 },
    });
    const changed = await fx.createDvm("changed");
    const deleted = await fx.createDvm("deleted");
    const untouched = await fx.createDvm("untouched");
    await eventually(() => {
      for (const d of [changed, deleted, untouched]) expect(transport.for(d.uid).length).toBeGreaterThan(0);
    });
    const before = relay.stats().watches.find((w) => w.name === "dvms")!;
    const untouchedForwards = transport.for(untouched.uid).length;

    // The gap: the relay cannot reach the server while DVMs change, then the server forgets history.
    proxy.cut();
    await eventually(() => expect(relay.stats().watchConnected).toBe(false));
    const changedTo = await fx.advancePhase("changed", 5);
    await fx.deleteDvm("deleted");
    const created = await fx.createDvm("created");
    await plane.compactEtcd();
    await plane.restartApiServer();
    proxy.resume();

    await eventually(() => {
      const dvms = relay.stats().watches.find((w) => w.name === "dvms")!;
      expect(dvms.lists).toBeGreaterThan(before.lists);
      expect(relay.stats().watchConnected).toBe(true);
      expect(transport.for(created.uid).length).toBeGreaterThan(0);
      expect(transport.for(changed.uid).at(-1)?.resourceVersion).toBe(changedTo);
      expect(relay.stats().liveDvms).toBe(3);
    }, 60_000);
    expect(transport.for(changed.uid).at(-1)?.reason).toBe("relist");
    // Unchanged during the gap: the DVM re-list does not count it as changed. (The owned-object
    // watches expired too, and they give every live DVM a look, with their own reason.)
    expect(
      transport
        .for(untouched.uid)
        .slice(untouchedForwards)
        .map((r) => r.reason),
    ).not.toContain("relist");
  });
});
