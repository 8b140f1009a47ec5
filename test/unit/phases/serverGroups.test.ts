/**
 * A destination namespace's PVCs split over rsync server pods of at most the operator's size
 * (DVM_TRANSFER_MAX_VOLUMES_PER_SERVER_POD): each pod, its Service and its server Secret have a
 * deterministic name, and each client reaches the pod that mounts its destination PVC.
 */

import { describe, expect, it } from "vitest";
import { LABEL } from "../../../src/contracts/labels";
import { DEFAULT_MIGRATION_POLICY } from "../../../src/dvm/policy";
import { KINDS, type PodObject, type ServiceObject } from "../../../src/kube/objects";
import { createRsyncEndpoint, ensureRsyncEndpointReady } from "../../../src/phases/endpoint";
import { serverGroupNames } from "../../../src/phases/names";
import { serverGroupOf, serverGroups } from "../../../src/phases/serverGroups";
import { createRsyncTransferPods, waitForRsyncTransferPodsRunning } from "../../../src/phases/serverPods";
import { clientSecretName, createRsyncConfig, createStunnelConfig } from "../../../src/phases/transferConfig";
import { fakeContext } from "../../support/phaseContext";

/** Five PVCs into "shop", one into "ops"; at most two per server pod. */
const SPEC = {
  persistentVolumeClaims: [
    ...Array.from({ length: 5 }, (_, i) => ({ name: `data-${i}`, namespace: "shop", targetStorageClass: "fast", targetAccessModes: ["ReadWriteOnce"] })),
    { name: "logs", namespace: "ops", targetStorageClass: "fast", targetAccessModes: ["ReadWriteOnce"] },
  ],
};
const POLICY = { ...DEFAULT_MIGRATION_POLICY, transfer: { ...DEFAULT_MIGRATION_POLICY.transfer, maxVolumesPerServerPod: 2 } };

const decode = (secret: unknown, key: string) => {
  const s = secret as { data?: Record<string, string>; stringData?: Record<string, string> } | undefined;
  return s?.stringData?.[key] ?? (s?.data?.[key] ? Buffer.from(s.data[key]!, "base64").toString() : "");
};
const claims = (pod: PodObject | undefined) =>
  ((pod?.spec as { volumes?: { persistentVolumeClaim?: { claimName: string } }[] })?.volumes ?? []).flatMap((v) =>
    v.persistentVolumeClaim ? [v.persistentVolumeClaim.claimName] : [],
  );

describe("rsync server pods split by DVM_TRANSFER_MAX_VOLUMES_PER_SERVER_POD", () => {
  it("mounts at most that many PVCs per pod, in spec order, under deterministic names", async () => {
    const { ctx, destination } = fakeContext(SPEC, { policy: POLICY });
    expect(serverGroups(ctx).map((g) => [g.namespace, g.index, g.pairs.map((p) => p.to.name)])).toEqual([
      ["ops", 0, ["logs"]],
      ["shop", 0, ["data-0", "data-1"]],
      ["shop", 1, ["data-2", "data-3"]],
      ["shop", 2, ["data-4"]],
    ]);
    await createRsyncTransferPods(ctx);
    // A repeated phase adopts them all.
    await createRsyncTransferPods(ctx);
    expect(destination.totalCreations("Pod")).toBe(4);
    const pods = await destination.list<PodObject>(KINDS.Pod, "shop", {});
    expect(Object.fromEntries(pods.map((p) => [p.metadata.name, claims(p)]))).toEqual({
      [serverGroupNames(ctx.dvm, 0).serverPod]: ["data-0", "data-1"],
      [serverGroupNames(ctx.dvm, 1).serverPod]: ["data-2", "data-3"],
      [serverGroupNames(ctx.dvm, 2).serverPod]: ["data-4"],
    });
    expect(serverGroupNames(ctx.dvm, 2).serverPod).toBe(`${serverGroupNames(ctx.dvm, 0).serverPod}-2`);
    expect(pods.map((p) => p.metadata.labels?.[LABEL.serverGroup]).sort()).toEqual(["0", "1", "2"]);
    expect(await waitForRsyncTransferPodsRunning(ctx)).toMatchObject({ kind: "wait", reason: expect.stringContaining("shop/dvm-") });
  });

  it("gives each pod its own Service and server Secret, and each client the endpoint of its PVC's pod", async () => {
    const { ctx, source, destination } = fakeContext(SPEC, { policy: POLICY });
    await createRsyncEndpoint(ctx);
    expect(await ensureRsyncEndpointReady(ctx)).toEqual({ kind: "advance" });
    const services = await destination.list<ServiceObject>(KINDS.Service, "shop", {});
    expect(services.map((s) => s.spec?.selector?.[LABEL.serverGroup]).sort()).toEqual(["0", "1", "2"]);
    await createRsyncConfig(ctx);
    await createStunnelConfig(ctx);
    for (const group of serverGroups(ctx)) {
      const modules = decode(await destination.get({ ...KINDS.Secret, namespace: group.namespace, name: group.names.rsyncServerSecret }), "rsyncd.conf");
      for (const pair of ctx.volumes) expect(modules.includes(`comment = ${pair.to.namespace}/${pair.to.name}\n`)).toBe(group.pairs.includes(pair));
    }
    for (const pair of ctx.volumes) {
      const group = serverGroupOf(ctx, pair);
      const service = await destination.get<ServiceObject>({ ...KINDS.Service, namespace: group.namespace, name: group.names.endpointService });
      const conf = decode(await source.get({ ...KINDS.Secret, namespace: pair.from.namespace, name: clientSecretName(ctx, pair) }), "stunnel.conf");
      expect(conf).toContain(`connect = ${service!.spec!.clusterIP}:6443`);
    }
  });
});
