/**
 * Reads DirectVolumeMigrations fresh from the API server and writes their status guarded by the
 * resourceVersion that was read: a write based on an old read is refused (409) instead of overwriting.
 */
import type { KubeConfig } from "@kubernetes/client-node";
import { z } from "zod";
import { ConditionSchema, type DirectVolumeMigration, DVM_API_VERSION, DVM_PLURAL, type DvmStatus, DvmStatusSchema } from "../dvm/types";
import { fieldIssues, formatIssue } from "../lib/issues";
import { toKubeApiError } from "./errors";
import { KubeRest, resourcePath } from "./rest";

export interface DvmStore {
  /** A fresh read (never a cache); undefined when the DVM does not exist. */
  get(namespace: string, name: string): Promise<DirectVolumeMigration | undefined>;
  /**
   * Replace the status, refused with a conflict (KubeApiError.isConflict) when the object changed since
   * `resourceVersion`. Returns the new resourceVersion.
   */
  writeStatus(dvm: DirectVolumeMigration, status: DvmStatus): Promise<string>;
  /**
   * Replace metadata.finalizers, refused with a conflict when the object changed since `resourceVersion`.
   * Returns the DVM as written.
   */
  writeFinalizers(dvm: DirectVolumeMigration, finalizers: string[]): Promise<DirectVolumeMigration>;
}

/** A JSON merge patch that turns `before` into `after` at the top level (null deletes a key). */
export function statusMergePatch(before: DvmStatus, after: DvmStatus): Record<string, unknown> {
  const patch: Record<string, unknown> = {};
  for (const key of Object.keys(before)) if (!(key in after)) patch[key] = null;
  for (const [key, value] of Object.entries(after)) {
    if (JSON.stringify((before as Record<string, unknown>)[key]) !== JSON.stringify(value)) patch[key] = value ?? null;
  }
  return patch;
}

export function toDvm(raw: unknown): DirectVolumeMigration {
  const obj = raw as DirectVolumeMigration;
  const status = DvmStatusSchema.safeParse(obj.status ?? {});
  if (status.success) return { ...obj, status: status.data };
  // A status this controller cannot read must never read as "not started": the runner stops such a DVM
  // with a condition (kept from the conditions when they still parse) instead of starting it over.
  const conditions = z.array(ConditionSchema).safeParse((obj.status as { conditions?: unknown } | null | undefined)?.conditions);
  return {
    ...obj,
    status: conditions.success ? { conditions: conditions.data } : {},
    statusIssues: fieldIssues("status", status.error).map(formatIssue),
  };
}

export class KubeDvmStore implements DvmStore {
  private readonly rest: KubeRest;
  constructor(kubeConfig: KubeConfig) {
    this.rest = new KubeRest(kubeConfig);
  }

  async get(namespace: string, name: string): Promise<DirectVolumeMigration | undefined> {
    const action = `read DirectVolumeMigration ${namespace}/${name}`;
    try {
      return toDvm(await this.rest.request({ method: "GET", path: resourcePath(DVM_API_VERSION, DVM_PLURAL, namespace, name) }, action));
    } catch (error) {
      const e = toKubeApiError(error, action);
      if (e.isNotFound) return undefined;
      throw e;
    }
  }

  async writeStatus(dvm: DirectVolumeMigration, status: DvmStatus): Promise<string> {
    const { namespace, name, resourceVersion } = dvm.metadata;
    const result = await this.rest.request<{ metadata: { resourceVersion: string } }>(
      {
        method: "PATCH",
        path: resourcePath(DVM_API_VERSION, DVM_PLURAL, namespace, name, "status"),
        // resourceVersion in a patch body is a precondition: the server answers 409 if it moved.
        body: { metadata: { resourceVersion }, status: statusMergePatch(dvm.status, status) },
        contentType: "application/merge-patch+json",
      },
      `write status of DirectVolumeMigration ${namespace}/${name}`,
    );
    return result.metadata.resourceVersion;
  }

  async writeFinalizers(dvm: DirectVolumeMigration, finalizers: string[]): Promise<DirectVolumeMigration> {
    const { namespace, name, resourceVersion } = dvm.metadata;
    const written = await this.rest.request(
      {
        method: "PATCH",
        path: resourcePath(DVM_API_VERSION, DVM_PLURAL, namespace, name),
        body: { metadata: { resourceVersion, finalizers } },
        contentType: "application/merge-patch+json",
      },
      `write finalizers of DirectVolumeMigration ${namespace}/${name}`,
    );
    return toDvm(written);
  }
}
