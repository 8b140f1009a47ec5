/**
 * Deleting this DVM's transient transfer objects, and waiting until they are gone. Selection is by this
 * DVM's uid plus the transfer label: another migration's objects and the migrated data are never touched.
 * Labels are not proof of ownership (whoever may create objects in a namespace may copy them, and in an
 * admin DVM the uid is visible to tenants on the destination PVC), so:
 *   - only objects under a name this DVM gives its objects (dvm-<short uid>-...) are deleted or waited for;
 *   - each is deleted with its uid as a precondition, so an object that replaced it is left alone;
 *   - an object held by finalizers past FOREIGN_FINALIZER_GRACE_MS after its deletion is not waited for:
 *     the wait ends with a warning that names it, instead of never.
 */
import { LABEL } from "../contracts/labels";
import { CONDITION } from "../dvm/conditions";
import type { Cluster } from "../kube/cluster";
import { KINDS, type KubeObject } from "../kube/objects";
import { definedFields } from "../lib/definedFields";
import { dvmShortId, transferNames, transferSelector } from "./names";
import { releasePvcs } from "./pvcUse";
import { warnWhenWaitingLong } from "./timing";
import { advance, type CleanupScope, type PhaseBody, type PhaseOutcome, wait } from "./types";
import { uniqueNamespaces } from "./volumes";

const TRANSFER_KINDS = [KINDS.Pod, KINDS.Service, KINDS.Secret, KINDS.ConfigMap, KINDS.Route];
/** How long a deleted transfer object's finalizers (none of them the controller's) are waited for. */
export const FOREIGN_FINALIZER_GRACE_MS = 5 * 60_000;

interface Scope {
  cluster: Cluster;
  namespaces: string[];
}

function scopes(ctx: CleanupScope): Scope[] {
  const { source, destination, sameCluster } = ctx.clusters;
  const from = uniqueNamespaces(ctx.volumes.map((v) => v.from));
  const to = uniqueNamespaces(ctx.volumes.map((v) => v.to));
  if (sameCluster) return [{ cluster: destination, namespaces: [...new Set([...from, ...to])].sort() }];
  return [
    { cluster: source, namespaces: from },
    { cluster: destination, namespaces: to },
  ];
}

/** Every transient transfer object of this DVM on the source and destination, with where it lives. */
interface Found {
  cluster: Cluster;
  /** From the query: items of a list response carry no apiVersion/kind of their own. */
  kind: { apiVersion: string; kind: string };
  object: KubeObject;
}

async function transferObjects(ctx: CleanupScope): Promise<Found[]> {
  const found: Found[] = [];
  const ownNamePrefix = `dvm-${dvmShortId(ctx.dvm)}-`;
  for (const { cluster, namespaces } of scopes(ctx)) {
    const kinds = (await cluster.serves(KINDS.Route)) ? TRANSFER_KINDS : TRANSFER_KINDS.filter((k) => k !== KINDS.Route);
    for (const namespace of namespaces) {
      for (const kind of kinds) {
        for (const object of await cluster.list(kind, namespace, transferSelector(ctx.dvm))) {
          if (object.metadata.name.startsWith(ownNamePrefix)) found.push({ cluster, kind, object });
        }
      }
    }
  }
  return found;
}

async function deleteAll(ctx: CleanupScope): Promise<number> {
  let deleted = 0;
  for (const found of await transferObjects(ctx)) {
    if ((await deleteFound(found)) === "deleted") deleted++;
  }
  const names = transferNames(ctx.dvm);
  for (const secret of [names.credentialsSecret, names.pkiSecret]) {
    if ((await ctx.clusters.host.delete({ ...KINDS.Secret, namespace: ctx.dvm.namespace, name: secret })) === "deleted") deleted++;
  }
  return deleted;
}

/** Deletes exactly the object that was listed: one that replaced it under its name stays. */
function deleteFound({ cluster, kind, object }: Found) {
  const ref = definedFields({ ...kind, namespace: object.metadata.namespace, name: object.metadata.name });
  return cluster.delete(ref, object.metadata.uid ? { uid: object.metadata.uid } : {});
}

/** Deleted, and its finalizers have held it for longer than the grace: not the controller's to wait for. */
function heldByForeignFinalizers(object: KubeObject, now: number): boolean {
  const deletedAt = object.metadata.deletionTimestamp ? Date.parse(object.metadata.deletionTimestamp) : NaN;
  return (object.metadata.finalizers?.length ?? 0) > 0 && Number.isFinite(deletedAt) && now - deletedAt > FOREIGN_FINALIZER_GRACE_MS;
}

/** Deletes transfer objects; also progress records when spec.deleteProgressReportingCRs is set. */
export function deleteTransferResources(options: { progressRecords: boolean }): PhaseBody {
  return async (ctx) => {
    await removeTransferResources(ctx, options);
    return advance();
  };
}

/** The body of deleteTransferResources, for a scope outside any phase (a DVM's deletion). */
export async function removeTransferResources(ctx: CleanupScope, options: { progressRecords: boolean }): Promise<void> {
  const deleted = await deleteAll(ctx);
  // The transfer is over (or never ran): the volumes are free for another migration.
  await releasePvcs(ctx);
  if (options.progressRecords && ctx.spec.deleteProgressReportingCRs) {
    for (const record of await ctx.clusters.host.list(KINDS.DirectVolumeMigrationProgress, ctx.dvm.namespace, { [LABEL.dvmUid]: ctx.dvm.uid })) {
      await ctx.clusters.host.delete({ ...KINDS.DirectVolumeMigrationProgress, namespace: ctx.dvm.namespace, name: record.metadata.name });
    }
  }
  ctx.log.info("transfer resources deleted", { deleted });
}

/** Advances once this DVM's transfer objects are gone (a phase body, and a step of a DVM's deletion). */
export async function waitForTransferResourcesGone(ctx: CleanupScope): Promise<PhaseOutcome> {
  const found = await transferObjects(ctx);
  const now = ctx.clock.now();
  const stuck = found.filter(({ object }) => heldByForeignFinalizers(object, now));
  const left = found.filter((f) => !stuck.includes(f));
  // One that appeared under a transfer name after the deletion (not deleting yet) is deleted too.
  for (const f of left) if (!f.object.metadata.deletionTimestamp) await deleteFound(f);
  if (left.length === 0) {
    if (stuck.length === 0) return advance();
    const held = stuck.map(
      ({ kind, object }) => `${kind.kind} ${object.metadata.namespace}/${object.metadata.name} (finalizers ${object.metadata.finalizers!.join(", ")})`,
    );
    ctx.log.warn("transfer objects held by finalizers left behind", { objects: held.slice(0, 10) });
    return {
      kind: "advance",
      warnings: [
        {
          type: CONDITION.RsyncTransferPodsPending,
          status: "True",
          category: "Warn",
          reason: "ResourcesLeftBehind",
          message: `Left behind, held by finalizers the controller does not own for more than ${FOREIGN_FINALIZER_GRACE_MS / 60_000} minutes after deletion: ${held.slice(0, 10).join("; ")}`,
        },
      ],
    };
  }
  const names = left.map(({ kind, object }) => `${kind.kind} ${object.metadata.namespace}/${object.metadata.name}`);
  return wait(`${left.length} transfer resources still terminating`, {
    warnings: warnWhenWaitingLong(ctx, {
      type: CONDITION.RsyncTransferPodsPending,
      reason: "ResourcesTerminating",
      message: `Still terminating: ${names.slice(0, 10).join(", ")}`,
    }),
  });
}
