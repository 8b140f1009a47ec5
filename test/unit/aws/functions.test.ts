/**
 * The phase function's logic without Lambda: request parsing, the return-or-throw decision, metrics,
 * the Powertools logger adapter and the kubeconfig source. The bundled handler itself runs under
 * serverless-offline in test/integration/serverless.test.ts.
 */

import { Logger as PowertoolsLogger } from "@aws-lambda-powertools/logger";
import { GetParameterCommand } from "@aws-sdk/client-ssm";
import { KubeConfig } from "@kubernetes/client-node";
import { afterEach, describe, expect, it, vi } from "vitest";
import { classifyError } from "../../../src/aws/errors";
import { createKubeconfigSource } from "../../../src/aws/kubeconfigSource";
import { onceAsync } from "../../../src/aws/once";
import { createPhaseHandler } from "../../../src/aws/phaseHandler";
import type { MetricsWriter } from "../../../src/aws/phaseMetrics";
import { powertoolsLogger } from "../../../src/aws/powertoolsLogger";
import { parseReconcileEvent } from "../../../src/aws/reconcileEvent";
import { runnerFromEnv } from "../../../src/aws/runnerFromEnv";
import { ENV } from "../../../src/config/environment";
import { ConfigurationError } from "../../../src/config/error";
import type { ReconcileRequest, RunResult, RunStats } from "../../../src/contracts/request";
import { POLICY_ENV } from "../../../src/dvm/policyConfig";
import { KubeApiError } from "../../../src/kube/errors";
import { InvalidLedgerKeyError, LedgerUnavailableError } from "../../../src/ledger/errors";
import { type LogAttributes, type Logger, silentLogger } from "../../../src/lib/log";

const REQUEST: ReconcileRequest = { uid: "3f1c", namespace: "openshift-migration", name: "dvm-1", generation: 2 };

class MetricsRecorder implements MetricsWriter {
  readonly dimensions: Record<string, string> = {};
  readonly values: Record<string, { unit: string; value: number }> = {};
  addDimension(name: string, value: string): this {
    this.dimensions[name] = value;
    return this;
  }
  addMetric(name: string, unit: string, value: number): void {
    this.values[name] = { unit, value };
  }
}

interface Line {
  level: string;
  message: string;
  attributes: LogAttributes;
}

function capturingLogger(lines: Line[] = [], base: LogAttributes = {}): Logger & { lines: Line[] } {
  const at = (level: string) => (message: string, attributes?: LogAttributes) => lines.push({ level, message, attributes: { ...base, ...attributes } });
  return {
    lines,
    debug: at("debug"),
    info: at("info"),
    warn: at("warn"),
    error: at("error"),
    child: (attributes) => capturingLogger(lines, { ...base, ...attributes }),
  };
}

function handlerWith(run: (request: ReconcileRequest) => Promise<{ result: RunResult; stats: RunStats }>) {
  const log = capturingLogger();
  const metrics = new MetricsRecorder();
  const runWithStats = vi.fn(run);
  const handle = createPhaseHandler({ runner: async () => ({ runWithStats }), log, metrics });
  return { handle, log, metrics, runWithStats };
}

const stats = (extra: Partial<RunStats> = {}): RunStats => ({ durationMs: 42, statusConflicts: 0, ...extra });

describe("parseReconcileEvent", () => {
  it("accepts the relay's payload, a JSON string of it, and an EventBridge event carrying it", () => {
    expect(parseReconcileEvent(REQUEST)).toEqual({ ok: true, request: REQUEST });
    expect(parseReconcileEvent(JSON.stringify(REQUEST))).toEqual({ ok: true, request: REQUEST });
    expect(parseReconcileEvent({ "detail-type": "ReconcileRequest", source: "dvm.relay", detail: REQUEST })).toEqual({ ok: true, request: REQUEST });
  });

  it("names the failing field", () => {
    const parsed = parseReconcileEvent({ ...REQUEST, generation: -1 });
    expect(parsed.ok).toBe(false);
    if (!parsed.ok) expect(parsed.issues[0]?.field).toBe("generation");
    const missing = parseReconcileEvent({ uid: "u", namespace: "ns" });
    if (!missing.ok) expect(missing.issues.map((i) => i.field)).toEqual(["name"]);
  });

  it("calls a payload that is not an object 'request'", () => {
    for (const event of [null, 7, "not json", []]) {
      const parsed = parseReconcileEvent(event);
      expect(parsed.ok).toBe(false);
      if (!parsed.ok) expect(parsed.issues[0]?.field).toBe("request");
    }
  });
});

describe("phase handler", () => {
  it("runs the parsed request and returns the runner's result with metrics per phase", async () => {
    const result: RunResult = { kind: "advanced", phase: "CreateDestinationPVCs", next: "CreateRsyncEndpoint", requeueAfterMs: 100 };
    const { handle, metrics, runWithStats } = handlerWith(async () => ({ result, stats: stats({ statusConflicts: 2, takeover: true, attempt: 2 }) }));
    await expect(handle({ ...REQUEST, reason: "watch" })).resolves.toEqual(result);
    expect(runWithStats).toHaveBeenCalledWith({ ...REQUEST, reason: "watch" });
    expect(metrics.dimensions).toEqual({ Phase: "CreateDestinationPVCs" });
    expect(metrics.values).toEqual({
      PhaseDuration: { unit: "Milliseconds", value: 42 },
      DuplicatesSuppressed: { unit: "Count", value: 0 },
      StatusConflicts: { unit: "Count", value: 2 },
      LeaseTakeovers: { unit: "Count", value: 1 },
      Retries: { unit: "Count", value: 0 },
    });
  });

  it("counts suppressed duplicates and retries", async () => {
    const duplicate: RunResult = { kind: "duplicate", phase: "Started", next: "CleanStaleRsyncResources", statusRepaired: false, requeueAfterMs: 100 };
    const first = handlerWith(async () => ({ result: duplicate, stats: stats() }));
    await first.handle(REQUEST);
    expect(first.metrics.values.DuplicatesSuppressed?.value).toBe(1);

    const retry: RunResult = { kind: "retry", phase: "CreateRsyncEndpoint", error: "boom", retryAfterMs: 500 };
    const second = handlerWith(async () => ({ result: retry, stats: stats() }));
    await expect(second.handle(REQUEST)).resolves.toEqual(retry);
    expect(second.metrics.values.Retries?.value).toBe(1);
  });

  it("returns (does not throw) for an invalid request, logging the field, without running anything", async () => {
    const { handle, log, metrics, runWithStats } = handlerWith(async () => ({ result: { kind: "gone" }, stats: stats() }));
    const result = await handle({ uid: "", namespace: "ns", name: "x" });
    expect(result).toMatchObject({ kind: "invalid", field: "uid" });
    expect(runWithStats).not.toHaveBeenCalled();
    expect(log.lines).toEqual([expect.objectContaining({ level: "error", attributes: expect.objectContaining({ field: "uid" }) })]);
    expect(log.lines[0]?.message).toContain("uid");
    expect(metrics.values.RejectedRequests?.value).toBe(1);
  });

  it.each([
    ["DynamoDB throttled through every retry", new LedgerUnavailableError("claim", 5, Object.assign(new Error("slow down"), { name: "ThrottlingException" }))],
    ["Kubernetes 429", new KubeApiError("read: too many requests", 429, "TooManyRequests")],
    ["Kubernetes 503", new KubeApiError("read: unavailable", 503, undefined)],
    ["Kubernetes 409 conflict", new KubeApiError("write status: conflict", 409, "Conflict")],
    ["Kubernetes unreachable", new KubeApiError("read: connect ECONNREFUSED", undefined, undefined)],
    ["SSM 500", Object.assign(new Error("internal"), { name: "InternalServerError", $metadata: { httpStatusCode: 500 } })],
    ["a dropped socket", Object.assign(new TypeError("fetch failed"), { cause: Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET" }) })],
  ])("throws a retryable error (%s) so Lambda retries the event", async (_what, error) => {
    expect(classifyError(error)).toBe("retryable");
    const { handle, log, metrics } = handlerWith(async () => {
      throw error;
    });
    await expect(handle(REQUEST)).rejects.toBe(error);
    expect(log.lines[0]).toMatchObject({ level: "error", attributes: { uid: REQUEST.uid, disposition: "retryable" } });
    expect(metrics.values.InvocationErrors?.value).toBe(1);
  });

  it("throws unexpected errors too, so the event ends in the dead-letter queue instead of vanishing", async () => {
    for (const error of [
      new TypeError("x is undefined"),
      new KubeApiError("read: forbidden", 403, "Forbidden"),
      new ConfigurationError("LEDGER_TABLE_NAME is not set"),
    ]) {
      expect(classifyError(error)).toBe("unexpected");
      const { handle } = handlerWith(async () => {
        throw error;
      });
      await expect(handle(REQUEST)).rejects.toBe(error);
    }
  });

  it("returns a rejected result for an error no retry can fix", async () => {
    const error = new InvalidLedgerKeyError("uid", "a#b", "must not contain #");
    expect(classifyError(error)).toBe("terminal");
    const { handle, metrics } = handlerWith(async () => {
      throw error;
    });
    await expect(handle(REQUEST)).resolves.toMatchObject({ kind: "rejected", error: expect.stringContaining("uid") });
    expect(metrics.values.RejectedRequests?.value).toBe(1);
  });
});

describe("onceAsync", () => {
  it("loads once, but does not keep a failure", async () => {
    let calls = 0;
    const load = onceAsync(async () => {
      calls++;
      if (calls === 1) throw new Error("SSM throttled");
      return calls;
    });
    await expect(load()).rejects.toThrow("SSM throttled");
    await expect(Promise.all([load(), load()])).resolves.toEqual([2, 2]);
    await expect(load()).resolves.toBe(2);
    expect(calls).toBe(2);
  });
});

describe("powertoolsLogger", () => {
  afterEach(() => vi.restoreAllMocks());

  function captureStdio(): Record<string, unknown>[] {
    const lines: Record<string, unknown>[] = [];
    const capture = (chunk: unknown) => {
      for (const line of String(chunk).split("\n").filter(Boolean)) lines.push(JSON.parse(line) as Record<string, unknown>);
      return true;
    };
    vi.spyOn(process.stdout, "write").mockImplementation(capture);
    vi.spyOn(process.stderr, "write").mockImplementation(capture);
    return lines;
  }

  it("writes every line of a child with the runner's attributes as top-level keys", () => {
    const lines = captureStdio();
    const log = powertoolsLogger(new PowertoolsLogger({ serviceName: "dvm-phase-test", logLevel: "DEBUG" }));
    const phaseLog = log.child({ uid: "3f1c", phase: "Started", generation: 2 }).child({ attempt: 3 });
    phaseLog.info("phase started");
    phaseLog.warn("lease takeover", { holderAttempt: 2 });
    log.info("no context");
    expect(lines).toEqual([
      expect.objectContaining({ level: "INFO", message: "phase started", service: "dvm-phase-test", uid: "3f1c", phase: "Started", generation: 2, attempt: 3 }),
      expect.objectContaining({ level: "WARN", message: "lease takeover", uid: "3f1c", attempt: 3, holderAttempt: 2 }),
      expect.objectContaining({ level: "INFO", message: "no context" }),
    ]);
    expect(lines[2]).not.toHaveProperty("uid");
  });
});

const KUBECONFIG_TEXT = `apiVersion: v1
kind: Config
clusters:
- name: host
  cluster: { server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true }
users:
- name: admin
  user: { token: "s3cr3t-token-value" }
contexts:
- name: host
  context: { cluster: host, user: admin }
current-context: host
`;

describe("kubeconfig source", () => {
  function fakeSsm(value: string | undefined) {
    const send = vi.fn(async (command: GetParameterCommand) => {
      expect(command).toBeInstanceOf(GetParameterCommand);
      return { Parameter: value === undefined ? undefined : { Name: command.input.Name, Value: value } };
    });
    return { send: send as unknown as import("@aws-sdk/client-ssm").SSMClient["send"], calls: send };
  }

  it("reads the SecureString once, decrypted, for the life of the container", async () => {
    const ssm = fakeSsm(KUBECONFIG_TEXT);
    const source = createKubeconfigSource({ parameterName: "/dvm-serverless/dev/host-kubeconfig", ssm });
    const [a, b] = await Promise.all([source(), source()]);
    expect(a).toBe(b);
    expect(a.getCurrentCluster()?.server).toBe("https://127.0.0.1:6443");
    expect(ssm.calls).toHaveBeenCalledTimes(1);
    expect(ssm.calls.mock.calls[0]?.[0].input).toEqual({ Name: "/dvm-serverless/dev/host-kubeconfig", WithDecryption: true });
  });

  it("never puts the kubeconfig's content in an error", async () => {
    const broken = `${KUBECONFIG_TEXT}\n  : [unbalanced`;
    const source = createKubeconfigSource({ parameterName: "/p", ssm: fakeSsm(broken) });
    const error = await source().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigurationError);
    expect(String((error as Error).message)).toContain("/p");
    expect(JSON.stringify(error, Object.getOwnPropertyNames(error))).not.toContain("s3cr3t");

    await expect(createKubeconfigSource({ parameterName: "/empty", ssm: fakeSsm(undefined) })()).rejects.toThrow(/\/empty has no value/);
  });

  it("falls back to the local kubeconfig when no parameter is configured", async () => {
    const local = new KubeConfig();
    local.loadFromString(KUBECONFIG_TEXT);
    const loadLocal = vi.fn(() => local);
    for (const parameterName of [undefined, "", "  "]) {
      const source = createKubeconfigSource({ parameterName, loadLocal });
      await expect(source()).resolves.toBe(local);
    }
    expect(loadLocal).toHaveBeenCalledTimes(3);
  });
});

describe("runnerFromEnv", () => {
  it("refuses a bad migration policy setting with a configuration error naming the variable", async () => {
    const runner = runnerFromEnv({ [ENV.ledgerTable]: "t", [POLICY_ENV.defaultTransferImage]: "quay.io/konveyor/rsync-transfer:latest" }, silentLogger);
    const error = await runner().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigurationError);
    expect((error as Error).message).toMatch(/DVM_DEFAULT_TRANSFER_IMAGE: must be pinned/);
  });
});
