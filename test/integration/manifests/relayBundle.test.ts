/**
 * The relay's container bundle (infra/deploy/relay/build.mjs) runs as a process: with the relay's
 * restricted kubeconfig (test/support/rbacIdentities.ts) it becomes ready, invokes "Lambda" (a local
 * stand-in answering 202) when a DVM is created, and exits 0 on SIGTERM.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { CoordinationV1Api } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { findFreePort } from "../../../infra/dev/local/ports";
import { testClusters } from "../../support/clusters";
import { startLambdaStandIn } from "../../support/lambdaStandIn";
import { ROOT } from "../../support/manifests";
import { createDvm } from "../../support/migration";
import { found } from "../../support/poll";
import { createRestrictedIdentities, type Identity, RELAY_LEASE, type RestrictedIdentities } from "../../support/rbacIdentities";

const clusters = testClusters();
const run = `m${Date.now().toString(36)}`;
const testNamespace = `bundle-${run}`;

let identities: RestrictedIdentities;
let relayIdentity: Identity;

beforeAll(async () => {
  identities = await createRestrictedIdentities(clusters, run, testNamespace);
  relayIdentity = identities.relay;
});

afterAll(async () => {
  await identities?.remove();
});

describe("the relay bundle (dist/relay/relay.mjs)", () => {
  let child: ChildProcess | undefined;
  let lambda: Awaited<ReturnType<typeof startLambdaStandIn>> | undefined;
  let output = "";
  /** A wait polls every 100 ms for 30 s, through errors (the relay not listening yet); a timeout shows its output. */
  const WAIT = { timeoutMs: 30_000, intervalMs: 100, retryErrors: true, context: () => output };

  afterAll(async () => {
    if (child && child.exitCode === null) child.kill("SIGKILL");
    await lambda?.close();
  });

  it("builds, becomes ready with the relay's token, invokes the function for a new DVM and exits 0 on SIGTERM", async () => {
    const build = await promisify(execFile)(process.execPath, [join(ROOT, "infra", "deploy", "relay", "build.mjs")], { cwd: ROOT, encoding: "utf8" });
    expect(build.stdout).toMatch(/relay bundle: dist\/relay\/relay\.mjs/);
    const bundle = join(ROOT, "dist", "relay", "relay.mjs");

    lambda = await startLambdaStandIn();
    const dir = mkdtempSync(join(tmpdir(), "dvm-relay-bundle-"));
    const kubeconfig = join(dir, "relay.kubeconfig");
    writeFileSync(kubeconfig, relayIdentity.text, { mode: 0o600 });
    const healthPort = await findFreePort();
    const functionName = `dvm-it-${run}-phase`;
    // A clean environment: only what the Deployment's ConfigMap and Secret would give it.
    child = spawn(process.execPath, [bundle], {
      cwd: dir,
      env: {
        PATH: process.env.PATH ?? "",
        KUBECONFIG: kubeconfig,
        RELAY_FUNCTION_NAME: functionName,
        RELAY_NAMESPACE: testNamespace,
        // Leader election with the relay's own Role (moved to the test namespace): the bundle creates
        // the Lease, leads, and only then forwards.
        RELAY_LEASE_NAMESPACE: testNamespace,
        POD_NAME: "dvm-relay-bundle",
        RELAY_HEALTH_PORT: String(healthPort),
        RELAY_RESYNC_MS: "0",
        AWS_REGION: "us-east-1",
        AWS_ACCESS_KEY_ID: "test",
        AWS_SECRET_ACCESS_KEY: "test",
        AWS_ENDPOINT_URL_LAMBDA: lambda.url,
        LOG_LEVEL: "debug",
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    child.stdout!.on("data", (chunk: Buffer) => (output += chunk.toString()));
    child.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString()));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child!.once("exit", (code, signal) => resolve({ code, signal })),
    );
    const alive = () => {
      if (child!.exitCode !== null) throw new Error(`the relay exited with ${child!.exitCode}:\n${output}`);
    };

    const health = `http://127.0.0.1:${healthPort}`;
    const ready = await found(
      "the bundle's /readyz",
      async () => {
        alive();
        const response = await fetch(`${health}/readyz`);
        return response.status === 200 ? ((await response.json()) as { status: string; role: string }) : undefined;
      },
      { ...WAIT, timeoutMs: 60_000 },
    );
    expect(ready).toMatchObject({ status: "ready", role: "leader" });
    expect((await fetch(`${health}/healthz`)).status).toBe(200);

    const dvm = await createDvm(clusters.source, testNamespace, "bundle", {
      persistentVolumeClaims: [{ name: "data", namespace: testNamespace, targetStorageClass: "standard", targetAccessModes: ["ReadWriteOnce"] }],
    });
    const invocation = await found(
      "an Invoke call for the new DVM",
      async () => {
        alive();
        return lambda!.invocations.find((i) => i.payload.uid === dvm.metadata.uid);
      },
      WAIT,
    );
    expect(invocation).toMatchObject({
      functionName,
      invocationType: "Event",
      payload: { uid: dvm.metadata.uid, namespace: testNamespace, name: "bundle" },
    });

    child.kill("SIGTERM");
    const end = await exited;
    expect(end, output).toEqual({ code: 0, signal: null });
    expect(output).toMatch(/"stopping"/);
    // A clean stop hands the Lease back, so a standby would take over at once.
    const released = await clusters.source.makeApiClient(CoordinationV1Api).readNamespacedLease({ namespace: testNamespace, name: RELAY_LEASE });
    expect(released.spec?.holderIdentity).toBe("");
  });
});
