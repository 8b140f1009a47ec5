/**
 * CreatePVProgressCRs: one DirectVolumeMigrationProgress per volume on the host, owned by the DVM, where
 * RunRsyncOperations records each attempt's progress. Names are deterministic, so a repeat adopts them.
 */
import { LABEL } from "../contracts/labels";
import { DVM_API_VERSION, DVM_KIND } from "../dvm/types";
import { KINDS, type KubeObject } from "../kube/objects";
import { ownerLabels, progressName } from "./names";
import { advance, type PhaseBody, type PhaseContext } from "./types";
import type { VolumePair } from "./volumes";

export function progressRecord(ctx: Pick<PhaseContext, "dvm">, pair: VolumePair): KubeObject {
  return {
    ...KINDS.DirectVolumeMigrationProgress,
    metadata: {
      name: progressName(ctx.dvm, pair),
      namespace: ctx.dvm.namespace,
      labels: { ...ownerLabels(ctx.dvm), [LABEL.volume]: pair.id },
      ownerReferences: [{ apiVersion: DVM_API_VERSION, kind: DVM_KIND, name: ctx.dvm.name, uid: ctx.dvm.uid, controller: true, blockOwnerDeletion: true }],
    },
    spec: {
      podNamespace: pair.from.namespace,
      podSelector: { [LABEL.dvmUid]: ctx.dvm.uid, [LABEL.volume]: pair.id },
      pvcName: pair.from.name,
      pvcNamespace: pair.from.namespace,
    },
  };
}

export const createPVProgressCRs: PhaseBody = async (ctx) => {
  for (const pair of ctx.volumes) await ctx.clusters.host.ensure(progressRecord(ctx, pair));
  return advance();
};
