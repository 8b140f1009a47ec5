/**
 * The collections the relay watches: where they are (watch paths) and how to list them. Every DVM is
 * listed, because the list is the relay's index after a start or an expired resourceVersion; but only
 * a page at a time, each cut down to what the relay reads (dvmProjection) as it arrives, so the memory
 * of a list is bounded by one page of full objects plus a small record per DVM. Owned objects (pods, progress records) only need a starting resourceVersion: a limit-1 list gives
 * the current one without reading the collection.
 */
import { CoreV1Api, CustomObjectsApi, type KubeConfig } from "@kubernetes/client-node";
import { DVM_GROUP, DVM_PLURAL, DVM_VERSION, DVMP_PLURAL } from "../dvm/types";
import { LABEL } from "../phases/names";
import type { ListResult } from "./listWatch";
import { dvmProjection } from "./observed";

/** Only objects a migration created carry the uid label; the selector asks for its presence. */
export const OWNED_SELECTOR = LABEL.dvmUid;
/**
 * Pods: only the transfer pods (uid label and transfer=true). RBAC cannot grant pods by label, so the
 * relay's role still allows listing every pod; the selector is what keeps other pods out of its watch
 * (docs/security.md).
 */
export const TRANSFER_POD_SELECTOR = `${LABEL.dvmUid},${LABEL.transfer}=true`;

/**
 * DVMs per list page. A DVM is bounded only by etcd's object limit (about 1.5 MiB: labels and annotations
 * are the tenant's), and a page's response, its text and its parse are held at once, so a page is kept
 * small; 1,000 small DVMs cost 100 requests. Measured (bench/relayMemory.ts, docs/security.md): a fresh
 * relay listing 200 DVMs of 1 MiB still peaks above the Deployment's 256 Mi, so this bounds what is
 * kept, not yet the peak of a list.
 */
export const DVM_PAGE_SIZE = 10;

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

/** Every DVM (in `namespace`, or everywhere), page by page, and the list's resourceVersion. */
export function dvmLister(kubeConfig: KubeConfig, namespace: string | undefined): () => Promise<ListResult> {
  return async () => {
    const items: unknown[] = [];
    let token: string | undefined;
    for (;;) {
      const body = await listCustom(kubeConfig, DVM_PLURAL, namespace, { limit: DVM_PAGE_SIZE, ...(token ? { _continue: token } : {}) });
      for (const item of body.items ?? []) items.push(dvmProjection(item));
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
    return resultOf({ metadata: { resourceVersion: list.metadata?.resourceVersion } }, []);
  };
}
