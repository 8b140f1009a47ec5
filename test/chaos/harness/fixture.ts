/**
 * Migrations to run: for each DVM a source namespace on the host with `pvcs` PVCs, moved into a target
 * namespace of its own on the destination, through a storage class of the run. The DVMs live in one
 * namespace per run on the host, next to the Secret holding the destination's kubeconfig.
 */

import { readFileSync } from "node:fs";
import { CoreV1Api, StorageV1Api } from "@kubernetes/client-node";
import type { ReconcileRequest } from "../../../src/contracts/request";
import { createDvm } from "../../support/migration";
import type { ChaosEnvironment } from "./environment";

export interface PreparedMigrations {
  /** Where the DVMs live (host). */
  namespace: string;
  specs: Array<{ name: string; spec: Record<string, unknown> }>;
}

export interface StartedMigration {
  uid: string;
  namespace: string;
  name: string;
  /** Date.now() right after the DVM was created. */
  createdAt: number;
  request: ReconcileRequest;
}

const ignoreExists = (error: unknown) => {
  if ((error as { code?: number }).code !== 409) throw error;
};

/** Runs `task` over `items`, at most `limit` at a time. */
export async function mapLimit<T, R>(items: readonly T[], limit: number, task: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < items.length; i = next++) results[i] = await task(items[i]!, i);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}

/** Namespaces, PVCs, the storage class and the destination Secret; no DVM yet. */
export async function prepareMigrations(
  env: ChaosEnvironment,
  options: { prefix: string; count: number; pvcs: number; spec?: Record<string, unknown> },
): Promise<PreparedMigrations> {
  const { prefix, count, pvcs } = options;
  const core = env.host.kubeConfig.makeApiClient(CoreV1Api);
  const storageClass = `${prefix}-sc`;
  await env.destination.kubeConfig
    .makeApiClient(StorageV1Api)
    .createStorageClass({ body: { metadata: { name: storageClass }, provisioner: "kubernetes.io/no-provisioner" } })
    .catch(ignoreExists);
  await core.createNamespace({ body: { metadata: { name: prefix } } }).catch(ignoreExists);
  await core
    .createNamespacedSecret({
      namespace: prefix,
      body: { metadata: { name: "destination-kubeconfig" }, stringData: { kubeconfig: readFileSync(env.destination.kubeconfigPath, "utf8") } },
    })
    .catch(ignoreExists);

  const specs = await mapLimit(
    Array.from({ length: count }, (_, i) => i),
    8,
    async (i) => {
      const source = `${prefix}-s${i}`;
      await core.createNamespace({ body: { metadata: { name: source } } }).catch(ignoreExists);
      const volumes = Array.from({ length: pvcs }, (_, j) => `vol-${j}`);
      await mapLimit(volumes, 4, (name) =>
        core
          .createNamespacedPersistentVolumeClaim({
            namespace: source,
            body: { metadata: { name }, spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } } } },
          })
          .catch(ignoreExists),
      );
      return {
        name: `m-${i}`,
        spec: {
          ...options.spec,
          destinationCluster: { kubeconfigSecretRef: { name: "destination-kubeconfig" } },
          persistentVolumeClaims: volumes.map((name) => ({
            name,
            namespace: source,
            // Never the source namespace, so the harness also works with one cluster for both sides.
            targetNamespace: `${source}-dst`,
            targetStorageClass: storageClass,
            targetAccessModes: ["ReadWriteOnce"],
          })),
        },
      };
    },
  );
  return { namespace: prefix, specs };
}

export async function createMigrations(env: ChaosEnvironment, prepared: PreparedMigrations, concurrency = 8): Promise<StartedMigration[]> {
  return mapLimit(prepared.specs, concurrency, async ({ name, spec }) => {
    const dvm = await createDvm(env.host.kubeConfig, prepared.namespace, name, spec);
    const { uid, namespace, generation, resourceVersion } = dvm.metadata;
    return { uid, namespace, name, createdAt: Date.now(), request: { uid, namespace, name, generation, resourceVersion } };
  });
}
