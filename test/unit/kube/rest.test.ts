import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { KubeApiError } from "../../../src/kube/errors";
import { KubeCluster, POD_LOG_LIMIT_BYTES } from "../../../src/kube/kubeCluster";
import { KubeConfig } from "../../../src/kube/kubeConfig";
import { KubeRest } from "../../../src/kube/rest";

describe("KubeRest", () => {
  it("never passes on what failing credentials said (a plugin's output can hold secrets)", async () => {
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: "c", server: "https://127.0.0.1:1", skipTLSVerify: false }],
      // The host kubeconfig is the operator's and may use a plugin; this one fails loudly.
      users: [{ name: "u", exec: { apiVersion: "client.authentication.k8s.io/v1", command: "sh", args: ["-c", "echo token=SECRET-STDERR >&2; exit 1"] } }],
      contexts: [{ name: "x", cluster: "c", user: "u" }],
      currentContext: "x",
    });
    const error = await new KubeRest(kc).request({ method: "GET", path: "/api" }, "host: read /api").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(KubeApiError);
    expect((error as KubeApiError).message).toBe("host: read /api: the kubeconfig's credentials could not be applied (details not shown)");
    expect(JSON.stringify(error)).not.toContain("SECRET-STDERR");
  });
});

describe("KubeRest connections", () => {
  const servers: Server[] = [];
  afterEach(async () => {
    for (const server of servers.splice(0)) await new Promise((resolve) => server.close(resolve));
  });

  async function serve(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<{ rest: KubeRest; connections: () => number }> {
    const server = createServer(handler);
    let connections = 0;
    server.on("connection", () => connections++);
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: "c", server: `http://127.0.0.1:${port}`, skipTLSVerify: true }],
      users: [{ name: "u", token: "t" }],
      contexts: [{ name: "x", cluster: "c", user: "u" }],
      currentContext: "x",
    });
    return { rest: new KubeRest(kc), connections: () => connections };
  }

  it("keeps one connection for successive requests (no handshake per request), with the credentials on each", async () => {
    const authorizations: (string | undefined)[] = [];
    const { rest, connections } = await serve((req, res) => {
      authorizations.push(req.headers.authorization);
      res.setHeader("Content-Type", "application/json");
      res.end(JSON.stringify({ path: req.url }));
    });
    for (let i = 0; i < 5; i++) expect(await rest.request({ method: "GET", path: `/api/${i}` }, "read")).toEqual({ path: `/api/${i}` });
    expect(connections()).toBe(1);
    expect(authorizations).toEqual(Array(5).fill("Bearer t"));
  });

  it("sends a request again on a new connection when the server closed the kept one", async () => {
    let served = 0;
    const { rest, connections } = await serve((req, res) => {
      served++;
      // The second request arrives on the kept connection; the server drops it unanswered, as a server
      // does with a connection it closes for idleness just as the request goes out.
      if (served === 2) return req.socket.destroy();
      res.end(JSON.stringify({ served }));
    });
    expect(await rest.request({ method: "GET", path: "/api" }, "read")).toEqual({ served: 1 });
    expect(await rest.request({ method: "GET", path: "/api" }, "read")).toEqual({ served: 3 });
    expect(connections()).toBe(2);
  });

  // A tenant's pod can write a log line without end: a log read asks the API server for a bounded tail.
  it("reads a pod's log with a byte limit beside the line count", async () => {
    const queries: URLSearchParams[] = [];
    const { rest } = await serve((req, res) => {
      queries.push(new URL(req.url ?? "", "http://x").searchParams);
      res.writeHead(200, { "content-type": "text/plain" });
      res.end("line\n");
    });
    const cluster = new KubeCluster("source", rest.kubeConfig);
    expect(await cluster.podLogs("ns", "pod", "rsync", 20)).toBe("line\n");
    expect(Object.fromEntries(queries[0]!)).toMatchObject({ container: "rsync", tailLines: "20", limitBytes: String(POD_LOG_LIMIT_BYTES) });
  });

  it("carries the Retry-After of a throttling answer (429) on the error, so the retry waits as long as asked", async () => {
    const { rest } = await serve((_req, res) => {
      res.writeHead(429, { "Content-Type": "application/json", "Retry-After": "3" });
      res.end(JSON.stringify({ kind: "Status", status: "Failure", reason: "TooManyRequests", message: "Too many requests", code: 429 }));
    });
    const error = await rest.request({ method: "GET", path: "/api" }, "read").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(KubeApiError);
    expect(error).toMatchObject({ statusCode: 429, reason: "TooManyRequests", retryAfterMs: 3_000, isTransient: true });
  });

  it("takes the Status body's retryAfterSeconds without a header, and bounds what a server may ask", async () => {
    let answer = 0;
    const { rest } = await serve((_req, res) => {
      answer++;
      res.writeHead(answer === 1 ? 503 : 429, answer === 1 ? { "Content-Type": "application/json" } : { "Retry-After": "99999999" });
      res.end(JSON.stringify({ kind: "Status", reason: "ServiceUnavailable", details: { retryAfterSeconds: 2 } }));
    });
    expect(await rest.request({ method: "GET", path: "/api" }, "read").catch((e: unknown) => e)).toMatchObject({ retryAfterMs: 2_000 });
    expect(await rest.request({ method: "GET", path: "/api" }, "read").catch((e: unknown) => e)).toMatchObject({ retryAfterMs: 600_000 });
  });
});
