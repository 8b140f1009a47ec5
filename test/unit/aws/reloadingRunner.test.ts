/**
 * A rotated host kubeconfig (issue 24, item 13): the phase function's runner is built once per warm
 * container, so after the operator rotates the host credential every invocation would be refused (401)
 * until the container dies. On a 401 the runner is built again from a fresh load of the kubeconfig and the
 * invocation is tried once more. A loopback HTTP server stands in for the API server (no DynamoDB call is
 * made: the DVM is not found, so nothing is claimed).
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { runnerFromEnv } from "../../../src/aws/runnerFromEnv";
import { ENV } from "../../../src/config/environment";
import { KubeApiError } from "../../../src/kube/errors";
import { silentLogger } from "../../../src/lib/log";

const REQUEST = { uid: "11111111-2222-3333-4444-555555555555", namespace: "openshift-migration", name: "dvm" };

describe("the phase function's runner after the host kubeconfig was rotated", () => {
  let server: Server;
  let dir: string;
  let valid: string;
  let tokensSeen: string[];
  const savedKubeconfig = process.env.KUBECONFIG;

  beforeEach(async () => {
    tokensSeen = [];
    valid = "old-token";
    server = createServer((req, res) => {
      const token = (req.headers.authorization ?? "").replace(/^Bearer /, "");
      tokensSeen.push(token);
      const status = token === valid ? 404 : 401;
      res.writeHead(status, { "Content-Type": "application/json" });
      res.end(JSON.stringify({ kind: "Status", status: "Failure", reason: status === 404 ? "NotFound" : "Unauthorized", code: status }));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    dir = mkdtempSync(join(tmpdir(), "dvm-reload-"));
    process.env.KUBECONFIG = join(dir, "kubeconfig");
    writeKubeconfig("old-token");
  });

  afterEach(async () => {
    if (savedKubeconfig === undefined) delete process.env.KUBECONFIG;
    else process.env.KUBECONFIG = savedKubeconfig;
    rmSync(dir, { recursive: true, force: true });
    await new Promise((resolve) => server.close(resolve));
  });

  function writeKubeconfig(token: string): void {
    const { port } = server.address() as AddressInfo;
    writeFileSync(
      process.env.KUBECONFIG!,
      JSON.stringify({
        apiVersion: "v1",
        kind: "Config",
        clusters: [{ name: "host", cluster: { server: `http://127.0.0.1:${port}`, "insecure-skip-tls-verify": true } }],
        users: [{ name: "fn", user: { token } }],
        contexts: [{ name: "host", context: { cluster: "host", user: "fn" } }],
        "current-context": "host",
      }),
    );
  }

  const env = { [ENV.ledgerTable]: "ledger" };

  it("loads the kubeconfig again on a 401 and retries the invocation once with the new credential", async () => {
    const source = runnerFromEnv(env, silentLogger);
    expect((await (await source()).runWithStats(REQUEST)).result).toEqual({ kind: "gone" });
    // The operator rotates the credential: the old token is refused from now on.
    valid = "new-token";
    writeKubeconfig("new-token");
    expect((await (await source()).runWithStats(REQUEST)).result).toEqual({ kind: "gone" });
    expect(tokensSeen).toEqual(["old-token", "old-token", "new-token"]);
    // Later invocations use the new one at once.
    await (await source()).runWithStats(REQUEST);
    expect(tokensSeen.at(-1)).toBe("new-token");
  });

  it("a credential that stays refused fails the invocation after one reload, without a loop", async () => {
    const source = runnerFromEnv(env, silentLogger);
    valid = "nobody";
    const error = await (await source()).runWithStats(REQUEST).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(KubeApiError);
    expect((error as KubeApiError).statusCode).toBe(401);
    expect(tokensSeen).toEqual(["old-token", "old-token"]);
  });
});
