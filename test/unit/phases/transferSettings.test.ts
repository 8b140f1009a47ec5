/** spec.transfer in the phases: how many client pods run at once, and what reaches rsync and the pods. */

import type { V1Container } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { KINDS, type PodObject } from "../../../src/kube/objects";
import { createRsyncEndpoint } from "../../../src/phases/endpoint";
import { clientPodName, transferNames } from "../../../src/phases/names";
import { createPVProgressCRs } from "../../../src/phases/progressRecords";
import { runRsyncOperations } from "../../../src/phases/rsyncOperations";
import { createRsyncTransferPods } from "../../../src/phases/serverPods";
import type { FakeCluster } from "../../support/fakeCluster";
import { fakeContext } from "../../support/phaseContext";

const claims = (n: number) =>
  Array.from({ length: n }, (_, i) => ({ name: `pvc-${i}`, namespace: "shop", targetStorageClass: "fast", targetAccessModes: ["ReadWriteOnce"] }));

async function ready(spec: unknown) {
  const setup = fakeContext(spec);
  await createRsyncEndpoint(setup.ctx);
  setup.destination.mutate(
    { ...KINDS.Service, namespace: "shop", name: transferNames(setup.ctx.dvm).endpointService },
    (svc) => ((svc.spec as Record<string, unknown>).clusterIP = "10.0.0.9"),
  );
  await createPVProgressCRs(setup.ctx);
  await createRsyncTransferPods(setup.ctx);
  setPhase(setup.destination, transferNames(setup.ctx.dvm).serverPod, "Running");
  return setup;
}

const setPhase = (cluster: FakeCluster, name: string, phase: string) =>
  cluster.mutate({ ...KINDS.Pod, namespace: "shop", name }, (pod) => (pod.status = { phase }));
const rsyncContainer = (pod: PodObject) => ((pod.spec?.containers ?? []) as V1Container[]).find((c) => c.name === "rsync")!;
const clientPods = async (source: FakeCluster) =>
  (await source.list<PodObject>(KINDS.Pod, "shop", { "dvm.migration.openshift.io/role": "rsync-client" })).map((p) => p.metadata.name);

describe("spec.transfer.maxConcurrentVolumes", () => {
  it("starts no more client pods than allowed, and the next queued volume as soon as one finishes", async () => {
    const { ctx, source, host } = await ready({ persistentVolumeClaims: claims(5), transfer: { maxConcurrentVolumes: 2 } });
    const pod = (i: number) => clientPodName(ctx.dvm, ctx.volumes[i]!, 1);
    const first = await runRsyncOperations(ctx);
    expect(first).toMatchObject({ kind: "wait", reason: expect.stringMatching(/2 of 5 volumes transferring, 3 queued/) });
    expect((await clientPods(source)).sort()).toEqual([pod(0), pod(1)].sort());
    expect(first.kind === "wait" && first.status?.rsyncOperations?.map((o) => o.currentAttempt)).toEqual([1, 1, 0, 0, 0]);
    const records = await host.list(KINDS.DirectVolumeMigrationProgress, ctx.dvm.namespace, {});
    expect(records.map((r) => (r.status as { phase?: string }).phase).sort()).toEqual(["pending", "pending", "queued", "queued", "queued"]);

    // Running pods keep their slots: nothing new starts.
    setPhase(source, pod(0), "Running");
    setPhase(source, pod(1), "Running");
    await runRsyncOperations(ctx);
    expect(await clientPods(source)).toHaveLength(2);

    // One finishes: exactly one more starts, the next in spec order.
    setPhase(source, pod(1), "Succeeded");
    await runRsyncOperations(ctx);
    expect((await clientPods(source)).sort()).toEqual([pod(0), pod(1), pod(2)].sort());

    for (const i of [0, 2]) setPhase(source, pod(i), "Succeeded");
    await runRsyncOperations(ctx);
    for (const i of [3, 4]) setPhase(source, pod(i), "Succeeded");
    expect((await runRsyncOperations(ctx)).kind).toBe("advance");
    expect(source.totalCreations("Pod")).toBe(5);
  });

  it("defaults to the operator's number: a DVM of 50 PVCs starts 5 client pods, not 50", async () => {
    const { ctx, source } = await ready({ persistentVolumeClaims: claims(50) });
    await runRsyncOperations(ctx);
    expect(await clientPods(source)).toHaveLength(5);
    expect(ctx.transfer.maxConcurrentVolumes).toBe(5);
  });
});

describe("spec.transfer on the pods", () => {
  it("gives the rsync containers the DVM's resources and rsync the DVM's options", async () => {
    const resources = { requests: { cpu: "250m", memory: "128Mi" }, limits: { cpu: "1", memory: "256Mi" } };
    const { ctx, source, destination } = await ready({
      persistentVolumeClaims: claims(1),
      transfer: { resources, bandwidthLimitKiBPerSecond: 1024, delete: false, extraOptions: ["--inplace"] },
    });
    await runRsyncOperations(ctx);
    const client = (await source.list<PodObject>(KINDS.Pod, "shop", {}))[0]!;
    const rsync = rsyncContainer(client);
    expect(rsync.resources).toEqual(resources);
    const script = rsync.command!.join(" ");
    expect(script).toContain("--bwlimit=1024");
    expect(script).toContain("--inplace");
    expect(script).not.toContain("--delete");
    const server = (await destination.list<PodObject>(KINDS.Pod, "shop", {}))[0]!;
    expect(rsyncContainer(server).resources).toEqual(resources);
  });
});

describe("the verification report in RunRsyncOperations", () => {
  const STATS = [
    "Number of files: 3 (reg: 2, dir: 1)",
    "Number of regular files transferred: 2",
    "Total file size: 2,048 bytes",
    "Total transferred file size: 2,048 bytes",
    "Total bytes sent: 2,300",
    "sent 2,300 bytes  received 40 bytes  4,680.00 bytes/sec",
    "total size is 2,048  speedup is 0.88",
  ];

  it("records what the transfer did once it succeeded", async () => {
    const { ctx, source } = await ready({ persistentVolumeClaims: claims(1) });
    await runRsyncOperations(ctx);
    const pod = clientPodName(ctx.dvm, ctx.volumes[0]!, 1);
    source.logs.set(`shop/${pod}`, ["a", "b", ...STATS].join("\n"));
    setPhase(source, pod, "Succeeded");
    const done = await runRsyncOperations(ctx);
    expect(done.kind === "advance" && done.status?.rsyncOperations?.[0]).toMatchObject({
      bytesTransferred: 2_300,
      totalBytes: 2_048,
      percent: 100,
      verification: { filesTransferred: 2, filesSkipped: 0, bytesTransferred: 2_300, totalBytes: 2_048, checksumVerified: false, checksumMismatches: 0 },
    });
    expect(done.kind === "advance" && done.status?.progress).toMatchObject({ bytesTransferred: 2_300, totalBytes: 2_048, percent: 100 });
  });

  it("with verification on, fails the PVC on a checksum mismatch instead of retrying", async () => {
    const { ctx, source } = await ready({ persistentVolumeClaims: claims(1), transfer: { verify: true }, backOffLimit: 5 });
    await runRsyncOperations(ctx);
    const pod = clientPodName(ctx.dvm, ctx.volumes[0]!, 1);
    source.logs.set(
      `shop/${pod}`,
      [
        ...STATS,
        "ERROR: b failed verification -- update discarded.",
        "rsync error: some files/attrs were not transferred (see previous errors) (code 23)",
      ].join("\n"),
    );
    source.mutate({ ...KINDS.Pod, namespace: "shop", name: pod }, (p) => {
      p.status = { phase: "Failed", containerStatuses: [{ name: "rsync", state: { terminated: { exitCode: 23 } } }] };
    });
    const failed = await runRsyncOperations(ctx);
    expect(failed).toMatchObject({ kind: "fail", errors: [expect.stringMatching(/1 file failed rsync's checksum verification/)] });
    expect(failed.kind === "fail" && failed.status?.rsyncOperations?.[0]?.verification).toMatchObject({ checksumVerified: true, checksumMismatches: 1 });
    expect(source.totalCreations("Pod")).toBe(1);
  });
});
