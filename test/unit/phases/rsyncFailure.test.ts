/** RunRsyncOperations with a failure the next attempt would repeat: one attempt, the daemon's reason. */
import { describe, expect, it } from "vitest";
import { KINDS, type PodObject } from "../../../src/kube/objects";
import { createRsyncEndpoint } from "../../../src/phases/endpoint";
import { clientPodName, transferNames } from "../../../src/phases/names";
import { createPVProgressCRs } from "../../../src/phases/progressRecords";
import { runRsyncOperations } from "../../../src/phases/rsyncOperations";
import { createRsyncTransferPods } from "../../../src/phases/serverPods";
import { moduleNameFor } from "../../../src/transfer";
import type { FakeCluster } from "../../support/fakeCluster";
import { fakeContext, TWO_NAMESPACE_SPEC } from "../../support/phaseContext";

const setPhase = (cluster: FakeCluster, namespace: string, name: string, phase: string, extra: Record<string, unknown> = {}) =>
  cluster.mutate({ ...KINDS.Pod, namespace, name }, (pod) => (pod.status = { phase, ...extra }));

/** One volume (shop/db), default backOffLimit, up to a Running server pod and attempt 1 created. */
async function firstAttempt(spec: Record<string, unknown> = {}) {
  const setup = fakeContext({ persistentVolumeClaims: [TWO_NAMESPACE_SPEC.persistentVolumeClaims[0]], ...spec });
  await createRsyncEndpoint(setup.ctx);
  await createPVProgressCRs(setup.ctx);
  await createRsyncTransferPods(setup.ctx);
  setPhase(setup.destination, "shop", transferNames(setup.ctx.dvm).serverPod, "Running");
  await runRsyncOperations(setup.ctx);
  return { ...setup, client: clientPodName(setup.ctx.dvm, setup.ctx.volumes[0]!, 1) };
}

const failedWith = (exitCode: number, message: string) => ({ containerStatuses: [{ name: "rsync", state: { terminated: { exitCode, message } } }] });
const CHDIR_REFUSED = "@ERROR: chdir failed\nrsync error: error starting client-server protocol (code 5) at main.c(1954) [sender=3.5.0]";

describe("RunRsyncOperations and a failure that cannot change", () => {
  it("ends after attempt 1 (of the default 20) with the daemon's reason and the fields that change the identity", async () => {
    const { ctx, source, destination, client } = await firstAttempt();
    const module = moduleNameFor(ctx.volumes[0]!.to);
    destination.logs.set(
      `shop/${transferNames(ctx.dvm).serverPod}`,
      [
        `2026/12/03 08:01:24 [31] connect from UNDETERMINED (127.0.0.1)`,
        `2026/12/03 08:01:24 [31] rsync allowed access on module ${module} from UNDETERMINED (127.0.0.1)`,
        `2026/12/03 08:01:24 [31] rsync: [Receiver] chdir /mnt/${module} failed: Permission denied (13)`,
      ].join("\n"),
    );
    setPhase(source, "shop", client, "Failed", failedWith(5, CHDIR_REFUSED));
    const failed = await runRsyncOperations(ctx);
    expect(failed.kind).toBe("fail");
    const [error] = failed.kind === "fail" ? failed.errors : [];
    expect(error).toContain("spec.persistentVolumeClaims[0]: rsync of shop/db to shop/db failed after 1 attempt: exit code 5: @ERROR: chdir failed");
    expect(error).toContain("not retried: rsync exit code 5: the daemon refused the connection (@ERROR: chdir failed)");
    expect(error).toContain(`the rsync daemon said: rsync: [Receiver] chdir /mnt/${module} failed: Permission denied (13)`);
    expect(error).toContain("set spec.transferIdentity");
    expect(source.totalCreations("Pod")).toBe(1);
  });

  it("still retries a code 5 without a daemon refusal (the tunnel closed before the greeting)", async () => {
    const { ctx, source, client } = await firstAttempt();
    setPhase(
      source,
      "shop",
      client,
      "Failed",
      failedWith(5, "rsync: did not see server greeting\nrsync error: error starting client-server protocol (code 5)"),
    );
    expect(await runRsyncOperations(ctx)).toMatchObject({ kind: "wait", status: { rsyncOperations: [{ currentAttempt: 2 }] } });
  });
});

describe("RunRsyncOperations and a client pod lost with its node", () => {
  const evicted = (cluster: FakeCluster, name: string) =>
    cluster.mutate({ ...KINDS.Pod, namespace: "shop", name }, (object) => {
      const pod = object as PodObject;
      pod.metadata.deletionTimestamp = "2026-12-03T15:00:00Z";
      pod.spec = { ...pod.spec, nodeName: "source-node-2" };
      pod.status = {
        phase: "Running",
        conditions: [{ type: "DisruptionTarget", status: "True", reason: "DeletionByTaintManager", message: "Taint manager: deleting due to NoExecute taint" }],
      };
    });

  it("does not wait for a client pod that is being deleted before it finished: the next attempt starts, with the reason", async () => {
    const { ctx, source, client } = await firstAttempt();
    evicted(source, client);
    const next = await runRsyncOperations(ctx);
    expect(next).toMatchObject({ kind: "wait", status: { rsyncOperations: [{ currentAttempt: 2 }] } });
    expect(await source.get({ ...KINDS.Pod, namespace: "shop", name: clientPodName(ctx.dvm, ctx.volumes[0]!, 2) })).toBeDefined();
  });

  it("fails the volume naming the node and the eviction once the lost attempt was the last one", async () => {
    const { ctx, source, client } = await firstAttempt({ backOffLimit: 1 });
    evicted(source, client);
    const failed = await runRsyncOperations(ctx);
    expect(failed.kind).toBe("fail");
    const [error] = failed.kind === "fail" ? failed.errors : [];
    expect(error).toContain(
      `failed after 1 attempt: the rsync client pod ${client} on node source-node-2 was deleted before it finished (DeletionByTaintManager: Taint manager: deleting due to NoExecute taint)`,
    );
  });
});

describe("RunRsyncOperations and an unprivileged copy onto a volume it does not own", () => {
  const ROOT_TIMES = 'rsync: [generator] failed to set times on "." (in pvc-e41254b3c959a53b): Operation not permitted (1)';
  const CODE_23 = "rsync error: some files/attrs were not transferred (see previous errors) (code 23) at main.c(1394) [sender=3.5.0]";

  it("counts a code 23 about the root folder's own times only as copied, with a Warn condition naming the PVC and the fields", async () => {
    const { ctx, source, client } = await firstAttempt();
    setPhase(source, "shop", client, "Failed", failedWith(23, `${ROOT_TIMES}\n${CODE_23}`));
    const done = await runRsyncOperations(ctx);
    expect(done).toMatchObject({
      kind: "advance",
      status: { rsyncOperations: [{ currentAttempt: 1, succeeded: true }] },
      warnings: [{ type: "RsyncRootFolderAttributesNotSet", category: "Warn", durable: true }],
    });
    const [warning] = done.kind === "advance" ? (done.warnings ?? []) : [];
    expect(warning?.message).toContain("shop/db to shop/db");
    expect(warning?.message).toContain("Set spec.transferIdentity");
    expect(source.totalCreations("Pod")).toBe(1);
  });

  it("still fails a code 23 with any other error beside it", async () => {
    const { ctx, source, client } = await firstAttempt();
    setPhase(
      source,
      "shop",
      client,
      "Failed",
      failedWith(23, `${ROOT_TIMES}\nrsync: [sender] send_files failed to open "/mnt/source/key": Permission denied (13)\n${CODE_23}`),
    );
    expect((await runRsyncOperations(ctx)).kind).toBe("fail");
  });

  it("names how many source files and which the transfer pods' user may not read, and the fields to set before the daemon's lines", async () => {
    const { ctx, source, destination, client } = await firstAttempt();
    const denied = ["a", "b", "c", "d/e", "f"].map((n) => `rsync: [sender] send_files failed to open "/mnt/source/${n}": Permission denied (13)`);
    source.logs.set(`shop/${client}`, [...denied, CODE_23].join("\n"));
    const module = moduleNameFor(ctx.volumes[0]!.to);
    destination.logs.set(
      `shop/${transferNames(ctx.dvm).serverPod}`,
      [
        `2026/12/03 08:01:24 [31] rsync allowed access on module ${module} from UNDETERMINED (127.0.0.1)`,
        `2026/12/03 08:01:25 [31] rsync: [generator] failed to set times on "." (in ${module}): Operation not permitted (1)`,
      ].join("\n"),
    );
    setPhase(source, "shop", client, "Failed", failedWith(23, [...denied.slice(-2), CODE_23].join("\n")));
    const failed = await runRsyncOperations(ctx);
    const [error] = failed.kind === "fail" ? failed.errors : [];
    expect(error).toContain(
      `failed after 1 attempt: exit code 23: 5 source files the transfer pods' user may not read: "a", "b", "c" and 2 more; not retried: rsync exit code 23 with only permission errors`,
    );
    expect(error!.indexOf("set spec.transferIdentity")).toBeLessThan(error!.indexOf("the rsync daemon said"));
  });
});
