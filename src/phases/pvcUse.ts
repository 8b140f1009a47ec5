/**
 * One migration at a time per volume. Before any data moves, a DVM marks every PVC it reads or writes
 * with its identity (annotation IN_USE_BY, written with a resourceVersion guard, so of two DVMs racing
 * for one PVC exactly one wins), and gives the mark back when it cleans up its transfer objects. A PVC
 * marked by another DVM that still runs (it exists with that uid and has not completed) refuses this
 * one, naming the other. A mark whose DVM is gone, was replaced by another of its name, or completed is
 * taken over: a crashed DVM still exists and resumes, so its mark stays; a deleted one frees it.
 */

import type { Cluster } from "../kube/cluster";
import { retryOnConflict } from "../kube/conflictRetry";
import { KubeApiError } from "../kube/errors";
import { type KubeObject, type PvcObject, refOf } from "../kube/objects";
import type { CleanupScope, PhaseContext } from "./types";
import { formatPvc, type PvcName, specField, type VolumePair } from "./volumes";

export const IN_USE_BY = "dvm.migration.openshift.io/in-use-by";

interface Holder {
  namespace: string;
  name: string;
  uid: string;
}

/** The annotation's value: "namespace/name/uid" (neither a namespace nor a name holds "/"). */
export const inUseValue = (dvm: Holder): string => `${dvm.namespace}/${dvm.name}/${dvm.uid}`;

function holderOf(pvc: KubeObject): Holder | undefined {
  const parts = pvc.metadata.annotations?.[IN_USE_BY]?.split("/");
  return parts?.length === 3 ? { namespace: parts[0]!, name: parts[1]!, uid: parts[2]! } : undefined;
}

interface Use {
  pair: VolumePair;
  cluster: Cluster;
  pvc: PvcName;
}

function usesOf(ctx: Pick<PhaseContext, "volumes" | "clusters">, sides: readonly ("source" | "destination")[]): Use[] {
  return ctx.volumes.flatMap((pair) => sides.map((side) => ({ pair, cluster: ctx.clusters[side], pvc: side === "source" ? pair.from : pair.to })));
}

/** The holder still runs: it exists with that uid and has not completed. */
async function stillRuns(ctx: PhaseContext, holder: Holder): Promise<boolean> {
  const dvm = await ctx.clusters.host.get<KubeObject & { status?: { phase?: string } }>(refOf("DirectVolumeMigration", holder.namespace, holder.name));
  return dvm !== undefined && dvm.metadata.uid === holder.uid && dvm.status?.phase !== "Completed";
}

/**
 * Marks the PVCs of `sides` that exist as this DVM's; a PVC that does not exist is skipped (a
 * destination is created with the mark). Returns one error per PVC another running DVM holds.
 */
export async function markPvcsInUse(ctx: PhaseContext, sides: readonly ("source" | "destination")[]): Promise<string[]> {
  const errors: string[] = [];
  const mine = inUseValue(ctx.dvm);
  for (const { pair, cluster, pvc } of usesOf(ctx, sides)) {
    const ref = refOf("PersistentVolumeClaim", pvc.namespace, pvc.name);
    // Someone else wrote the PVC since it was read: read again and decide again.
    await retryOnConflict(async () => {
      const found = await cluster.get<PvcObject>(ref);
      if (!found) return;
      const holder = holderOf(found);
      if (holder?.uid === ctx.dvm.uid) return;
      if (holder && (await stillRuns(ctx, holder))) {
        errors.push(
          `${specField(pair)}: PersistentVolumeClaim ${formatPvc(pvc)} on the ${cluster.name} cluster is in use by DirectVolumeMigration ${holder.namespace}/${holder.name} (uid ${holder.uid}); migrate it once that one has finished or is deleted`,
        );
        return;
      }
      await cluster.patchAnnotations(ref, { [IN_USE_BY]: mine }, found.metadata.resourceVersion ?? "");
      ctx.log.info("PVC marked in use", { pvc: formatPvc(pvc), cluster: cluster.name, ...(holder ? { takenFrom: inUseValue(holder) } : {}) });
    });
  }
  return errors;
}

/** Gives back this DVM's marks (a mark of another DVM is left alone). */
export async function releasePvcs(ctx: CleanupScope): Promise<void> {
  for (const { cluster, pvc } of usesOf(ctx, ["source", "destination"])) {
    const ref = refOf("PersistentVolumeClaim", pvc.namespace, pvc.name);
    await retryOnConflict(async () => {
      const found = await cluster.get(ref);
      if (!found || holderOf(found)?.uid !== ctx.dvm.uid) return;
      try {
        await cluster.patchAnnotations(ref, { [IN_USE_BY]: null }, found.metadata.resourceVersion ?? "");
      } catch (error) {
        if (!(error instanceof KubeApiError && error.isNotFound)) throw error;
      }
    });
  }
}
