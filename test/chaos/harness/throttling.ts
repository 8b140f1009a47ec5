/**
 * Throttling of the services around the phase function, in bursts longer than any client's own quick
 * retries (issue 24, item 5):
 *   - an API server front that answers 429 TooManyRequests with Retry-After to every request but
 *     watches during a burst, as the API server's priority and fairness does under load. It speaks
 *     plain HTTP to its clients and forwards to the real API server with the harness's credentials, so
 *     the runner sees real 429 answers with real headers;
 *   - a stand-in of Lambda's Invoke API that answers TooManyRequestsException (429, Retry-After) during a
 *     burst, and otherwise accepts an Event invocation (202) and runs it through the deliverer, as
 *     Lambda's asynchronous invocation does. The relay reaches it through the real LambdaTransport and
 *     the AWS SDK's own retries.
 */

import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { request as httpsRequest, type RequestOptions } from "node:https";
import type { AddressInfo } from "node:net";
import { KubeConfig } from "@kubernetes/client-node";
import type { ReconcileRequest } from "../../../src/contracts/request";
import { inBurst, type ThrottleBursts } from "./dynamoFaults";

export interface BurstOptions extends ThrottleBursts {
  /** The Retry-After the throttled answers carry, seconds. */
  retryAfterSeconds: number;
  /** In [0, 1): shifts the first window. */
  random: () => number;
}

async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function close(server: Server): Promise<void> {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(() => resolve()));
}

/** The API server behind a front that throttles it in bursts. */
export class ThrottlingApiServer {
  /** Requests answered 429 instead of being passed on. */
  throttled = 0;
  forwarded = 0;
  private url = "";
  private readonly origin: number;

  private constructor(
    private readonly upstream: KubeConfig,
    private readonly server: Server,
    private readonly bursts: BurstOptions,
  ) {
    this.origin = Date.now() - Math.floor(bursts.random() * bursts.periodMs);
  }

  static async start(upstream: KubeConfig, bursts: BurstOptions): Promise<ThrottlingApiServer> {
    let front!: ThrottlingApiServer;
    const server = createServer((req, res) => void front.handle(req, res));
    front = new ThrottlingApiServer(upstream, server, bursts);
    front.url = await listen(server);
    return front;
  }

  /** A kubeconfig for the front: plain HTTP, the front adds the credentials. */
  kubeConfig(): KubeConfig {
    const kc = new KubeConfig();
    kc.loadFromOptions({
      // Plain HTTP on loopback: client-node allows it only with skipTLSVerify.
      clusters: [{ name: "throttled", server: this.url, skipTLSVerify: true }],
      users: [{ name: "front" }],
      contexts: [{ name: "throttled", cluster: "throttled", user: "front" }],
      currentContext: "throttled",
    });
    return kc;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://front");
    const watch = url.searchParams.get("watch") === "true" || url.searchParams.get("watch") === "1";
    if (!watch && inBurst(this.bursts, this.origin, Date.now())) {
      this.throttled++;
      req.resume();
      const seconds = this.bursts.retryAfterSeconds;
      res.writeHead(429, { "content-type": "application/json", "retry-after": String(seconds) }).end(
        JSON.stringify({
          kind: "Status",
          apiVersion: "v1",
          status: "Failure",
          message: "Too many requests, please try again later.",
          reason: "TooManyRequests",
          details: { retryAfterSeconds: seconds },
          code: 429,
        }),
      );
      return;
    }
    this.forwarded++;
    const target = new URL(this.upstream.getCurrentCluster()!.server);
    const headers = { ...req.headers };
    delete headers.host;
    const options: RequestOptions = { method: req.method ?? "GET", headers };
    await this.upstream.applyToHTTPSOptions(options);
    const upstream = httpsRequest(new URL(url.pathname + url.search, target), options, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    upstream.on("error", () => res.destroy());
    res.on("close", () => upstream.destroy());
    req.pipe(upstream);
  }

  close(): Promise<void> {
    return close(this.server);
  }
}

/** Lambda's Invoke API for Event invocations, throttled in bursts; accepted ones run through `run`. */
export class ThrottlingLambda {
  throttled = 0;
  accepted = 0;
  url = "";
  private readonly origin: number;
  private readonly running = new Set<Promise<unknown>>();

  private constructor(
    private readonly server: Server,
    private readonly bursts: BurstOptions,
    private readonly run: (request: ReconcileRequest) => Promise<unknown>,
  ) {
    this.origin = Date.now() - Math.floor(bursts.random() * bursts.periodMs);
  }

  static async start(bursts: BurstOptions, run: (request: ReconcileRequest) => Promise<unknown>): Promise<ThrottlingLambda> {
    let lambda!: ThrottlingLambda;
    const server = createServer((req, res) => lambda.handle(req, res));
    lambda = new ThrottlingLambda(server, bursts, run);
    lambda.url = await listen(server);
    return lambda;
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      if (inBurst(this.bursts, this.origin, Date.now())) {
        this.throttled++;
        res
          .writeHead(429, {
            "content-type": "application/json",
            "x-amzn-errortype": "TooManyRequestsException",
            "retry-after": String(this.bursts.retryAfterSeconds),
          })
          .end(JSON.stringify({ Reason: "ReservedFunctionConcurrentInvocationLimitExceeded", Type: "User", message: "Rate Exceeded." }));
        return;
      }
      if (req.headers["x-amz-invocation-type"] !== "Event") {
        res.writeHead(400, { "content-type": "application/json", "x-amzn-errortype": "InvalidParameterValueException" }).end("{}");
        return;
      }
      this.accepted++;
      const request = JSON.parse(Buffer.concat(chunks).toString("utf8")) as ReconcileRequest;
      const running = this.run(request).catch(() => undefined);
      this.running.add(running);
      void running.finally(() => this.running.delete(running));
      res.writeHead(202, { "content-type": "application/json" }).end("");
    });
  }

  /** Stops accepting, then waits for the invocations already accepted. */
  async close(): Promise<void> {
    await close(this.server);
    await Promise.all(this.running);
  }
}
