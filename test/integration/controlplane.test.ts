/**
 * The local control plane is a real Kubernetes API server: the behaviours the controller relies on
 * (optimistic concurrency, generation, watch resumption, 410 Gone, pod lifecycle via kwok, CRD
 * validation) are checked here against it, so later tests can trust them.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import {
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  PatchStrategy,
  setHeaderOptions,
  type V1CustomResourceDefinition,
  type V1Pod,
  Watch,
} from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ControlPlane, DEFAULT_CRD_DIR, defaultBinDir, startControlPlane } from "../../infra/dev/local/controlPlane";
import { readCrds } from "../../infra/dev/local/crds";
import { DVM_API_VERSION, DVM_GROUP, DVM_KIND, DVM_PLURAL, DVM_VERSION, parseDvmSpec } from "../../src/dvm/types";
import { testClusters } from "../support/clusters";
import { until } from "../support/poll";
import { inCi } from "../support/requirements";

const { source, destination, info } = testClusters();
const ns = `cp-test-${Date.now().toString(36)}`;
const mergePatch = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);
const haveBinaries = existsSync(join(defaultBinDir(), "kube-apiserver"));

interface Dvm {
  metadata: { name: string; namespace: string; resourceVersion: string; generation: number };
  spec: Record<string, unknown>;
  status?: Record<string, unknown>;
}

function dvmBody(name: string, pvc: Record<string, unknown> = {}, namespace = ns): object {
  return {
    apiVersion: DVM_API_VERSION,
    kind: DVM_KIND,
    metadata: { name, namespace },
    spec: {
      persistentVolumeClaims: [{ name: "data", namespace, targetStorageClass: "standard", targetAccessModes: ["ReadWriteOnce"], ...pvc }],
    },
  };
}

const dvmApi = (kc: KubeConfig) => kc.makeApiClient(CustomObjectsApi);
const dvmRef = (name: string, namespace = ns) => ({ group: DVM_GROUP, version: DVM_VERSION, plural: DVM_PLURAL, namespace, name });
const dvmPath = (namespace = ns) => `/apis/${DVM_GROUP}/${DVM_VERSION}/namespaces/${namespace}/${DVM_PLURAL}`;

async function createDvm(kc: KubeConfig, name: string, namespace = ns): Promise<Dvm> {
  const { name: _n, ...ref } = dvmRef(name, namespace);
  return (await dvmApi(kc).createNamespacedCustomObject({ ...ref, body: dvmBody(name, {}, namespace) })) as Dvm;
}

interface WatchEvent {
  type: string;
  object: { metadata?: { name?: string; resourceVersion?: string }; code?: number; reason?: string; message?: string };
}

/** Runs one watch until the server ends it (timeoutSeconds) or `until` holds; returns its events. */
async function watchEvents(
  kc: KubeConfig,
  path: string,
  params: Record<string, string | number | boolean | undefined>,
  until: (events: WatchEvent[]) => boolean = () => false,
): Promise<WatchEvent[]> {
  const events: WatchEvent[] = [];
  await new Promise<void>((resolve, reject) => {
    let abort: AbortController | undefined;
    let finished = false;
    const finish = (err?: unknown) => {
      if (finished) return;
      finished = true;
      abort?.abort();
      if (err) reject(err instanceof Error ? err : new Error(String(err)));
      else resolve();
    };
    new Watch(kc)
      .watch(
        path,
        params,
        (type, object) => {
          events.push({ type, object });
          if (until(events)) finish();
        },
        (err) => finish(err && (err as Error).name !== "AbortError" ? err : undefined),
      )
      .then((ac) => {
        abort = ac;
        if (finished) ac.abort();
      }, finish);
  });
  return events;
}

/** Creates a pod and returns the phases it goes through until `final` (or the timeout). */
async function podPhases(kc: KubeConfig, pod: V1Pod, final: string[], timeoutSeconds = 30): Promise<{ phases: string[]; last: V1Pod }> {
  const core = kc.makeApiClient(CoreV1Api);
  const created = await core.createNamespacedPod({ namespace: ns, body: pod });
  const phases = [created.status?.phase ?? "Pending"];
  let last = created;
  await watchEvents(
    kc,
    `/api/v1/namespaces/${ns}/pods`,
    { fieldSelector: `metadata.name=${pod.metadata!.name}`, resourceVersion: created.metadata!.resourceVersion, timeoutSeconds },
    (events) => {
      last = events.at(-1)!.object as V1Pod;
      const phase = last.status?.phase;
      if (phase && phase !== phases.at(-1)) phases.push(phase);
      return phase !== undefined && final.includes(phase);
    },
  );
  return { phases, last };
}

function pod(name: string, spec: Partial<NonNullable<V1Pod["spec"]>> = {}, annotations: Record<string, string> = {}): V1Pod {
  return {
    metadata: { name, namespace: ns, annotations },
    spec: { restartPolicy: "Never", containers: [{ name: "main", image: "registry.invalid/transfer:latest" }], ...spec },
  };
}

function expectGone(pid: number): void {
  expect(() => process.kill(pid, 0), `pid ${pid} still alive`).toThrow(expect.objectContaining({ code: "ESRCH" }));
}

beforeAll(async () => {
  await source.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: ns } } });
});

afterAll(async () => {
  // Without a controller-manager the namespace stays Terminating; on a real cluster it goes away.
  await source
    .makeApiClient(CoreV1Api)
    .deleteNamespace({ name: ns })
    .catch(() => undefined);
});

describe("optimistic concurrency and generation (DVM CRD)", () => {
  it("refuses a status patch carrying a stale resourceVersion with 409", async () => {
    const api = dvmApi(source);
    const created = await createDvm(source, "stale-rv");
    const staleRv = created.metadata.resourceVersion;
    await api.patchNamespacedCustomObjectStatus(
      { ...dvmRef("stale-rv"), body: { metadata: { resourceVersion: staleRv }, status: { phase: "Started" } } },
      mergePatch,
    );
    const refused = await api
      .patchNamespacedCustomObjectStatus({ ...dvmRef("stale-rv"), body: { metadata: { resourceVersion: staleRv }, status: { phase: "Prepare" } } }, mergePatch)
      .then(
        () => undefined,
        (err: unknown) => err,
      );
    expect(refused).toMatchObject({ code: 409 });
    const now = (await api.getNamespacedCustomObject(dvmRef("stale-rv"))) as Dvm;
    expect(now.status?.phase).toBe("Started");
  });

  it("keeps metadata.generation on a status change and refuses a spec change (the spec is immutable)", async () => {
    const api = dvmApi(source);
    const created = await createDvm(source, "generation");
    expect(created.metadata.generation).toBe(1);

    const afterStatus = (await api.patchNamespacedCustomObjectStatus(
      // The spec part of a status write is ignored by the status subresource.
      {
        ...dvmRef("generation"),
        body: {
          status: { phase: "Started", step: "1/16", rsyncOperations: [{ pvcReference: { name: "data", namespace: ns }, currentAttempt: 1 }] },
          spec: { backOffLimit: 99 },
        },
      },
      mergePatch,
    )) as Dvm;
    expect(afterStatus.metadata.generation).toBe(1);
    expect(afterStatus.spec.backOffLimit).toBeUndefined();
    // Undeclared status fields are kept: the controller owns the status shape.
    expect(afterStatus.status?.rsyncOperations).toEqual([{ pvcReference: { name: "data", namespace: ns }, currentAttempt: 1 }]);

    // The CRD's CEL rule refuses any spec change, so the generation can never move under a migration.
    const specEdit = api.patchNamespacedCustomObject({ ...dvmRef("generation"), body: { spec: { backOffLimit: 3 } } }, mergePatch);
    await expect(specEdit).rejects.toMatchObject({ code: 422 });
    const after = (await api.getNamespacedCustomObject(dvmRef("generation"))) as Dvm;
    expect(after.metadata.generation).toBe(1);
    expect(after.status?.phase).toBe("Started");
  });

  it("shows Phase, Step and Age columns", async () => {
    const table = (await dvmApi(source).getNamespacedCustomObject(
      dvmRef("generation"),
      setHeaderOptions("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io"),
    )) as { columnDefinitions: Array<{ name: string }>; rows: Array<{ cells: unknown[] }> };
    expect(table.columnDefinitions.map((c) => c.name)).toEqual(expect.arrayContaining(["Phase", "Step", "Age"]));
    const cells = table.rows[0]!.cells;
    expect(cells).toContain("Started");
    expect(cells).toContain("1/16");
  });
});

describe("watches", () => {
  it("resumed from a resourceVersion, receive what happened since, with bookmarks", async () => {
    const api = dvmApi(source);
    const first = await createDvm(source, "watch-a");
    const since = first.metadata.resourceVersion;
    await createDvm(source, "watch-b");
    await api.patchNamespacedCustomObjectStatus({ ...dvmRef("watch-a"), body: { status: { phase: "Started" } } }, mergePatch);
    await api.deleteNamespacedCustomObject(dvmRef("watch-b"));

    // A change elsewhere (another namespace) that this watch filters out: the bookmark reports progress
    // past it without an event, which is what lets a watcher resume close to "now".
    const elsewhere = `${ns}-other`;
    await source.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: elsewhere } } });
    let unrelatedRv = 0;
    setTimeout(() => {
      void createDvm(source, "unrelated", elsewhere).then((d) => (unrelatedRv = Number(d.metadata.resourceVersion)));
    }, 500);

    // The apiserver sends a bookmark 2 s before the watch's own timeout (and about once a minute).
    const events = await watchEvents(source, dvmPath(), { resourceVersion: since, allowWatchBookmarks: true, timeoutSeconds: 5 });
    const changes = events.filter((e) => e.type !== "BOOKMARK").map((e) => `${e.type} ${e.object.metadata?.name}`);
    expect(changes).toEqual(["ADDED watch-b", "MODIFIED watch-a", "DELETED watch-b"]);
    const bookmarks = events.filter((e) => e.type === "BOOKMARK");
    expect(bookmarks.length).toBeGreaterThan(0);
    expect(unrelatedRv).toBeGreaterThan(0);
    expect(Number(bookmarks.at(-1)!.object.metadata?.resourceVersion)).toBeGreaterThanOrEqual(unrelatedRv);
    await source
      .makeApiClient(CoreV1Api)
      .deleteNamespace({ name: elsewhere })
      .catch(() => undefined);
  });

  it("answers 410 Gone for a resourceVersion that is too old", async () => {
    if (!haveBinaries) {
      // Against existing clusters without the local binaries there is no etcd to compact: this checks
      // the error that says how to get them instead (never in CI, where they are built).
      expect(inCi(), "the control-plane binaries are missing in CI").toBe(false);
      console.warn("[partly skipped] no control-plane binaries: checking only that starting one says how to build them");
      expect(info.local).toBe(false);
      await expect(startControlPlane({ name: "gone" })).rejects.toThrow(/build\.sh.*KUBECONFIG/s);
      return;
    }
    // Its own control plane: restarting the shared apiservers would cut every other test's watches.
    const plane = await startControlPlane({ name: "gone", withKwok: false });
    try {
      const kc = plane.kubeConfig();
      const old = await createDvm(kc, "old", "default");
      await createDvm(kc, "newer", "default");
      const compactedAt = await plane.compactEtcd();
      expect(compactedAt).toBeGreaterThan(Number(old.metadata.resourceVersion));

      // Reads that reach etcd at a compacted revision: 410 at once.
      // Watches are served from the apiserver's watch cache, which keeps its own window of history; a
      // restart (as in a real rollout) starts it again from the current revision.
      await plane.restartApiServer();
      const listed = await dvmApi(kc)
        .listNamespacedCustomObject({ ...dvmRef("", "default"), resourceVersion: old.metadata.resourceVersion, resourceVersionMatch: "Exact" })
        .then(
          () => undefined,
          (err: unknown) => err,
        );
      expect(listed).toMatchObject({ code: 410 });

      const events = await watchEvents(kc, dvmPath("default"), { resourceVersion: old.metadata.resourceVersion, allowWatchBookmarks: true, timeoutSeconds: 5 });
      expect(events).toHaveLength(1);
      expect(events[0]).toMatchObject({ type: "ERROR", object: { code: 410, reason: "Expired" } });
      expect(events[0]!.object.message).toMatch(/too old resource version/);
    } finally {
      await plane.stop();
    }
  });
});

describe("pods on the kwok node", () => {
  const core = () => source.makeApiClient(CoreV1Api);
  const nodeName = info.source.nodeName ?? "kwok-node";

  it("go Running, then Succeeded (restartPolicy Never)", async () => {
    const { phases, last } = await podPhases(source, pod("succeeds", { nodeName }), ["Succeeded", "Failed"]);
    expect(phases).toEqual(["Pending", "Running", "Succeeded"]);
    expect(last.status?.containerStatuses?.[0]?.state?.terminated).toMatchObject({ exitCode: 0, reason: "Completed" });
  });

  it("go Failed with a non-zero exit code when annotated dvm.test/fail", async () => {
    const { phases, last } = await podPhases(
      source,
      pod("fails", { nodeName }, { "dvm.test/fail": "true", "dvm.test/fail-message": "rsync error: some files could not be transferred (code 23)" }),
      ["Succeeded", "Failed"],
    );
    expect(phases).toEqual(["Pending", "Running", "Failed"]);
    expect(last.status?.containerStatuses?.[0]?.state?.terminated).toMatchObject({
      exitCode: 1,
      reason: "Error",
      message: "rsync error: some files could not be transferred (code 23)",
    });
  });

  it("are bound to the kwok node by the harness binder when created without nodeName", async () => {
    const { phases, last } = await podPhases(source, pod("unscheduled"), ["Succeeded", "Failed"]);
    expect(last.spec?.nodeName).toBe(nodeName);
    expect(phases).toEqual(["Pending", "Running", "Succeeded"]);
  });

  it("stay Running with restartPolicy Always, and disappear when deleted", async () => {
    const { phases } = await podPhases(source, pod("server", { restartPolicy: "Always" }), ["Running"]);
    expect(phases).toEqual(["Pending", "Running"]);
    await new Promise((r) => setTimeout(r, 2_500)); // longer than the completion delay
    expect((await core().readNamespacedPod({ name: "server", namespace: ns })).status?.phase).toBe("Running");

    await core().deleteNamespacedPod({ name: "server", namespace: ns });
    const gone = await until(
      "the deleted pod to be gone",
      () =>
        core()
          .readNamespacedPod({ name: "server", namespace: ns })
          .then(
            () => false,
            (err: unknown) => (err as { code?: number }).code === 404,
          ),
      (yes) => yes,
      { timeoutMs: 20_000, intervalMs: 200 },
    );
    expect(gone).toBe(true);
  });
});

describe("DVM validation by the API server", () => {
  it("serves the CRDs exactly as written in infra/deploy/crds", async () => {
    const raw = source.makeApiClient(CustomObjectsApi);
    for (const crd of readCrds(DEFAULT_CRD_DIR)) {
      const served = (await raw.getClusterCustomObject({
        group: "apiextensions.k8s.io",
        version: "v1",
        plural: "customresourcedefinitions",
        name: crd.metadata!.name!,
      })) as V1CustomResourceDefinition;
      expect(served.spec.versions).toEqual(crd.spec.versions);
      expect(served.spec.names).toMatchObject(crd.spec.names);
    }
  });

  it("rejects a DVM missing targetStorageClass, naming the field", async () => {
    const { name: _n, ...ref } = dvmRef("invalid");
    const body = dvmBody("invalid") as { spec: { persistentVolumeClaims: Array<Record<string, unknown>> } };
    delete body.spec.persistentVolumeClaims[0]!.targetStorageClass;
    const err = await dvmApi(source)
      .createNamespacedCustomObject({ ...ref, body })
      .then(
        () => undefined,
        (e: unknown) => e as { code: number; body: string },
      );
    expect(err?.code).toBe(422);
    expect(String(err?.body)).toContain("spec.persistentVolumeClaims[0].targetStorageClass: Required value");
  });

  it("rejects values outside the enums and minimums the controller checks", async () => {
    const { name: _n, ...ref } = dvmRef("bad-values");
    const body = dvmBody("bad-values", { targetAccessModes: ["ReadWriteSometimes"] }) as { spec: Record<string, unknown> };
    body.spec.backOffLimit = -1;
    const err = await dvmApi(source)
      .createNamespacedCustomObject({ ...ref, body })
      .then(
        () => undefined,
        (e: unknown) => e as { code: number; body: string },
      );
    expect(err?.code).toBe(422);
    expect(String(err?.body)).toContain("spec.persistentVolumeClaims[0].targetAccessModes[0]");
    expect(String(err?.body)).toContain("spec.backOffLimit");
  });

  it("accepts what the controller accepts, defaulting kubeconfigSecretRef.key", async () => {
    const { name: _n, ...ref } = dvmRef("with-clusters");
    const body = dvmBody("with-clusters", { verify: true, targetVolumeMode: "Block" }) as { spec: Record<string, unknown> };
    Object.assign(body.spec, {
      sourceCluster: { kubeconfigSecretRef: { name: "source-cluster" } },
      migrationType: "CutOver",
      endpointType: "NodePort",
    });
    const created = (await dvmApi(source).createNamespacedCustomObject({ ...ref, body })) as Dvm;
    expect(created.spec.sourceCluster).toEqual({ kubeconfigSecretRef: { name: "source-cluster", key: "kubeconfig" } });
    expect(parseDvmSpec(created.spec)).toMatchObject({ ok: true });
  });
});

describe("two control planes", () => {
  it("the source and destination clusters are separate API servers (unless one existing cluster is both)", async () => {
    const sameServer = source.getCurrentCluster()?.server === destination.getCurrentCluster()?.server;
    const onDestination = await destination
      .makeApiClient(CoreV1Api)
      .readNamespace({ name: ns })
      .then(
        () => true,
        (err: unknown) => ((err as { code?: number }).code === 404 ? false : Promise.reject(err)),
      );
    if (sameServer) {
      // Allowed for existing clusters only (a migration between namespaces of one cluster).
      expect(info.local).toBe(false);
      expect(onDestination).toBe(true);
    } else {
      expect(onDestination).toBe(false);
    }
  });

  it("run at once and stop leaving no process behind", async () => {
    if (!haveBinaries) {
      expect(inCi(), "the control-plane binaries are missing in CI").toBe(false);
      console.warn("[partly skipped] no control-plane binaries: checking only that starting one says how to build them");
      expect(info.local).toBe(false);
      await expect(startControlPlane({ name: "twin" })).rejects.toThrow(/build\.sh.*KUBECONFIG/s);
      return;
    }
    const started = await Promise.allSettled([startControlPlane({ name: "twin-a" }), startControlPlane({ name: "twin-b" })]);
    const planes = started.flatMap((r) => (r.status === "fulfilled" ? [r.value] : []));
    try {
      expect(planes).toHaveLength(2);
      const [a, b] = planes as [ControlPlane, ControlPlane];
      expect(a.server).not.toBe(b.server);
      await a
        .kubeConfig()
        .makeApiClient(CoreV1Api)
        .createNamespace({ body: { metadata: { name: "only-on-a" } } });
      const onB = await b
        .kubeConfig()
        .makeApiClient(CoreV1Api)
        .readNamespace({ name: "only-on-a" })
        .then(
          () => true,
          () => false,
        );
      expect(onB).toBe(false);
      for (const p of planes) {
        const nodes = await p.kubeConfig().makeApiClient(CoreV1Api).listNode();
        expect(nodes.items.map((n) => n.metadata?.name)).toEqual([p.nodeName]);
      }

      const pids = planes.flatMap((p) => p.processes().map((c) => c.pid));
      expect(pids).toHaveLength(8); // etcd, kube-apiserver, kwok and the reaper, twice
      await Promise.all(planes.map((p) => p.stop()));
      for (const pid of pids) expectGone(pid);
      for (const p of planes) expect(existsSync(p.kubeconfigPath)).toBe(false);
    } finally {
      await Promise.all(planes.map((p) => p.stop()));
    }
  });
});
