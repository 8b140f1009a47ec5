/** In-memory DvmStore with resourceVersion preconditions, for unit tests of the runner. */
import { DVM_API_VERSION, DVM_KIND, type DirectVolumeMigration, type DvmStatus } from "../../src/dvm/types";
import type { DvmStore } from "../../src/kube/dvmStore";
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
      metadata: { name: "dvm", namespace: "openshift-migration", uid: "11111111-2222-3333-4444-555555555555", generation: 1, resourceVersion: "1", ...metadata },
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
    return this.dvm && this.dvm.metadata.namespace === namespace && this.dvm.metadata.name === name ? structuredClone(this.dvm) : undefined;
  }

  async writeStatus(dvm: DirectVolumeMigration, status: DvmStatus): Promise<string> {
    this.beforeWrite?.(this);
    if (!this.dvm) throw new KubeApiError("not found", 404, "NotFound");
    if (dvm.metadata.resourceVersion !== this.dvm.metadata.resourceVersion) throw new KubeApiError("conflict", 409, "Conflict");
    this.writes++;
    this.dvm.status = structuredClone(status);
    this.dvm.metadata.resourceVersion = String(++this.version);
    return this.dvm.metadata.resourceVersion;
  }
}
