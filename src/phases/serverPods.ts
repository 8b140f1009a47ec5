/**
 * CreateRsyncTransferPods and WaitForRsyncTransferPodsRunning: rsync server pods (rsync daemon + stunnel
 * server) in each destination namespace, each mounting at most the operator's number of that namespace's
 * destination PVCs (serverGroups.ts).
 */
import { CONDITION } from "../dvm/conditions";
import { type PodObject, refOf } from "../kube/objects";
import { rsyncServerPod } from "../transfer";
import { servedPvcs } from "./blockVolumes";
import { serverPodLabels } from "./endpoint";
import { transferPodSettings } from "./podSettings";
import { describeGroup, type ServerGroup, serverGroups } from "./serverGroups";
import { warnWhenWaitingLong } from "./timing";
import { advance, type PhaseBody, type PhaseContext, wait } from "./types";

export async function serverPodFor(ctx: PhaseContext, group: ServerGroup) {
  return rsyncServerPod({
    name: group.names.serverPod,
    namespace: group.namespace,
    labels: serverPodLabels(ctx, group),
    ...transferPodSettings(ctx),
    configSecretName: group.names.rsyncServerSecret,
    ...(ctx.transfer.resources ? { rsyncResources: ctx.transfer.resources } : {}),
    pvcs: await servedPvcs(ctx, group),
  });
}

export const createRsyncTransferPods: PhaseBody = async (ctx) => {
  for (const group of serverGroups(ctx)) {
    const { created } = await ctx.clusters.destination.ensure(await serverPodFor(ctx, group));
    ctx.log.info(created ? "rsync server pod created" : "rsync server pod exists", { pod: describeGroup(group) });
  }
  return advance();
};

/**
 * "running", or what the server pod of `group` is doing instead. A pod that is gone (evicted, deleted
 * by hand) or has stopped is created again: it is the same deterministic object.
 */
export async function ensureServerPodRunning(ctx: PhaseContext, group: ServerGroup): Promise<"running" | "recreated" | string> {
  const ref = refOf("Pod", group.namespace, group.names.serverPod);
  const pod = await ctx.clusters.destination.get<PodObject>(ref);
  if (pod?.status?.phase === "Failed" || pod?.status?.phase === "Succeeded") {
    await ctx.clusters.destination.delete(ref);
    return `${pod.status.phase}, deleted to be recreated`;
  }
  if (!pod || pod.metadata.deletionTimestamp) {
    if (!pod) await ctx.clusters.destination.ensure(await serverPodFor(ctx, group));
    return pod ? "terminating" : "recreated";
  }
  return pod.status?.phase === "Running" ? "running" : (pod.status?.phase ?? "Pending");
}

export const waitForRsyncTransferPodsRunning: PhaseBody = async (ctx) => {
  const notRunning: string[] = [];
  for (const group of serverGroups(ctx)) {
    const state = await ensureServerPodRunning(ctx, group);
    if (state !== "running") notRunning.push(`${describeGroup(group)} (${state})`);
  }
  if (notRunning.length === 0) return advance();
  return wait(`rsync server pods not running: ${notRunning.join(", ")}`, {
    warnings: warnWhenWaitingLong(ctx, {
      type: CONDITION.RsyncTransferPodsPending,
      reason: "PodsPending",
      message: `rsync server pods not running after 3 minutes: ${notRunning.map((p) => `kubectl describe pod -n ${p.split("/")[0]} ${p.split("/")[1]!.split(" ")[0]}`).join("; ")}`,
    }),
  });
};
