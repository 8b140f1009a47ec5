/**
 * The collections the relay watches: where they are (watch paths) and how to list them. Every DVM is
 * listed, because the list is the relay's index after a start or an expired resourceVersion; but as a
 * table of the few fields the relay reads, so the memory of a list is a small record per DVM, whatever
 * the DVMs hold. Owned objects (pods, progress records) only need a starting resourceVersion: a limit-1
 * list gives the current one without reading the collection.
 */

import { CoreV1Api, CustomObjectsApi, type KubeConfig } from "@kubernetes/client-node";
import { LABEL } from "../contracts/labels";
import { DVM_GROUP, DVM_PLURAL, DVM_VERSION, DVMP_PLURAL } from "../dvm/types";
import { KubeRest } from "../kube/rest";
import { definedFields } from "../lib/definedFields";
import type { ListResult } from "./listWatch";

/** Only objects a migration created carry the uid label; the selector asks for its presence. */
export const OWNED_SELECTOR = LABEL.dvmUid;
/**
 * Pods: only the transfer pods (uid label and transfer=true). RBAC cannot grant pods by label, so the
 * relay's role still allows listing every pod; the selector is what keeps other pods out of its watch
 * (docs/security.md).
 */
export const TRANSFER_POD_SELECTOR = `${LABEL.dvmUid},${LABEL.transfer}=true`;

/**
 * DVMs per list page. The list asks for a Table of the CRD's relay columns (DVM_TABLE_COLUMNS) without the
 * objects, so a page costs a few hundred bytes per DVM whatever a tenant puts in a DVM (labels and
 * annotations are its creator's, up to etcd's 1.5 MiB): 1,000 DVMs are two requests.
 */
export const DVM_PAGE_SIZE = 500;

/** The Table format of the meta.k8s.io API: rows of the CRD's printer columns (infra/deploy/crds). */
const TABLE_ACCEPT = "application/json;as=Table;v=v1;g=meta.k8s.io";

/** The printer columns the relay reads, by column name: the DVM fields parseObservedDvm reads. */
export const DVM_TABLE_COLUMNS = {
  name: "Name",
  namespace: "Namespace",
  uid: "UID",
  generation: "Generation",
  resourceVersion: "Resource Version",
  deletionTimestamp: "Deletion",
  phase: "Phase",
} as const;

interface TableBody {
  columnDefinitions?: { name?: string }[];
  rows?: { cells?: unknown[] }[];
  metadata?: { resourceVersion?: string; continue?: string };
}

/** Where each relay column sits in the table's rows; a CRD without one of them is named in the error. */
function columnIndexes(table: TableBody): Record<keyof typeof DVM_TABLE_COLUMNS, number> {
  const names = (table.columnDefinitions ?? []).map((column) => column.name);
  const missing = Object.values(DVM_TABLE_COLUMNS).filter((name) => !names.includes(name));
  if (missing.length > 0)
    throw new Error(
      `the DirectVolumeMigration CRD on this cluster lacks the printer column(s) ${missing.map((name) => `"${name}"`).join(", ")} the relay lists by: apply this release's infra/deploy/crds`,
    );
  return Object.fromEntries(Object.entries(DVM_TABLE_COLUMNS).map(([field, name]) => [field, names.indexOf(name)])) as Record<
    keyof typeof DVM_TABLE_COLUMNS,
    number
  >;
}

/** A table row as the part of a DVM it stands for (identity and status.phase). */
function rowProjection(cells: unknown[], at: Record<keyof typeof DVM_TABLE_COLUMNS, number>): unknown {
  const cell = (field: keyof typeof DVM_TABLE_COLUMNS) => {
    const value = cells[at[field]];
    return value === null || value === "" ? undefined : value;
  };
  const metadata = Object.fromEntries(
    (["uid", "namespace", "name", "resourceVersion", "generation", "deletionTimestamp"] as const).flatMap((field) => {
      const value = cell(field);
      return value === undefined ? [] : [[field, value]];
    }),
  );
  const phase = cell("phase");
  return { metadata, status: phase === undefined ? {} : { phase } };
}

interface ListBody {
  items?: unknown[];
  metadata?: { resourceVersion?: string; continue?: string };
}

export function customPath(plural: string, namespace: string | undefined): string {
  return `/apis/${DVM_GROUP}/${DVM_VERSION}${namespace ? `/namespaces/${encodeURIComponent(namespace)}` : ""}/${plural}`;
}

export function dvmPath(namespace: string | undefined): string {
  return customPath(DVM_PLURAL, namespace);
}

export function progressPath(namespace: string | undefined): string {
  return customPath(DVMP_PLURAL, namespace);
}

export const POD_PATH = "/api/v1/pods";

function listCustom(
  kubeConfig: KubeConfig,
  plural: string,
  namespace: string | undefined,
  page: { limit: number; labelSelector?: string; _continue?: string },
): Promise<ListBody> {
  const api = kubeConfig.makeApiClient(CustomObjectsApi);
  const base = { group: DVM_GROUP, version: DVM_VERSION, plural, ...page };
  return (namespace ? api.listNamespacedCustomObject({ ...base, namespace }) : api.listClusterCustomObject(base)) as Promise<ListBody>;
}

function resultOf(body: ListBody, items: unknown[]): ListResult {
  const resourceVersion = body.metadata?.resourceVersion;
  if (!resourceVersion) throw new Error("list response has no metadata.resourceVersion");
  return { items, resourceVersion };
}

/** Every DVM (in `namespace`, or everywhere), page by page as table rows, and the list's resourceVersion. */
export function dvmLister(kubeConfig: KubeConfig, namespace: string | undefined): () => Promise<ListResult> {
  const rest = new KubeRest(kubeConfig);
  return async () => {
    const items: unknown[] = [];
    let token: string | undefined;
    for (;;) {
      const body = await rest.request<TableBody>(
        { method: "GET", path: dvmPath(namespace), accept: TABLE_ACCEPT, query: { includeObject: "None", limit: DVM_PAGE_SIZE, continue: token } },
        "list DirectVolumeMigrations",
      );
      const at = columnIndexes(body);
      for (const row of body.rows ?? []) items.push(rowProjection(row.cells ?? [], at));
      token = body.metadata?.continue || undefined;
      // The resourceVersion of a paginated list is the one of its first page (a consistent snapshot).
      if (!token) return resultOf(body, items);
    }
  };
}

/** Only the current resourceVersion of the progress records: the DVM list already covers the start. */
export function progressVersionLister(kubeConfig: KubeConfig, namespace: string | undefined): () => Promise<ListResult> {
  return async () => resultOf(await listCustom(kubeConfig, DVMP_PLURAL, namespace, { limit: 1, labelSelector: OWNED_SELECTOR }), []);
}

/** Only the current resourceVersion of the labelled pods on one cluster. */
export function podVersionLister(kubeConfig: KubeConfig): () => Promise<ListResult> {
  const api = kubeConfig.makeApiClient(CoreV1Api);
  return async () => {
    const list = await api.listPodForAllNamespaces({ limit: 1, labelSelector: TRANSFER_POD_SELECTOR });
    return resultOf({ metadata: definedFields({ resourceVersion: list.metadata?.resourceVersion }) }, []);
  };
}
