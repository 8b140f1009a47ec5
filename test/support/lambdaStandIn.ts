/**
 * The Lambda Invoke API, as far as the relay uses it, on loopback: every invocation is recorded (with
 * the time it arrived) and accepted with 202, as an "Event" invocation is.
 */

import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { ReconcileRequest } from "../../src/contracts/request";

export interface Invocation {
  functionName: string;
  invocationType: string | undefined;
  payload: ReconcileRequest;
  /** Date.now() when the request arrived. */
  at: number;
}

export interface LambdaStandIn {
  /** For AWS_ENDPOINT_URL_LAMBDA. */
  url: string;
  invocations: Invocation[];
  close(): Promise<void>;
}

export async function startLambdaStandIn(): Promise<LambdaStandIn> {
  const invocations: Invocation[] = [];
  const server: Server = createServer((req: IncomingMessage, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const match = /^\/2015-03-31\/functions\/([^/]+)\/invocations/.exec(req.url ?? "");
      if (req.method !== "POST" || !match) {
        res.writeHead(404, { "content-type": "application/json" }).end(JSON.stringify({ message: `no route ${req.method} ${req.url}` }));
        return;
      }
      invocations.push({
        functionName: decodeURIComponent(match[1]!),
        invocationType: req.headers["x-amz-invocation-type"] as string | undefined,
        payload: JSON.parse(Buffer.concat(chunks).toString("utf8")) as ReconcileRequest,
        at: Date.now(),
      });
      res.writeHead(202, { "content-type": "application/json", "x-amzn-requestid": `req-${invocations.length}` }).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    invocations,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
