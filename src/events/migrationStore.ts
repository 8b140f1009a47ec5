/**
 * Where the trigger creates DirectVolumeMigrations: the host cluster, through a narrow interface so
 * the trigger's decisions are unit-tested with an in-memory fake and integration-tested against a
 * real API server with no change.
 */
import { CustomObjectsApi, type KubeConfig } from "@kubernetes/client-node";
import { DVM_API_VERSION, DVM_GROUP, DVM_KIND, DVM_PLURAL, DVM_VERSION, type DvmSpec } from "../dvm/types";
import { toKubeApiError } from "../kube/errors";

export interface NewMigration {
  namespace: string;
  name: string;
  annotations: Record<string, string>;
  labels: Record<string, string>;
  spec: DvmSpec;
}

export interface ExistingMigration {
  uid: string;
  annotations: Record<string, string>;
}

export type CreateResult = { kind: "created"; uid: string } | { kind: "exists" };

/** A DVM carrying a label, as the schedule's history limit needs it. */
export interface LabelledMigration {
  name: string;
  uid: string;
  annotations: Record<string, string>;
  /** status.phase is Completed: the migration ended (either way) and its cleanup is done. */
  completed: boolean;
}

export interface MigrationStore {
  /** Creates the DVM; `exists` when one of that name is already there (the API server's AlreadyExists). */
  create(migration: NewMigration): Promise<CreateResult>;
  /** A fresh read; undefined when there is none. */
  get(namespace: string, name: string): Promise<ExistingMigration | undefined>;
  /** The DVMs of a namespace with this label (one page of at most 500: a schedule keeps far fewer). */
  listLabelled(namespace: string, label: string, value: string): Promise<LabelledMigration[]>;
  /** Deletes that DVM, only if it still has this uid; gone already is not an error. */
  delete(namespace: string, name: string, uid: string): Promise<void>;
}

/** Errors are KubeApiErrors (src/kube/errors.ts), so the trigger branches on what happened. */
export class KubeMigrationStore implements MigrationStore {
  private readonly api: CustomObjectsApi;

  constructor(kubeConfig: KubeConfig) {
    this.api = kubeConfig.makeApiClient(CustomObjectsApi);
  }

  async create(migration: NewMigration): Promise<CreateResult> {
    const { namespace, name, annotations, labels, spec } = migration;
    try {
      const created = (await this.api.createNamespacedCustomObject({
        group: DVM_GROUP,
        version: DVM_VERSION,
        namespace,
        plural: DVM_PLURAL,
        body: { apiVersion: DVM_API_VERSION, kind: DVM_KIND, metadata: { name, namespace, annotations, labels }, spec },
      })) as { metadata?: { uid?: string } };
      return { kind: "created", uid: created.metadata?.uid ?? "" };
    } catch (error) {
      const e = toKubeApiError(error, `create DirectVolumeMigration ${namespace}/${name}`);
      if (e.isAlreadyExists) return { kind: "exists" };
      throw e;
    }
  }

  async listLabelled(namespace: string, label: string, value: string): Promise<LabelledMigration[]> {
    try {
      const list = (await this.api.listNamespacedCustomObject({
        group: DVM_GROUP,
        version: DVM_VERSION,
        namespace,
        plural: DVM_PLURAL,
        labelSelector: `${label}=${value}`,
        limit: 500,
      })) as { items?: { metadata?: { name?: string; uid?: string; annotations?: Record<string, string> }; status?: { phase?: string } }[] };
      return (list.items ?? []).map((item) => ({
        name: item.metadata?.name ?? "",
        uid: item.metadata?.uid ?? "",
        annotations: item.metadata?.annotations ?? {},
        completed: item.status?.phase === "Completed",
      }));
    } catch (error) {
      throw toKubeApiError(error, `list DirectVolumeMigrations ${label}=${value} in ${namespace}`);
    }
  }

  async delete(namespace: string, name: string, uid: string): Promise<void> {
    try {
      await this.api.deleteNamespacedCustomObject({
        group: DVM_GROUP,
        version: DVM_VERSION,
        namespace,
        plural: DVM_PLURAL,
        name,
        body: { preconditions: { uid } },
      });
    } catch (error) {
      const e = toKubeApiError(error, `delete DirectVolumeMigration ${namespace}/${name}`);
      if (!e.isNotFound && !e.isConflict) throw e;
    }
  }

  async get(namespace: string, name: string): Promise<ExistingMigration | undefined> {
    try {
      const raw = (await this.api.getNamespacedCustomObject({ group: DVM_GROUP, version: DVM_VERSION, namespace, plural: DVM_PLURAL, name })) as {
        metadata?: { uid?: string; annotations?: Record<string, string> };
      };
      return { uid: raw.metadata?.uid ?? "", annotations: raw.metadata?.annotations ?? {} };
    } catch (error) {
      const e = toKubeApiError(error, `read DirectVolumeMigration ${namespace}/${name}`);
      if (e.isNotFound) return undefined;
      throw e;
    }
  }
}
