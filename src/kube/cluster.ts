/**
 * The narrow interface every phase is written against. One implementation talks to a real API server
 * (kubeCluster.ts); unit tests use an in-memory fake. Every method reads fresh from the API server:
 * there is no cache anywhere in this project.
 */
import type { KubeObject, ObjectRef } from "./objects";

export interface EnsureResult<T extends KubeObject> {
  object: T;
  /** false: an object with that name already existed and was adopted as it is. */
  created: boolean;
}

export interface Cluster {
  /** For messages: "source", "destination" or "host" (and the server, when known). */
  readonly name: string;
  get<T extends KubeObject = KubeObject>(ref: ObjectRef): Promise<T | undefined>;
  /** Create-or-adopt: AlreadyExists returns the existing object unchanged. */
  ensure<T extends KubeObject>(object: T): Promise<EnsureResult<T>>;
  list<T extends KubeObject = KubeObject>(
    kind: { apiVersion: string; kind: string },
    namespace: string | undefined,
    labels: Record<string, string>,
  ): Promise<T[]>;
  /**
   * Deleting an object that is already gone is not an error. With `uid`, only that object is deleted
   * (preconditions.uid): another object of the same name is left alone ("replaced").
   */
  delete(ref: ObjectRef, options?: { uid?: string }): Promise<"deleted" | "absent" | "replaced">;
  /**
   * Merge-patch metadata.annotations (null removes a key), guarded by `resourceVersion`: a KubeApiError
   * with isConflict when the object changed since it was read.
   */
  patchAnnotations<T extends KubeObject = KubeObject>(ref: ObjectRef, annotations: Record<string, string | null>, resourceVersion: string): Promise<T>;
  /**
   * Merge-patch `patch` (spec fields and metadata.annotations; null removes a key) in one write, guarded
   * by `resourceVersion` like patchAnnotations: the quiesce writes (src/phases/quiesce.ts), whose count
   * and annotation must change together or not at all.
   */
  patchGuarded<T extends KubeObject = KubeObject>(ref: ObjectRef, patch: Record<string, unknown>, resourceVersion: string): Promise<T>;
  /** Merge-patch the status subresource (no resourceVersion guard: used for monotonic progress only). */
  patchStatus(ref: ObjectRef, status: Record<string, unknown>): Promise<void>;
  podLogs(namespace: string, name: string, container: string, tailLines: number): Promise<string>;
  /** Whether the API server serves this group/version/kind (e.g. OpenShift Routes). */
  serves(kind: { apiVersion: string; kind: string }): Promise<boolean>;
}

/** The clusters of one migration, as the resolver hands them to the phases. */
export interface MigrationClusters {
  /** Where the DVM lives: credentials, PKI and progress records are kept here. */
  host: Cluster;
  /** Where data is read from (for a rollback, the original destination). */
  source: Cluster;
  /** Where data is written to (for a rollback, the original source). */
  destination: Cluster;
  /** True when source and destination are the same API server (in-cluster service DNS works). */
  sameCluster: boolean;
}
