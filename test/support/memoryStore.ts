/** In-memory DvmStore with resourceVersion preconditions, for unit tests of the runner. */
import { type DirectVolumeMigration, DVM_API_VERSION, DVM_KIND, type DvmStatus } from "../../src/dvm/types";
import { type DvmStore, statusMergePatch, toDvm } from "../../src/kube/dvmStore";
import { KubeApiError } from "../../src/kube/errors";

export class MemoryDvmStore implements DvmStore {
  private dvm: DirectVolumeMigration | undefined;
  private version = 1;
  writes = 0;
  /** Called before each write; a test can change the object here to simulate a concurrent writer. */
  beforeWrite?: (store: MemoryDvmStore) => void;

  constructor(spec: unknown, metadata: Partial<DirectVolumeMigration["metadata"]> = {}) {
    this.dvm = {
      apiVersion: DVM_API_VERSION,
      kind: DVM_KIND,
      metadata: {
        name: "dvm",
        namespace: "openshift-migration",
        uid: "11111111-2222-3333-4444-555555555555",
        generation: 1,
        resourceVersion: "1",
        ...metadata,
      },
      spec,
      status: {},
    };
  }

  current(): DirectVolumeMigration {
    if (!this.dvm) throw new Error("deleted");
    return structuredClone(this.dvm);
  }

  /** A write by someone else (moves the resourceVersion). */
  touch(change: (dvm: DirectVolumeMigration) => void = () => {}): void {
    if (!this.dvm) return;
    change(this.dvm);
    this.dvm.metadata.resourceVersion = String(++this.version);
  }

  remove(): void {
    this.dvm = undefined;
  }

  async get(namespace: string, name: string): Promise<DirectVolumeMigration | undefined> {
    // Read as the API server's objects are: through toDvm, which judges the status.
    return this.dvm && this.dvm.metadata.namespace === namespace && this.dvm.metadata.name === name ? toDvm(structuredClone(this.dvm)) : undefined;
  }

  /** Starts the deletion as the API server does: a deletionTimestamp while finalizers remain, else gone. */
  markDeleted(at = new Date().toISOString()): void {
    if (!this.dvm) return;
    if (!this.dvm.metadata.finalizers?.length) {
      this.remove();
      return;
    }
    this.touch((dvm) => (dvm.metadata.deletionTimestamp = at));
  }

  async writeFinalizers(dvm: DirectVolumeMigration, finalizers: string[]): Promise<DirectVolumeMigration> {
    if (!this.dvm) throw new KubeApiError("not found", 404, "NotFound");
    if (dvm.metadata.resourceVersion !== this.dvm.metadata.resourceVersion) throw new KubeApiError("conflict", 409, "Conflict");
    this.dvm.metadata.finalizers = [...finalizers];
    this.dvm.metadata.resourceVersion = String(++this.version);
    // The API server removes an object being deleted once its last finalizer is gone.
    const written = structuredClone(this.dvm);
    if (this.dvm.metadata.deletionTimestamp && finalizers.length === 0) this.dvm = undefined;
    return written;
  }

  async writeStatus(dvm: DirectVolumeMigration, status: DvmStatus): Promise<string> {
    this.beforeWrite?.(this);
    if (!this.dvm) throw new KubeApiError("not found", 404, "NotFound");
    if (dvm.metadata.resourceVersion !== this.dvm.metadata.resourceVersion) throw new KubeApiError("conflict", 409, "Conflict");
    this.writes++;
    // A merge patch, as KubeDvmStore sends: keys the writer did not touch keep what is stored.
    const stored = this.dvm.status as Record<string, unknown>;
    for (const [key, value] of Object.entries(statusMergePatch(dvm.status, status))) {
      if (value === null) delete stored[key];
      else stored[key] = structuredClone(value);
    }
    this.dvm.metadata.resourceVersion = String(++this.version);
    return this.dvm.metadata.resourceVersion;
  }
}
