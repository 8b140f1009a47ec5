/**
 * An in-memory Lease with the API server's rules (create fails if it exists, update fails on a stale
 * resourceVersion), and per-candidate links to it that can be cut or frozen: for unit tests of leader
 * election.
 */
import { KubeApiError } from "../../src/kube/errors";
import type { LeaderLeaseRecord, LeaderLeaseStore, StoredLeaderLease } from "../../src/relay/leaderLeaseStore";

/** One Lease, shared by the candidates; writes move its resourceVersion. */
export class MemoryLeaderLease {
  lease: StoredLeaderLease | undefined;
  private version = 0;

  get(): StoredLeaderLease | undefined {
    return this.lease && structuredClone(this.lease);
  }

  create(record: LeaderLeaseRecord): StoredLeaderLease {
    if (this.lease) throw new KubeApiError("create Lease: already exists", 409, "AlreadyExists");
    return this.write(record);
  }

  update(record: LeaderLeaseRecord, resourceVersion: string): StoredLeaderLease {
    if (!this.lease) throw new KubeApiError("update Lease: not found", 404, "NotFound");
    if (this.lease.resourceVersion !== resourceVersion) throw new KubeApiError("update Lease: conflict", 409, "Conflict");
    return this.write(record);
  }

  private write(record: LeaderLeaseRecord): StoredLeaderLease {
    this.version += 1;
    this.lease = { record: structuredClone(record), resourceVersion: String(this.version) };
    return structuredClone(this.lease);
  }
}

/** One candidate's path to the Lease: it can be cut (calls fail) or frozen (calls never answer). */
export class Link implements LeaderLeaseStore {
  readonly where = "ns/dvm-relay";
  state: "up" | "cut" | "frozen" = "up";

  constructor(private readonly lease: MemoryLeaderLease) {}

  private call<T>(operation: () => T): Promise<T> {
    if (this.state === "cut") return Promise.reject(new KubeApiError("connect ECONNREFUSED", undefined, undefined));
    if (this.state === "frozen") return new Promise<T>(() => undefined);
    try {
      return Promise.resolve(operation());
    } catch (error) {
      return Promise.reject(error);
    }
  }

  get() {
    return this.call(() => this.lease.get());
  }
  create(record: LeaderLeaseRecord) {
    return this.call(() => this.lease.create(record));
  }
  update(record: LeaderLeaseRecord, resourceVersion: string) {
    return this.call(() => this.lease.update(record, resourceVersion));
  }
}
