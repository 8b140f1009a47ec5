import { describe, expect, it } from "vitest";
import { VersionedClientCache } from "../../../src/kube/clientCache";

describe("VersionedClientCache", () => {
  it("returns a client only for the version it was built from, and drops it once another version is seen", () => {
    const cache = new VersionedClientCache<string>(4);
    cache.set("ns/secret", "1", "client@1");
    expect(cache.get("ns/secret", "1")).toBe("client@1");
    expect(cache.get("ns/secret", "2")).toBeUndefined();
    // The rotated Secret's old client is gone, even if the old version were asked for again.
    expect(cache.get("ns/secret", "1")).toBeUndefined();
    expect(cache.size).toBe(0);
  });

  it("keeps the most recently used keys up to its limit", () => {
    const cache = new VersionedClientCache<string>(2);
    cache.set("a", "1", "A");
    cache.set("b", "1", "B");
    expect(cache.get("a", "1")).toBe("A");
    cache.set("c", "1", "C");
    expect(cache.size).toBe(2);
    expect(cache.get("b", "1")).toBeUndefined();
    expect(cache.get("a", "1")).toBe("A");
    expect(cache.get("c", "1")).toBe("C");
  });

  it("refuses a limit that is not a positive integer", () => {
    expect(() => new VersionedClientCache(0)).toThrow("limit must be a positive integer (got 0)");
  });
});
