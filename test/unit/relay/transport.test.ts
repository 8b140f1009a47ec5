/**
 * Transports, the health server and the environment: the Lambda transport against a stand-in client
 * (what it sends, how it reads the answer), the in-process transport, /healthz and /readyz, and the
 * env validation that names the bad variable.
 */

import { hostname } from "node:os";
import type { InvokeCommand, LambdaClient } from "@aws-sdk/client-lambda";
import { afterEach, describe, expect, it } from "vitest";
import { functionPerPhase, LambdaTransport, sharedFunction } from "../../../src/aws/lambdaTransport";
import { ENV } from "../../../src/config/environment";
import { ConfigurationError } from "../../../src/config/error";
import type { ReconcileRequest } from "../../../src/contracts/request";
import { silentLogger } from "../../../src/lib/log";
import { parseRelayEnv } from "../../../src/relay/config";
import { type HealthServer, startHealthServer } from "../../../src/relay/health";
import { LambdaInvokeError, RemoteFunctionError } from "../../../src/relay/transport";
import { InProcessTransport } from "../../support/inProcessTransport";

const REQUEST: ReconcileRequest = { uid: "u-1", namespace: "ns", name: "dvm", generation: 1, resourceVersion: "9", reason: "test" };

/** A LambdaClient stand-in that records commands and answers with `response`. */
function fakeLambda(response: { StatusCode?: number; FunctionError?: string; Payload?: unknown }) {
  const sent: InvokeCommand[] = [];
  const client = {
    send: async (command: InvokeCommand) => {
      sent.push(command);
      const payload =
        response.Payload === undefined
          ? undefined
          : new TextEncoder().encode(typeof response.Payload === "string" ? response.Payload : JSON.stringify(response.Payload));
      return { ...response, Payload: payload };
    },
  } as unknown as LambdaClient;
  return { client, sent };
}

describe("LambdaTransport", () => {
  it("invokes asynchronously by default: 202 is accepted, the request is the payload", async () => {
    const lambda = fakeLambda({ StatusCode: 202 });
    const transport = new LambdaTransport({ client: lambda.client, functionFor: sharedFunction("dvm-phase") });
    expect(await transport.forward(REQUEST, { phase: "Started" })).toBeUndefined();
    const input = lambda.sent[0]!.input;
    expect(input.FunctionName).toBe("dvm-phase");
    expect(input.InvocationType).toBe("Event");
    expect(JSON.parse(new TextDecoder().decode(input.Payload as Uint8Array))).toEqual(REQUEST);
  });

  it("routes by phase with functionPerPhase; no or unknown phase goes to Started", async () => {
    const route = functionPerPhase("dvm-dev-");
    expect(route(REQUEST, { phase: "RunRsyncOperations" })).toBe("dvm-dev-RunRsyncOperations");
    expect(route(REQUEST, {})).toBe("dvm-dev-Started");
    expect(route(REQUEST, { phase: "Garbage" })).toBe("dvm-dev-Started");
  });

  it("rejects an asynchronous invocation that was not accepted", async () => {
    const transport = new LambdaTransport({ client: fakeLambda({ StatusCode: 500 }).client, functionFor: sharedFunction("f") });
    await expect(transport.forward(REQUEST)).rejects.toBeInstanceOf(LambdaInvokeError);
  });

  it("RequestResponse returns the function's RunResult", async () => {
    const result = { kind: "waiting", phase: "WaitForRsyncTransferPodsRunning", reason: "pods", requeueAfterMs: 3_000 };
    const lambda = fakeLambda({ StatusCode: 200, Payload: result });
    const transport = new LambdaTransport({ client: lambda.client, functionFor: sharedFunction("f"), invocationType: "RequestResponse" });
    expect(await transport.forward(REQUEST)).toEqual(result);
    expect(lambda.sent[0]!.input.InvocationType).toBe("RequestResponse");
  });

  it("a FunctionError in the response is an error carrying the function's message", async () => {
    const lambda = fakeLambda({ StatusCode: 200, FunctionError: "Unhandled", Payload: { errorType: "TypeError", errorMessage: "x is undefined" } });
    const transport = new LambdaTransport({ client: lambda.client, functionFor: sharedFunction("f"), invocationType: "RequestResponse" });
    const error = await transport.forward(REQUEST).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RemoteFunctionError);
    expect((error as Error).message).toContain("TypeError: x is undefined");
  });

  it("a payload that is not a RunResult counts as no result (the relay polls by the itinerary)", async () => {
    for (const Payload of ["not json", { kind: "nope" }]) {
      const transport = new LambdaTransport({
        client: fakeLambda({ StatusCode: 200, Payload }).client,
        functionFor: sharedFunction("f"),
        invocationType: "RequestResponse",
        log: silentLogger,
      });
      expect(await transport.forward(REQUEST)).toBeUndefined();
    }
  });
});

describe("InProcessTransport", () => {
  it("passes the request and context to the function and returns its result", async () => {
    const seen: unknown[] = [];
    const transport = new InProcessTransport(async (request, context) => {
      seen.push([request, context]);
      return { kind: "gone" };
    });
    expect(await transport.forward(REQUEST, { phase: "Started" })).toEqual({ kind: "gone" });
    expect(seen).toEqual([[REQUEST, { phase: "Started" }]]);
  });
});

describe("health server", () => {
  let server: HealthServer | undefined;
  afterEach(async () => {
    await server?.close();
    server = undefined;
  });

  it("/healthz is 200 while alive; /readyz follows readiness; both carry the stats", async () => {
    let ready = false;
    server = await startHealthServer({ port: 0, host: "127.0.0.1", ready: () => ready, stats: () => ({ forwarded: 7 }) });
    const get = async (path: string) => {
      const res = await fetch(`http://127.0.0.1:${server!.port}${path}`);
      return { status: res.status, body: (await res.json()) as { stats?: { forwarded: number } } };
    };
    expect(await get("/healthz")).toMatchObject({ status: 200, body: { stats: { forwarded: 7 } } });
    expect((await get("/readyz")).status).toBe(503);
    ready = true;
    expect(await get("/readyz")).toMatchObject({ status: 200, body: { stats: { forwarded: 7 } } });
    expect((await get("/nope")).status).toBe(404);
  });

  it("reports the replica's role next to the status when given one", async () => {
    server = await startHealthServer({ port: 0, host: "127.0.0.1", ready: () => true, role: () => "standby", stats: () => ({ role: "standby" }) });
    const res = await fetch(`http://127.0.0.1:${server.port}/readyz`);
    expect({ status: res.status, body: await res.json() }).toEqual({ status: 200, body: { status: "ready", role: "standby", stats: { role: "standby" } } });
  });
});

describe("relay environment", () => {
  it("reads a complete environment with defaults", () => {
    expect(parseRelayEnv({ [ENV.relayFunctionName]: "dvm-phase" })).toEqual({
      inCluster: false,
      logLevel: "info",
      target: { kind: "shared", name: "dvm-phase" },
      invocationType: "Event",
      healthPort: 8080,
      resyncMs: 60_000,
      concurrency: 16,
      metricsMaxDvmSeries: 1_000,
      podClusters: [],
      leaderElection: {
        enabled: true,
        namespace: "default",
        name: "dvm-relay",
        identity: `${hostname()}-${process.pid}`,
        leaseDurationMs: 15_000,
        renewDeadlineMs: 10_000,
        retryPeriodMs: 2_000,
      },
    });
    expect(
      parseRelayEnv({
        [ENV.kubeconfig]: "/k",
        [ENV.relayNamespace]: "migrations",
        [ENV.relayFunctionPrefix]: "dvm-dev-",
        [ENV.relayInvocationType]: "RequestResponse",
        [ENV.relayHealthPort]: "9000",
        [ENV.relayResyncMs]: "0",
        [ENV.relayMetricsMaxDvmSeries]: "0",
        [ENV.relayPodClusters]: "source=/s.kubeconfig,destination=/d.kubeconfig",
      }),
    ).toMatchObject({
      kubeconfigPath: "/k",
      namespace: "migrations",
      target: { kind: "perPhase", prefix: "dvm-dev-" },
      invocationType: "RequestResponse",
      healthPort: 9000,
      resyncMs: 0,
      metricsMaxDvmSeries: 0,
      podClusters: [
        { name: "source", kubeconfigPath: "/s.kubeconfig" },
        { name: "destination", kubeconfigPath: "/d.kubeconfig" },
      ],
    });
  });

  it("reads the leader election settings: the pod's name as identity, or off", () => {
    const env = { [ENV.relayFunctionName]: "a", [ENV.podName]: "dvm-relay-7d9-x2k", [ENV.relayLeaseNamespace]: "dvm-system" };
    expect(parseRelayEnv(env).leaderElection).toMatchObject({ enabled: true, namespace: "dvm-system", name: "dvm-relay", identity: "dvm-relay-7d9-x2k" });
    expect(parseRelayEnv({ ...env, [ENV.relayLeaseIdentity]: "explicit", [ENV.relayLeaseName]: "relay.ha" }).leaderElection).toMatchObject({
      identity: "explicit",
      name: "relay.ha",
    });
    expect(
      parseRelayEnv({ ...env, [ENV.relayLeaseDurationMs]: "4000", [ENV.relayLeaseRenewDeadlineMs]: "2500", [ENV.relayLeaseRetryPeriodMs]: "500" })
        .leaderElection,
    ).toMatchObject({ leaseDurationMs: 4_000, renewDeadlineMs: 2_500, retryPeriodMs: 500 });
    expect(parseRelayEnv({ ...env, [ENV.relayLeaderElection]: "false", [ENV.relayLeaseRenewDeadlineMs]: "20000" }).leaderElection).toEqual({ enabled: false });
  });

  it.each([
    [{}, ENV.relayFunctionName],
    [{ [ENV.relayFunctionName]: "a", [ENV.relayLeaderElection]: "yes" }, ENV.relayLeaderElection],
    [{ [ENV.relayFunctionName]: "a", [ENV.relayLeaseName]: "Not A Name" }, ENV.relayLeaseName],
    [{ [ENV.relayFunctionName]: "a", [ENV.relayLeaseNamespace]: "dvm_system" }, ENV.relayLeaseNamespace],
    [{ [ENV.relayFunctionName]: "a", [ENV.relayLeaseDurationMs]: "1500" }, ENV.relayLeaseDurationMs],
    // A renew deadline at or above the lease duration would let two leaders work at once.
    [{ [ENV.relayFunctionName]: "a", [ENV.relayLeaseDurationMs]: "10000", [ENV.relayLeaseRenewDeadlineMs]: "10000" }, ENV.relayLeaseRenewDeadlineMs],
    [{ [ENV.relayFunctionName]: "a", [ENV.relayLeaseRenewDeadlineMs]: "2000", [ENV.relayLeaseRetryPeriodMs]: "2000" }, ENV.relayLeaseRetryPeriodMs],
    [{ [ENV.relayFunctionName]: "a", [ENV.relayFunctionPrefix]: "b" }, ENV.relayFunctionPrefix],
    [{ [ENV.relayFunctionName]: "a", [ENV.relayHealthPort]: "eighty" }, ENV.relayHealthPort],
    [{ [ENV.relayFunctionName]: "a", [ENV.relayHealthPort]: "70000" }, ENV.relayHealthPort],
    [{ [ENV.relayFunctionName]: "a", [ENV.relayInvocationType]: "DryRun" }, ENV.relayInvocationType],
    [{ [ENV.relayFunctionName]: "a", [ENV.relayResyncMs]: "-5" }, ENV.relayResyncMs],
    [{ [ENV.relayFunctionName]: "a", [ENV.relayMetricsMaxDvmSeries]: "100001" }, ENV.relayMetricsMaxDvmSeries],
    [{ [ENV.relayFunctionName]: "a", [ENV.relayNamespace]: "Not_A_Namespace" }, ENV.relayNamespace],
    [{ [ENV.relayFunctionName]: "a", [ENV.relayPodClusters]: "source" }, ENV.relayPodClusters],
    [{ [ENV.relayFunctionName]: "a", [ENV.logLevel]: "loud" }, ENV.logLevel],
  ])("rejects %o naming %s", (env, variable) => {
    expect(() => parseRelayEnv(env)).toThrow(ConfigurationError);
    expect(() => parseRelayEnv(env)).toThrow(new RegExp(`${variable}:`));
  });
});
