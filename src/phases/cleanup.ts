/**
 * Deleting this DVM's transient transfer objects, and waiting until they are gone. Selection is by this
 * DVM's uid plus the transfer label: another migration's objects and the migrated data are never touched.
 */
import { CONDITION } from "../dvm/conditions";
import type { Cluster } from "../kube/cluster";
import { KINDS, type KubeObject } from "../kube/objects";
import { LABEL, transferNames, transferSelector } from "./names";
import { releasePvcs } from "./pvcUse";
import { runningSince } from "./timing";
import { advance, type PhaseBody, type PhaseContext, wait } from "./types";
import { uniqueNamespaces } from "./volumes";

const TRANSFER_KINDS = [KINDS.Pod, KINDS.Service, KINDS.Secret, KINDS.ConfigMap, KINDS.Route];
const WARN_AFTER_MS = 3 * 60_000;

interface Scope {
  cluster: Cluster;
  namespaces: string[];
}

function scopes(ctx: PhaseContext): Scope[] {
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

async function transferObjects(ctx: PhaseContext): Promise<Found[]> {
  const found: Found[] = [];
  for (const { cluster, namespaces } of scopes(ctx)) {
    const kinds = (await cluster.serves(KINDS.Route)) ? TRANSFER_KINDS : TRANSFER_KINDS.filter((k) => k !== KINDS.Route);
    for (const namespace of namespaces) {
      for (const kind of kinds) {
        for (const object of await cluster.list(kind, namespace, transferSelector(ctx.dvm))) found.push({ cluster, kind, object });
      }
    }
  }
  return found;
}

async function deleteAll(ctx: PhaseContext): Promise<number> {
  let deleted = 0;
  for (const { cluster, kind, object } of await transferObjects(ctx)) {
    if ((await cluster.delete({ ...kind, namespace: object.metadata.namespace, name: object.metadata.name })) === "deleted") deleted++;
  }
  const names = transferNames(ctx.dvm);
  for (const secret of [names.credentialsSecret, names.pkiSecret]) {
    if ((await ctx.clusters.host.delete({ ...KINDS.Secret, namespace: ctx.dvm.namespace, name: secret })) === "deleted") deleted++;
  }
  return deleted;
}

/** Deletes transfer objects; also progress records when spec.deleteProgressReportingCRs is set. */
export function deleteTransferResources(options: { progressRecords: boolean }): PhaseBody {
  return async (ctx) => {
    const deleted = await deleteAll(ctx);
    // The transfer is over (or never ran): the volumes are free for another migration.
    await releasePvcs(ctx);
    if (options.progressRecords && ctx.spec.deleteProgressReportingCRs) {
      for (const record of await ctx.clusters.host.list(KINDS.DirectVolumeMigrationProgress, ctx.dvm.namespace, { [LABEL.dvmUid]: ctx.dvm.uid })) {
        await ctx.clusters.host.delete({ ...KINDS.DirectVolumeMigrationProgress, namespace: ctx.dvm.namespace, name: record.metadata.name });
      }
    }
    ctx.log.info("transfer resources deleted", { deleted });
    return advance();
  };
}

export const waitForTransferResourcesGone: PhaseBody = async (ctx) => {
  const left = await transferObjects(ctx);
  if (left.length === 0) return advance();
  const names = left.map(({ kind, object }) => `${kind.kind} ${object.metadata.namespace}/${object.metadata.name}`);
  const waited = ctx.clock.now() - runningSince(ctx.status, ctx.clock);
  return wait(`${left.length} transfer resources still terminating`, {
    warnings:
      waited > WARN_AFTER_MS
        ? [
            {
              type: CONDITION.RsyncTransferPodsPending,
              status: "True",
              category: "Warn",
              reason: "ResourcesTerminating",
              message: `Still terminating: ${names.slice(0, 10).join(", ")}`,
            },
          ]
        : [],
  });
};
