/**
 * The pure parts of the local Lambda runtime (infra/dev/local/lambdaRuntime.ts, lambdaInvokeApi.ts): what the
 * function's environment holds, how the emulator's answers become Lambda's, which function an Invoke
 * API path names, and the emulator's REPORT lines. The emulator itself runs in
 * test/integration/lambdaRuntime.test.ts.
 */
import { describe, expect, it } from "vitest";
import { functionNameOf, lambdaAnswer } from "../../../infra/dev/local/lambdaInvokeApi";
import { invocationReports, type LambdaFunctionSpec, lambdaRuntimeTools, runtimeEnvironment } from "../../../infra/dev/local/lambdaRuntime";

const TOOLS = { node: "/cache/node-v24.22.3/bin/node", nodeVersion: "v24.22.3", rie: "/cache/bin/aws-lambda-rie", ric: "/cache/ric/aws-lambda-ric/index.mjs" };
const SPEC: LambdaFunctionSpec = {
  name: "dvm-phase",
  codeDir: "/task",
  handler: "functions/phase.handler",
  environment: { LEDGER_TABLE_NAME: "ledger", AWS_REGION: "eu-west-1" },
  timeoutSeconds: 60,
  memoryMb: 512,
  region: "us-east-1",
  credentials: { accessKeyId: "AKID", secretAccessKey: "secret", sessionToken: "token" },
};

describe("the function's environment", () => {
  it("holds what Lambda sets: runtime, task root, handler, name, memory, timeout, region, the role's credentials", () => {
    expect(runtimeEnvironment(SPEC, TOOLS)).toMatchObject({
      AWS_EXECUTION_ENV: "AWS_Lambda_nodejs24.x",
      LAMBDA_TASK_ROOT: "/task",
      _HANDLER: "functions/phase.handler",
      AWS_LAMBDA_FUNCTION_NAME: "dvm-phase",
      AWS_LAMBDA_FUNCTION_MEMORY_SIZE: "512",
      AWS_LAMBDA_FUNCTION_TIMEOUT: "60",
      AWS_REGION: "us-east-1",
      AWS_DEFAULT_REGION: "us-east-1",
      AWS_ACCESS_KEY_ID: "AKID",
      AWS_SECRET_ACCESS_KEY: "secret",
      AWS_SESSION_TOKEN: "token",
    });
    expect(runtimeEnvironment(SPEC, TOOLS).PATH?.split(":")[0]).toBe("/cache/node-v24.22.3/bin");
  });

  it("says how to build the runtime when it is not there", () => {
    expect(() => lambdaRuntimeTools({ DVM_LAMBDA_RUNTIME_DIR: "/nonexistent/dvm-lambda" })).toThrow(
      "/nonexistent/dvm-lambda/runtime.json is missing; run bash infra/dev/lambda/build.sh",
    );
  });
});

describe("the emulator's answers as Lambda's", () => {
  it("passes a result through", () => {
    expect(lambdaAnswer(200, '{"kind":"gone"}', "r1")).toEqual({ payload: '{"kind":"gone"}' });
  });

  it("marks the runtime client's error document as an unhandled function error", () => {
    const error = JSON.stringify({ errorType: "Error", errorMessage: "boom", trace: ["Error: boom"] });
    expect(lambdaAnswer(200, error, "r1")).toEqual({ functionError: "Unhandled", payload: error });
    // A result that merely has an errorMessage is a result.
    expect(lambdaAnswer(200, '{"errorMessage":"x"}', "r1")).toEqual({ payload: '{"errorMessage":"x"}' });
  });

  it("reports a timeout as Lambda does: Sandbox.Timedout, an unhandled error", () => {
    const answer = lambdaAnswer(200, "Task timed out after 6.00 seconds", "r2");
    expect(answer.functionError).toBe("Unhandled");
    expect(JSON.parse(answer.payload)).toEqual({ errorType: "Sandbox.Timedout", errorMessage: "RequestId: r2 Error: Task timed out after 6.00 seconds" });
  });

  it("reports a failed init (502) as an unhandled error, and anything else as the emulator's failure", () => {
    expect(lambdaAnswer(502, "", "r3")).toEqual({
      functionError: "Unhandled",
      payload: JSON.stringify({ errorType: "Runtime.Unknown", errorMessage: "status 502" }),
    });
    expect(() => lambdaAnswer(400, "", "r4")).toThrow("the runtime emulator answered 400");
  });
});

describe("the function an Invoke API path names", () => {
  it("takes a name, an ARN or a partial ARN, with or without a qualifier", () => {
    expect(functionNameOf("dvm-phase")).toBe("dvm-phase");
    expect(functionNameOf(encodeURIComponent("arn:aws:lambda:us-east-1:123456789012:function:dvm-phase"))).toBe("dvm-phase");
    expect(functionNameOf(encodeURIComponent("123456789012:function:dvm-phase:$LATEST"))).toBe("dvm-phase");
    expect(functionNameOf("dvm-phase:live")).toBe("dvm-phase");
  });
});

describe("the emulator's REPORT lines", () => {
  it("gives each invocation its duration, and a cold start the init duration rapid measured", () => {
    const log = [
      "03 Dec 2026 08:25:18,170 [INFO] (rapid) INIT REPORT(durationMs: 2112.022000)",
      "END RequestId: a",
      "REPORT RequestId: a\tInit Duration: 0.03 ms\tDuration: 2257.46 ms\tBilled Duration: 2258 ms\tMemory Size: 512 MB\tMax Memory Used: 512 MB\t",
      "REPORT RequestId: b\tDuration: 34.89 ms\tBilled Duration: 35 ms\tMemory Size: 512 MB\tMax Memory Used: 512 MB\t",
    ].join("\n");
    expect(invocationReports(log)).toEqual([
      { requestId: "a", durationMs: 2257.46, initDurationMs: 2112.022 },
      { requestId: "b", durationMs: 34.89 },
    ]);
  });
});
