/**
 * Started: check that the spec can be migrated before anything is created. Every problem is reported at
 * once, each naming its field, and fails the migration (bad input is not retried).
 */
import { type Selection, selectPvcs } from "../dvm/selection";
import { KINDS, type PvcObject, refOf } from "../kube/objects";
import { advance, type PhaseBody, type PhaseContext, type PhaseOutcome, type StatusUpdate } from "./types";
import { formatPvc, specField, type VolumePair, volumePairs } from "./volumes";

export async function validateMigration(ctx: PhaseContext): Promise<string[]> {
  const { source, destination } = ctx.clusters;
  const rollback = ctx.itinerary === "VolumeMigrationRollback";
  const errors: string[] = [];
  const seenTargets = new Map<string, VolumePair>();

  for (const pair of ctx.volumes) {
    const target = formatPvc(pair.to);
    const previous = seenTargets.get(target);
    if (previous !== undefined) {
      errors.push(`${specField(pair)}: targets ${target}, as ${specField(previous)} does`);
    }
    seenTargets.set(target, pair);

    const from = await source.get<PvcObject>(refOf("PersistentVolumeClaim", pair.from.namespace, pair.from.name));
    if (!from) {
      errors.push(
        `${specField(pair, rollback ? "targetName" : "name")}: PersistentVolumeClaim ${formatPvc(pair.from)} not found on the ${source.name} cluster`,
      );
    } else {
      errors.push(...volumeModeProblems(ctx, pair, from.spec?.volumeMode === "Block" ? "Block" : "Filesystem"));
    }

    if (rollback) {
      const to = await destination.get(refOf("PersistentVolumeClaim", pair.to.namespace, pair.to.name));
      if (!to)
        errors.push(`${specField(pair, "name")}: PersistentVolumeClaim ${formatPvc(pair.to)} to roll back into not found on the ${destination.name} cluster`);
    } else {
      const storageClass = await destination.get({ ...KINDS.StorageClass, name: pair.targetStorageClass });
      if (!storageClass) {
        errors.push(`${specField(pair, "targetStorageClass")}: StorageClass "${pair.targetStorageClass}" not found on the ${destination.name} cluster`);
      }
    }
  }

  if (ctx.spec.endpointType === "Route" && !(await destination.serves(KINDS.Route))) {
    errors.push(`spec.endpointType: Route was requested but the ${destination.name} cluster does not serve route.openshift.io/v1 Routes`);
  }
  return errors;
}

/**
 * A volume keeps its mode: rsync copies files into a file system, or a device's content into a device
 * (--copy-devices / --write-devices), never one into the other. A Block transfer runs as root: a device
 * node in a pod belongs to root unless the container runtime hands it to the pod's user.
 */
function volumeModeProblems(ctx: PhaseContext, pair: VolumePair, sourceMode: "Filesystem" | "Block"): string[] {
  const problems: string[] = [];
  const target = pair.targetVolumeMode ?? sourceMode;
  if (target !== sourceMode)
    problems.push(
      `${specField(pair, "targetVolumeMode")}: ${formatPvc(pair.from)} has volumeMode ${sourceMode}; a migration cannot change it to ${target} (create the destination as ${sourceMode})`,
    );
  if (sourceMode === "Block" && ctx.spec.runAsRoot !== true)
    problems.push(`spec.runAsRoot: must be true to move the Block volume ${formatPvc(pair.from)} (${specField(pair)}): its device node belongs to root`);
  return problems;
}

/**
 * What spec.persistentVolumeClaimSelector selects, read once: a selection already in the status (this
 * phase ran before and recorded it) is kept as it is, never read again from the cluster. The PVCs are
 * listed where the original sources live: on a Rollback, the (swapped) destination.
 */
async function selectionOf(ctx: PhaseContext): Promise<Selection | undefined> {
  const selector = ctx.spec.persistentVolumeClaimSelector;
  if (!selector) return undefined;
  const recorded = ctx.status.selectedPersistentVolumeClaims;
  if (recorded && recorded.length > 0) return { ok: true, selected: recorded };
  const cluster = ctx.itinerary === "VolumeMigrationRollback" ? ctx.clusters.destination : ctx.clusters.source;
  // matchLabels narrow the list on the server; the whole selector is applied here.
  const pvcs = await cluster.list<PvcObject>(KINDS.PersistentVolumeClaim, selector.namespace, selector.labelSelector?.matchLabels ?? {});
  return selectPvcs(
    selector,
    pvcs.filter((pvc) => !pvc.metadata.deletionTimestamp).map((pvc) => ({ name: pvc.metadata.name, labels: pvc.metadata.labels ?? {} })),
  );
}

/**
 * Expands a selector (recording the set in the status and, with the completion, in the ledger: a
 * repeated Started replays that record instead of selecting again), then checks every volume.
 */
export const started: PhaseBody = async (ctx): Promise<PhaseOutcome> => {
  const selection = await selectionOf(ctx);
  if (selection && !selection.ok) return { kind: "fail", errors: [selection.error], category: "Critical" };
  const status: StatusUpdate | undefined = selection ? { selectedPersistentVolumeClaims: selection.selected } : undefined;
  const checked = status ? { ...ctx, volumes: volumePairs(ctx.spec, status, ctx.itinerary) } : ctx;
  const errors = await validateMigration(checked);
  if (errors.length > 0) return { kind: "fail", errors, category: "Critical", ...(status ? { status } : {}) };
  return advance(status);
};
