/**
 * The relay's DVM list keeps a small record per DVM, whatever a tenant puts in the DVM's labels,
 * annotations or spec, and reads the collection a bounded page at a time (a stand-in API server).
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { KubeConfig } from "@kubernetes/client-node";
import { afterEach, describe, expect, it } from "vitest";
import { dvmProjection, parseObservedDvm } from "../../../src/relay/observed";
import { DVM_PAGE_SIZE, dvmLister } from "../../../src/relay/resources";

const PAD = "x".repeat(64 * 1024);
const bigDvm = (i: number) => ({
  apiVersion: "migration.openshift.io/v1alpha1",
  kind: "DirectVolumeMigration",
  metadata: {
    name: `m-${i}`,
    namespace: "tenant",
    uid: `uid-${i}`,
    resourceVersion: String(100 + i),
    generation: 1,
    labels: { team: "a" },
    annotations: { pad: PAD },
    ...(i % 7 === 0 ? { deletionTimestamp: "2026-12-03T00:00:00Z" } : {}),
  },
  spec: { persistentVolumeClaims: [{ name: PAD, namespace: "tenant" }] },
  status: i % 2 === 0 ? { phase: "RunRsyncOperations", conditions: [{ message: PAD }] } : {},
});

let server: Server | undefined;
afterEach(() => server?.close());

describe("the relay's DVM list", () => {
  it("asks for bounded pages and keeps only what the relay reads of each DVM", async () => {
    const all = Array.from({ length: 60 }, (_, i) => bigDvm(i));
    const limits: string[] = [];
    server = createServer((req, res) => {
      const url = new URL(req.url ?? "/", "http://localhost");
      limits.push(url.searchParams.get("limit") ?? "none");
      const start = Number(url.searchParams.get("continue") ?? "0");
      const limit = Number(url.searchParams.get("limit") ?? all.length);
      const items = all.slice(start, start + limit);
      const next = start + limit < all.length ? String(start + limit) : undefined;
      res.setHeader("Content-Type", "application/json");
      res.end(
        JSON.stringify({
          apiVersion: "migration.openshift.io/v1alpha1",
          kind: "List",
          metadata: { resourceVersion: "500", ...(next ? { continue: next } : {}) },
          items,
        }),
      );
    });
    await new Promise<void>((resolve) => server!.listen(0, "127.0.0.1", resolve));
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromOptions({
      clusters: [{ name: "c", server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, skipTLSVerify: true }],
      users: [{ name: "u", token: "t" }],
      contexts: [{ name: "x", cluster: "c", user: "u" }],
      currentContext: "x",
    });

    const listed = await dvmLister(kubeConfig, "tenant")();

    expect(limits).toEqual(Array.from({ length: Math.ceil(60 / DVM_PAGE_SIZE) }, () => String(DVM_PAGE_SIZE)));
    expect(listed.resourceVersion).toBe("500");
    expect(listed.items).toHaveLength(60);
    // What the relay reads is the same; what it keeps is a few hundred bytes, not the 128 KiB sent.
    listed.items.forEach((item, i) => {
      expect(parseObservedDvm(item)).toEqual(parseObservedDvm(all[i]));
    });
    for (const item of listed.items) expect(JSON.stringify(item).length).toBeLessThan(300);
  });

  it("projects odd objects so that the relay's parse still reports them", () => {
    for (const odd of [null, "text", { metadata: "x" }, { metadata: { uid: "u", namespace: "n", name: "d", resourceVersion: "1" }, status: "broken" }]) {
      expect(parseObservedDvm(dvmProjection(odd))).toEqual(parseObservedDvm(odd));
    }
    const phaseNotText = { metadata: { uid: "u", namespace: "n", name: "d", resourceVersion: "1" }, status: { phase: 3 } };
    expect(parseObservedDvm(dvmProjection(phaseNotText))).toEqual(parseObservedDvm(phaseNotText));
  });
});
