/**
 * CreateRsyncTransferPods and WaitForRsyncTransferPodsRunning: one rsync server pod (rsync daemon +
 * stunnel server) per destination namespace, mounting that namespace's destination PVCs.
 */
import { CONDITION } from "../dvm/conditions";
import { type PodObject, refOf } from "../kube/objects";
import { rsyncServerPod } from "../transfer";
import { servedPvcs } from "./blockVolumes";
import { SERVER_ROLE } from "./endpoint";
import { transferLabels, transferNames } from "./names";
import { runningSince } from "./timing";
import { advance, type PhaseBody, type PhaseContext, wait } from "./types";
import { uniqueNamespaces } from "./volumes";

const WARN_AFTER_MS = 3 * 60_000;

export async function serverPodFor(ctx: PhaseContext, namespace: string) {
  const names = transferNames(ctx.dvm);
  return rsyncServerPod({
    name: names.serverPod,
    namespace,
    labels: transferLabels(ctx.dvm, SERVER_ROLE),
    ...(ctx.transfer.podAnnotations ? { annotations: ctx.transfer.podAnnotations } : {}),
    allowedAnnotationKeys: ctx.transfer.allowedPodAnnotationKeys,
    image: ctx.transferImage,
    ...(ctx.spec.transferIdentity ? { identity: ctx.spec.transferIdentity } : {}),
    configSecretName: names.rsyncServerSecret,
    runAsRoot: ctx.spec.runAsRoot ?? false,
    ...(ctx.transfer.resources ? { rsyncResources: ctx.transfer.resources } : {}),
    pvcs: await servedPvcs(ctx, namespace),
  });
}

export const createRsyncTransferPods: PhaseBody = async (ctx) => {
  for (const namespace of uniqueNamespaces(ctx.volumes.map((v) => v.to))) {
    const { created } = await ctx.clusters.destination.ensure(await serverPodFor(ctx, namespace));
    ctx.log.info(created ? "rsync server pod created" : "rsync server pod exists", { namespace });
  }
  return advance();
};

/**
 * "running", or what the server pod of `namespace` is doing instead. A pod that is gone (evicted, deleted
 * by hand) or has stopped is created again: it is the same deterministic object.
 */
export async function ensureServerPodRunning(ctx: PhaseContext, namespace: string): Promise<"running" | "recreated" | string> {
  const ref = refOf("Pod", namespace, transferNames(ctx.dvm).serverPod);
  const pod = await ctx.clusters.destination.get<PodObject>(ref);
  if (pod?.status?.phase === "Failed" || pod?.status?.phase === "Succeeded") {
    await ctx.clusters.destination.delete(ref);
    return `${pod.status.phase}, deleted to be recreated`;
  }
  if (!pod || pod.metadata.deletionTimestamp) {
    if (!pod) await ctx.clusters.destination.ensure(await serverPodFor(ctx, namespace));
    return pod ? "terminating" : "recreated";
  }
  return pod.status?.phase === "Running" ? "running" : (pod.status?.phase ?? "Pending");
}

export const waitForRsyncTransferPodsRunning: PhaseBody = async (ctx) => {
  const names = transferNames(ctx.dvm);
  const notRunning: string[] = [];
  for (const namespace of uniqueNamespaces(ctx.volumes.map((v) => v.to))) {
    const state = await ensureServerPodRunning(ctx, namespace);
    if (state !== "running") notRunning.push(`${namespace}/${names.serverPod} (${state})`);
  }
  if (notRunning.length === 0) return advance();
  const late = ctx.clock.now() - runningSince(ctx.status, ctx.clock) > WARN_AFTER_MS;
  return wait(`rsync server pods not running: ${notRunning.join(", ")}`, {
    warnings: late
      ? [
          {
            type: CONDITION.RsyncTransferPodsPending,
            status: "True",
            category: "Warn",
            reason: "PodsPending",
            message: `rsync server pods not running after 3 minutes: ${notRunning.map((p) => `kubectl describe pod -n ${p.split("/")[0]} ${p.split("/")[1]!.split(" ")[0]}`).join("; ")}`,
          },
        ]
      : [],
  });
};
