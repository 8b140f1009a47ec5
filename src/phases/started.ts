/**
 * Started: check that the spec can be migrated before anything is created. Every problem is reported at
 * once, each naming its field, and fails the migration (bad input is not retried).
 */
import { KINDS, type PvcObject, refOf } from "../kube/objects";
import { advance, type PhaseBody, type PhaseContext, type PhaseOutcome } from "./types";
import { formatPvc, specField } from "./volumes";

export async function validateMigration(ctx: PhaseContext): Promise<string[]> {
  const { source, destination } = ctx.clusters;
  const rollback = ctx.itinerary === "VolumeMigrationRollback";
  const errors: string[] = [];
  const seenTargets = new Map<string, number>();

  for (const pair of ctx.volumes) {
    const target = formatPvc(pair.to);
    const previous = seenTargets.get(target);
    if (previous !== undefined) {
      errors.push(`${specField(pair)}: targets ${target}, as spec.persistentVolumeClaims[${previous}] does`);
    }
    seenTargets.set(target, pair.index);

    const from = await source.get<PvcObject>(refOf("PersistentVolumeClaim", pair.from.namespace, pair.from.name));
    if (!from) {
      errors.push(
        `${specField(pair, rollback ? "targetName" : "name")}: PersistentVolumeClaim ${formatPvc(pair.from)} not found on the ${source.name} cluster`,
      );
    } else if (from.spec?.volumeMode === "Block" || pair.targetVolumeMode === "Block") {
      errors.push(`${specField(pair, "targetVolumeMode")}: Block volumes are not supported (filesystem transfer only)`);
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

export const started: PhaseBody = async (ctx): Promise<PhaseOutcome> => {
  const errors = await validateMigration(ctx);
  return errors.length > 0 ? { kind: "fail", errors, category: "Critical" } : advance();
};
