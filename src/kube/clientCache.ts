/**
 * Clients built from a versioned source (a kubeconfig Secret at a resourceVersion), reused across the
 * invocations of a warm container. Bounded: the `limit` most recently used keys; and a key holds one
 * version only, so a changed Secret drops the client of the old one the first time it is seen.
 */
export class VersionedClientCache<T> {
  /** Map order is use order: every hit moves its key to the end, so the first key is the least recent. */
  private readonly entries = new Map<string, { version: string | undefined; client: T }>();

  constructor(private readonly limit: number) {
    if (!(Number.isInteger(limit) && limit > 0)) throw new Error(`limit must be a positive integer (got ${limit})`);
  }

  /** The client built from `version` of `key`; any other version's client is dropped. */
  get(key: string, version: string | undefined): T | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    this.entries.delete(key);
    if (entry.version !== version) return undefined;
    this.entries.set(key, entry);
    return entry.client;
  }

  set(key: string, version: string | undefined, client: T): void {
    this.entries.delete(key);
    this.entries.set(key, { version, client });
    for (const oldest of this.entries.keys()) {
      if (this.entries.size <= this.limit) break;
      this.entries.delete(oldest);
    }
  }

  get size(): number {
    return this.entries.size;
  }
}
