/**
 * The relay's DVM list reads a Table of the CRD's relay columns, page by page (a stand-in API server that
 * answers as kube-apiserver's table convertor does; test/integration/relayList.test.ts runs the real one),
 * and names the columns a CRD without them lacks.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { KubeConfig } from "@kubernetes/client-node";
import { afterEach, describe, expect, it } from "vitest";
import { parseObservedDvm } from "../../../src/relay/observed";
import { DVM_PAGE_SIZE, DVM_TABLE_COLUMNS, dvmLister } from "../../../src/relay/resources";

const COLUMNS = ["Name", "Phase", "Step", "Itinerary", "Age", ...Object.values(DVM_TABLE_COLUMNS).filter((c) => c !== "Name" && c !== "Phase")];

const dvm = (i: number) => ({
  metadata: {
    name: `m-${i}`,
    namespace: "tenant",
    uid: `uid-${i}`,
    resourceVersion: String(100 + i),
    generation: 1,
    ...(i % 7 === 0 ? { deletionTimestamp: "2026-12-03T00:00:00Z" } : {}),
  },
  ...(i % 2 === 0 ? { status: { phase: "RunRsyncOperations" } } : {}),
});

/** A row as the table convertor makes it: one cell per column, null where the path has no value. */
function row(object: ReturnType<typeof dvm>, columns: string[]): { cells: unknown[] } {
  const value: Record<string, unknown> = {
    Name: object.metadata.name,
    Namespace: object.metadata.namespace,
    UID: object.metadata.uid,
    Generation: object.metadata.generation,
    "Resource Version": object.metadata.resourceVersion,
    Deletion: object.metadata.deletionTimestamp ?? null,
    Phase: object.status?.phase ?? null,
    Age: "5m",
  };
  return { cells: columns.map((column) => value[column] ?? null) };
}

let server: Server | undefined;
afterEach(() => server?.close());

async function standIn(all: ReturnType<typeof dvm>[], columns: string[], seen: URLSearchParams[]): Promise<KubeConfig> {
  server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://localhost");
    seen.push(url.searchParams);
    const start = Number(url.searchParams.get("continue") ?? "0");
    const limit = Number(url.searchParams.get("limit") ?? all.length);
    const next = start + limit < all.length ? String(start + limit) : undefined;
    res.setHeader("Content-Type", "application/json");
    res.end(
      JSON.stringify({
        kind: "Table",
        apiVersion: "meta.k8s.io/v1",
        metadata: { resourceVersion: "500", ...(next ? { continue: next } : {}) },
        columnDefinitions: columns.map((name) => ({ name, type: "string" })),
        rows: all.slice(start, start + limit).map((object) => row(object, columns)),
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
  return kubeConfig;
}

describe("the relay's DVM list", () => {
  it("asks for table pages without the objects and reads each DVM's identity and phase from the cells", async () => {
    const all = Array.from({ length: DVM_PAGE_SIZE + 20 }, (_, i) => dvm(i));
    const seen: URLSearchParams[] = [];
    const listed = await dvmLister(await standIn(all, COLUMNS, seen), "tenant")();
    expect(seen.map((query) => [query.get("limit"), query.get("includeObject")])).toEqual([
      [String(DVM_PAGE_SIZE), "None"],
      [String(DVM_PAGE_SIZE), "None"],
    ]);
    expect(listed.resourceVersion).toBe("500");
    expect(listed.items.map(parseObservedDvm)).toEqual(all.map(parseObservedDvm));
  });

  it("names the columns a CRD without them lacks", async () => {
    const seen: URLSearchParams[] = [];
    const old = await standIn([dvm(1)], ["Name", "Phase", "Step", "Age"], seen);
    await expect(dvmLister(old, undefined)()).rejects.toThrow(
      'the DirectVolumeMigration CRD on this cluster lacks the printer column(s) "Namespace", "UID", "Generation", "Resource Version", "Deletion" the relay lists by: apply this release\'s infra/deploy/crds',
    );
  });
});
