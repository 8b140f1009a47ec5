/** CreateDestinationNamespaces: each destination namespace, with the source namespace's labels and annotations. */
import { MigrationInputError } from "../contracts/inputError";
import { KINDS, type NamespaceObject, refOf } from "../kube/objects";
import { ownerLabels } from "./names";
import { advance, type PhaseBody } from "./types";

/** Metadata the API server manages itself; copying it would be refused or misleading. */
const SYSTEM_LABEL = /^kubernetes\.io\/metadata\.name$/;
const SYSTEM_ANNOTATION = /^(kubectl\.kubernetes\.io\/|openshift\.io\/sa\.scc\.)/;

function filtered(values: Record<string, string> | undefined, drop: RegExp): Record<string, string> {
  return Object.fromEntries(Object.entries(values ?? {}).filter(([key]) => !drop.test(key)));
}

export const createDestinationNamespaces: PhaseBody = async (ctx) => {
  const { source, destination } = ctx.clusters;
  const pairsByTarget = new Map<string, string>();
  for (const pair of ctx.volumes) if (!pairsByTarget.has(pair.to.namespace)) pairsByTarget.set(pair.to.namespace, pair.from.namespace);

  for (const [target, from] of pairsByTarget) {
    const original = await source.get<NamespaceObject>(refOf("Namespace", undefined, from));
    const { object, created } = await destination.ensure<NamespaceObject>({
      ...KINDS.Namespace,
      metadata: {
        name: target,
        labels: { ...filtered(original?.metadata.labels, SYSTEM_LABEL), ...ownerLabels(ctx.dvm) },
        annotations: filtered(original?.metadata.annotations, SYSTEM_ANNOTATION),
      },
    });
    if (!created && object.status?.phase === "Terminating") {
      throw new MigrationInputError([`destination namespace ${target} is terminating on the ${destination.name} cluster`]);
    }
    ctx.log.info(created ? "destination namespace created" : "destination namespace exists", { namespace: target });
  }
  return advance();
};
