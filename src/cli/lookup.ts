/** Finding the DVM a command names, with errors that say where it looked. */
import type { ItineraryName } from "../dvm/itinerary";
import { type DirectVolumeMigration, DVM_GROUP, DVM_PLURAL } from "../dvm/types";
import { toDvm } from "../kube/dvmStore";
import { KubeApiError } from "../kube/errors";
import { KINDS } from "../kube/objects";
import type { CliContext } from "./context";
import { CliError } from "./errors";

const BUSY_RETRIES = 3;

/**
 * Runs a read again when the API server says it is busy (429, 503: e.g. "storage is (re)initializing"
 * right after a CRD changed), as kubectl does; any other error is the answer.
 */
export async function retryWhileBusy<T>(ctx: CliContext, read: () => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await read();
    } catch (error) {
      const busy = error instanceof KubeApiError && (error.statusCode === 429 || error.statusCode === 503);
      if (!busy || attempt >= BUSY_RETRIES) throw error;
      await ctx.io.sleep(300 * (attempt + 1));
    }
  }
}

/** Not found: either no such DVM, or a cluster without the CRD; the message says which. */
async function notFound(ctx: CliContext, namespace: string, name: string): Promise<CliError> {
  const { cluster, server } = ctx.cluster();
  if (!(await cluster.serves(KINDS.DirectVolumeMigration))) {
    return new CliError(
      `the API server at ${server} does not serve ${DVM_PLURAL}.${DVM_GROUP}: install the CRDs (infra/deploy/crds) or pick another --context`,
    );
  }
  return new CliError(
    `DirectVolumeMigration "${name}" not found in namespace "${namespace}": check the name, or pass -n/--namespace (dvm list -n NAMESPACE shows what is there)`,
  );
}

export async function getDvm(ctx: CliContext, name: string): Promise<DirectVolumeMigration> {
  const { store, namespace } = ctx.cluster();
  const dvm = await retryWhileBusy(ctx, () => store.get(namespace, name));
  if (!dvm) throw await retryWhileBusy(ctx, () => notFound(ctx, namespace, name));
  return dvm;
}

export function listDvms(ctx: CliContext, allNamespaces: boolean): Promise<DirectVolumeMigration[]> {
  return retryWhileBusy(ctx, () => listAll(ctx, allNamespaces));
}

async function listAll(ctx: CliContext, allNamespaces: boolean): Promise<DirectVolumeMigration[]> {
  const { cluster, namespace, server } = ctx.cluster();
  if (!(await cluster.serves(KINDS.DirectVolumeMigration))) {
    throw new CliError(`the API server at ${server} does not serve ${DVM_PLURAL}.${DVM_GROUP}: install the CRDs (infra/deploy/crds) or pick another --context`);
  }
  const items = await cluster.list(KINDS.DirectVolumeMigration, allNamespaces ? undefined : namespace, {});
  return items.map(toDvm).sort((a, b) => a.metadata.namespace.localeCompare(b.metadata.namespace) || a.metadata.name.localeCompare(b.metadata.name));
}

/** The forward or rollback itinerary the DVM runs (the failure itinerary is entered from either). */
export function mainItineraryOf(dvm: DirectVolumeMigration): ItineraryName {
  if (dvm.status.itinerary === "VolumeMigration" || dvm.status.itinerary === "VolumeMigrationRollback") return dvm.status.itinerary;
  const migrationType = (dvm.spec as { migrationType?: unknown } | undefined)?.migrationType;
  return migrationType === "Rollback" ? "VolumeMigrationRollback" : "VolumeMigration";
}

export interface LedgerSubject {
  uid: string;
  /** For headings: "namespace/name", or the uid when the DVM was not read. */
  label: string;
  dvm?: DirectVolumeMigration;
}

/** --uid skips the cluster (the DVM may be gone; the ledger keeps its entries for their retention). */
export async function ledgerSubject(ctx: CliContext, name: string | undefined, uid: string | undefined): Promise<LedgerSubject> {
  if (uid) return { uid, label: name ? `${name} (uid ${uid})` : `uid ${uid}` };
  if (!name) throw new CliError("name the DVM (NAME) or pass --uid UID");
  const dvm = await getDvm(ctx, name);
  return { uid: dvm.metadata.uid, label: `${dvm.metadata.namespace}/${dvm.metadata.name}`, dvm };
}
