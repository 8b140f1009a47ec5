/**
 * Liveness and readiness for the relay's Deployment: /healthz answers while the process runs,
 * /readyz only while the DVM watch is synced and open, or, for a standby, while it can reach its Lease
 * (ready to take over, not forwarding). Both carry the replica's role and stats as JSON, so a `curl` is
 * enough to see what it is doing. /metrics serves the Prometheus metrics when given (src/relay/metrics.ts).
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { errorText } from "../lib/errorMessage";

export interface HealthServerOptions {
  /** TCP port; 0 picks a free one (see HealthServer.port). Default 8080. */
  port?: number;
  /** Default "0.0.0.0", so the kubelet can reach it. */
  host?: string;
  /** Is the relay ready (synced and watching, or a standby that can take over)? */
  ready: () => boolean;
  /** What this replica does now ("leader", "standby", ...); reported next to the status when given. */
  role?: () => string;
  /** Anything JSON-serialisable, e.g. relay.stats(). */
  stats: () => unknown;
  /** The Prometheus exposition for /metrics (RelayMetrics.render); absent: /metrics is 404. */
  metrics?: () => Promise<{ contentType: string; body: string }>;
}

export interface HealthServer {
  readonly port: number;
  close(): Promise<void>;
}

export const DEFAULT_HEALTH_PORT = 8080;

export async function startHealthServer(options: HealthServerOptions): Promise<HealthServer> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    const send = (status: number, body: unknown) => {
      res.writeHead(status, { "content-type": "application/json", "cache-control": "no-store" });
      res.end(JSON.stringify(body));
    };
    try {
      if (req.method !== "GET" && req.method !== "HEAD") return send(405, { error: "method not allowed" });
      if (path === "/metrics" && options.metrics) {
        options.metrics().then(
          ({ contentType, body }) => {
            res.writeHead(200, { "content-type": contentType, "cache-control": "no-store" });
            res.end(req.method === "HEAD" ? undefined : body);
          },
          (error: unknown) => send(500, { error: errorText(error) }),
        );
        return;
      }
      const role = options.role ? { role: options.role() } : {};
      if (path === "/healthz") return send(200, { status: "ok", ...role, stats: options.stats() });
      if (path === "/readyz") {
        const ready = options.ready();
        return send(ready ? 200 : 503, { status: ready ? "ready" : "not ready", ...role, stats: options.stats() });
      }
      return send(404, { error: `no such path ${path}` });
    } catch (error) {
      return send(500, { error: errorText(error) });
    }
  });
  // Probes open a connection each time; do not let idle keep-alive sockets hold up close().
  server.keepAliveTimeout = 1_000;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? DEFAULT_HEALTH_PORT, options.host ?? "0.0.0.0", () => {
      server.off("error", reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((error) => (error ? reject(error) : resolve()));
      }),
  };
}
