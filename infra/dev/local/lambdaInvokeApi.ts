/**
 * Lambda's Invoke API for named functions, served by AWS's runtime emulator: the relay's Lambda transport
 * (src/relay/lambdaTransport.ts, @aws-sdk/client-lambda) calls POST /2015-03-31/functions/<name>/invocations
 * here unchanged. The emulator itself serves one function, at one fixed path
 * (/2015-03-31/functions/function/invocations), one invocation at a time, and answers a function error
 * or a timeout with a plain 200. So this router, like Lambda's front end:
 *   - finds the function by name (or ARN, or partial ARN; $LATEST only), 404 ResourceNotFoundException
 *     otherwise;
 *   - gives each function a pool of sandboxes (infra/dev/local/lambdaRuntime.ts), one invocation each at a
 *     time, started as invocations need them (each start a cold start) up to the function's concurrency;
 *     beyond it an invocation waits for a sandbox to be free (where Lambda would throttle synchronous
 *     ones with 429);
 *   - RequestResponse: the function's answer, with X-Amz-Function-Error: Unhandled for an error or a
 *     timeout (errorType Sandbox.Timedout, as Lambda reports it); Event: 202 at once, the invocation runs
 *     after (once: Lambda's async retries and destinations are not emulated); DryRun: 204.
 */
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { errorMessage } from "../../../src/lib/errorMessage";
import type { Logger } from "../../../src/lib/log";
import {
  type InvocationReport,
  invocationReports,
  type LambdaFunctionSpec,
  type LambdaRuntimeTools,
  type LambdaSandbox,
  lambdaRuntimeTools,
  startLambdaSandbox,
} from "./lambdaRuntime";

/** Lambda's limit on a synchronous invocation's payload (6 MB). */
export const MAX_PAYLOAD_BYTES = 6 * 1024 * 1024;
const DEFAULT_CONCURRENCY = 4;
const INVOKE_PATH = /^\/2015-03-31\/functions\/([^/]+)\/invocations$/;

export interface LambdaInvokeApiOptions {
  functions: LambdaFunctionSpec[];
  /** Each sandbox logs to <logDir>/<function>-<n>.log (the emulator's lines and the function's). */
  logDir: string;
  log: Logger;
  tools?: LambdaRuntimeTools;
}

export interface LambdaInvokeApi {
  /** http://127.0.0.1:<port>: `endpoint` of a LambdaClient. */
  endpoint: string;
  /** The emulator's REPORT lines for `name`'s invocations so far, cold starts with their init duration. */
  reports(name: string): InvocationReport[];
  /** The log files of `name`'s sandboxes. */
  logFiles(name: string): string[];
  stop(): Promise<void>;
}

/** The function name in an Invoke API path segment: a name, an ARN or a partial ARN, maybe qualified. */
export function functionNameOf(segment: string): string {
  const decoded = decodeURIComponent(segment);
  const afterFunction = decoded.includes("function:") ? decoded.slice(decoded.lastIndexOf("function:") + "function:".length) : decoded;
  return afterFunction.split(":")[0] ?? afterFunction;
}

export interface LambdaAnswer {
  payload: string;
  /** Lambda's X-Amz-Function-Error; unset when the function returned normally. */
  functionError?: "Unhandled";
}

/**
 * What Lambda answers for what the emulator answered: the emulator reports a timeout and a function
 * error (the runtime client's {errorType, errorMessage, trace}) as a plain 200, and a failed init as 502.
 */
export function lambdaAnswer(status: number, body: string, requestId: string): LambdaAnswer {
  const timedOut = /^Task timed out after ([\d.]+) seconds$/.exec(body.trim());
  if (timedOut) {
    return {
      functionError: "Unhandled",
      payload: JSON.stringify({ errorType: "Sandbox.Timedout", errorMessage: `RequestId: ${requestId} Error: Task timed out after ${timedOut[1]} seconds` }),
    };
  }
  if (status === 200 && !isRuntimeError(body)) return { payload: body };
  if (status === 200 || status === 502) {
    return {
      functionError: "Unhandled",
      payload: isRuntimeError(body) ? body : JSON.stringify({ errorType: "Runtime.Unknown", errorMessage: body || `status ${status}` }),
    };
  }
  throw new Error(`the runtime emulator answered ${status}: ${body.slice(0, 300)}`);
}

/** The runtime client's error document: {errorType, errorMessage, trace}. */
function isRuntimeError(body: string): boolean {
  try {
    const value = JSON.parse(body) as Record<string, unknown> | null;
    return (
      typeof value === "object" && value !== null && typeof value.errorType === "string" && typeof value.errorMessage === "string" && Array.isArray(value.trace)
    );
  } catch {
    return false;
  }
}

/** Up to `max` sandboxes of one function, each serving one invocation at a time; warm ones first. */
class SandboxPool {
  private readonly idle: LambdaSandbox[] = [];
  private readonly all: LambdaSandbox[] = [];
  private readonly waiting: ((sandbox: LambdaSandbox) => void)[] = [];
  private starting = 0;
  private started = 0;
  private stopped = false;

  constructor(
    private readonly spec: LambdaFunctionSpec,
    private readonly logDir: string,
    private readonly tools: LambdaRuntimeTools,
  ) {}

  get logFiles(): string[] {
    return Array.from({ length: this.started }, (_, i) => this.logFile(i + 1));
  }

  private logFile(n: number): string {
    return join(this.logDir, `${this.spec.name}-${n}.log`);
  }

  async acquire(): Promise<LambdaSandbox> {
    if (this.stopped) throw new Error(`${this.spec.name}: the Invoke API is stopping`);
    // The most recently used first, as Lambda reuses a warm sandbox.
    for (let sandbox = this.idle.pop(); sandbox; sandbox = this.idle.pop()) if (sandbox.isRunning()) return sandbox;
    const max = this.spec.concurrency ?? DEFAULT_CONCURRENCY;
    if (this.all.length + this.starting < max) {
      this.starting++;
      try {
        const sandbox = await startLambdaSandbox(this.spec, this.logFile(++this.started), this.tools);
        this.all.push(sandbox);
        return sandbox;
      } finally {
        this.starting--;
      }
    }
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  release(sandbox: LambdaSandbox): void {
    const next = this.waiting.shift();
    if (next) next(sandbox);
    else this.idle.push(sandbox);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.all.map((sandbox) => sandbox.stop()));
  }
}

export async function startLambdaInvokeApi(options: LambdaInvokeApiOptions): Promise<LambdaInvokeApi> {
  const tools = options.tools ?? lambdaRuntimeTools();
  const pools = new Map(options.functions.map((spec) => [spec.name, new SandboxPool(spec, options.logDir, tools)]));
  const log = options.log;

  async function run(pool: SandboxPool, payload: Buffer, requestId: string): Promise<LambdaAnswer> {
    const sandbox = await pool.acquire();
    try {
      const res = await fetch(sandbox.invokeUrl, { method: "POST", body: payload, headers: { "X-Amzn-RequestId": requestId } });
      return lambdaAnswer(res.status, await res.text(), requestId);
    } finally {
      pool.release(sandbox);
    }
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = INVOKE_PATH.exec(new URL(req.url ?? "/", "http://localhost").pathname);
    if (req.method !== "POST" || !path?.[1]) return sendError(res, 404, "UnknownOperationException", `no such operation: ${req.method} ${req.url}`);
    const name = functionNameOf(path[1]);
    const pool = pools.get(name);
    if (!pool) return sendError(res, 404, "ResourceNotFoundException", `Function not found: ${name}`);
    const payload = await readBody(req, MAX_PAYLOAD_BYTES);
    if (!payload)
      return sendError(res, 413, "RequestTooLargeException", `Request must be smaller than ${MAX_PAYLOAD_BYTES} bytes for the InvokeFunction operation`);
    const requestId = randomUUID();
    const type = String(req.headers["x-amz-invocation-type"] ?? "RequestResponse");
    if (type === "DryRun") return void res.writeHead(204, { "x-amzn-RequestId": requestId }).end();
    if (type === "Event") {
      res.writeHead(202, { "x-amzn-RequestId": requestId }).end();
      run(pool, payload, requestId).then(
        (answer) => {
          if (answer.functionError)
            log.warn("async invocation failed (not retried here)", { function: name, requestId, payload: answer.payload.slice(0, 500) });
        },
        (error: unknown) => log.warn("async invocation could not run", { function: name, requestId, error: errorMessage(error) }),
      );
      return;
    }
    if (type !== "RequestResponse")
      return sendError(res, 400, "InvalidParameterValueException", `X-Amz-Invocation-Type must be RequestResponse, Event or DryRun, not ${type}`);
    const answer = await run(pool, payload, requestId);
    res
      .writeHead(200, {
        "Content-Type": "application/json",
        "x-amzn-RequestId": requestId,
        "X-Amz-Executed-Version": "$LATEST",
        ...(answer.functionError ? { "X-Amz-Function-Error": answer.functionError } : {}),
      })
      .end(answer.payload);
  }

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      log.error("invoke failed in the runtime emulator", { error: errorMessage(error) });
      if (!res.headersSent) sendError(res, 500, "ServiceException", errorMessage(error));
      else res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;

  const poolOf = (name: string): SandboxPool => {
    const pool = pools.get(name);
    if (!pool) throw new Error(`no function ${name} behind this Invoke API`);
    return pool;
  };
  return {
    endpoint: `http://127.0.0.1:${port}`,
    logFiles: (name) => poolOf(name).logFiles,
    reports: (name) => poolOf(name).logFiles.flatMap((file) => invocationReports(readFileSync(file, "utf8"))),
    stop: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await Promise.all([...pools.values()].map((pool) => pool.stop()));
    },
  };
}

function sendError(res: ServerResponse, status: number, type: string, message: string): void {
  res.writeHead(status, { "Content-Type": "application/json", "x-amzn-ErrorType": type }).end(JSON.stringify({ Type: "User", message }));
}

/** The request body, or undefined when it is larger than `limit`. */
async function readBody(req: IncomingMessage, limit: number): Promise<Buffer | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > limit) return undefined;
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}
