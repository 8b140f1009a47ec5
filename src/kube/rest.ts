/**
 * A small REST client for the Kubernetes API: requests authenticated by a KubeConfig (client-node does
 * the credentials), JSON in and out, failures as KubeApiError. The phase function uses this instead of
 * client-node's generated API classes, which would make up most of its bundle and its cold start.
 */
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest, type RequestOptions } from "node:https";
import type { KubeConfig } from "@kubernetes/client-node";
import { ControllerError } from "../contracts/controllerError";
import { KubeApiError, toKubeApiError } from "./errors";

export interface RestRequest {
  method: "GET" | "POST" | "PATCH" | "PUT" | "DELETE";
  path: string;
  query?: Record<string, string | number | undefined>;
  body?: unknown;
  /** Default application/json; patches name their strategy. */
  contentType?: string;
  /** Plain text responses (pod logs). */
  text?: boolean;
  /** The Accept header of a JSON request, when not plain application/json (e.g. the Table format). */
  accept?: string;
}

const TIMEOUT_MS = 30_000;
/**
 * How long an idle kept-alive connection stays open: well below the API server's own idle timeout
 * (90 s), so the server never closes one just as a request goes out on it.
 */
const IDLE_CONNECTION_MS = 30_000;
/** What a TLS connection was made with: a kept connection is only reused for the same values. */
const TLS_OPTIONS = ["ca", "cert", "key", "pfx", "passphrase", "rejectUnauthorized", "servername"] as const;

export class KubeRest {
  private readonly server: URL;
  /** The one keep-alive agent, and the TLS values it was made with. */
  private kept: { tls: unknown[]; agent: HttpAgent } | undefined;

  constructor(readonly kubeConfig: KubeConfig) {
    const cluster = kubeConfig.getCurrentCluster();
    if (!cluster) throw new KubeApiError("the kubeconfig has no current cluster", undefined, "NoCluster");
    this.server = new URL(cluster.server);
  }

  get serverUrl(): string {
    return this.server.toString();
  }

  async request<T>(req: RestRequest, action: string): Promise<T> {
    const url = new URL(this.server.pathname.replace(/\/$/, "") + req.path, this.server);
    for (const [key, value] of Object.entries(req.query ?? {})) if (value !== undefined) url.searchParams.set(key, String(value));
    const body = req.body === undefined ? undefined : Buffer.from(JSON.stringify(req.body));
    const options: RequestOptions = {
      method: req.method,
      headers: {
        Accept: req.text ? "text/plain, */*" : (req.accept ?? "application/json"),
        ...(body ? { "Content-Type": req.contentType ?? "application/json", "Content-Length": body.length } : {}),
      },
    };
    // Credentials as the kubeconfig says (static ones for a DVM's kubeconfig; the operator's host
    // kubeconfig may use a plugin). Their errors can quote a plugin's output or key material: the message
    // that goes on (into conditions and the ledger) is a fixed one.
    try {
      await this.kubeConfig.applyToHTTPSOptions(options);
    } catch {
      throw new KubeApiError(`${action}: the kubeconfig's credentials could not be applied (details not shown)`, undefined, "CredentialError");
    }
    options.agent = this.agentFor(options);
    let response: Answer;
    try {
      response = await send(url, options, body);
    } catch (error) {
      throw toKubeApiError(error, action);
    }
    if (response.status >= 200 && response.status < 300) {
      return (req.text ? response.text : response.text ? JSON.parse(response.text) : undefined) as T;
    }
    throw toKubeApiError({ code: response.status, body: response.text, headers: { "retry-after": response.retryAfter } }, action);
  }

  /**
   * client-node makes a new agent for every request, so every request paid a TCP and a TLS handshake.
   * This keeps one keep-alive agent per client instead, made with the TLS values the kubeconfig gave
   * for this request (so rotated certificates take effect at once: new values, new agent; the old one's
   * idle connections close after IDLE_CONNECTION_MS). Headers (tokens) are still applied per request. A
   * proxy (host kubeconfigs only; user kubeconfigs cannot name one) keeps client-node's agent.
   */
  private agentFor(options: RequestOptions): RequestOptions["agent"] {
    if (this.kubeConfig.getCurrentCluster()?.proxyUrl) return options.agent;
    const tls = TLS_OPTIONS.map((name) => options[name]);
    if (!this.kept || !sameValues(this.kept.tls, tls)) {
      const agentOptions = { keepAlive: true, timeout: IDLE_CONNECTION_MS };
      const values = Object.fromEntries(TLS_OPTIONS.flatMap((name) => (options[name] === undefined ? [] : [[name, options[name]]])));
      this.kept = { tls, agent: this.server.protocol === "http:" ? new HttpAgent(agentOptions) : new HttpsAgent({ ...values, ...agentOptions }) };
    }
    return this.kept.agent;
  }
}

function sameValues(a: unknown, b: unknown): boolean {
  if (Buffer.isBuffer(a) && Buffer.isBuffer(b)) return a.equals(b);
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((value, i) => sameValues(value, b[i]));
  return a === b;
}

/**
 * One request. A kept-alive connection the server closed while it sat idle fails at once (ECONNRESET,
 * EPIPE): the request is sent again, once, on a new connection. Sending twice is safe for every call
 * made through this client: creates adopt AlreadyExists, status writes are guarded by resourceVersion
 * (409), deletes answer NotFound, and the other patches are merge patches of the same values.
 */
/** An answer: its status, its body, and the Retry-After a throttling answer carries. */
interface Answer {
  status: number;
  text: string;
  retryAfter?: string | undefined;
}

async function send(url: URL, options: RequestOptions, body: Buffer | undefined): Promise<Answer> {
  try {
    return await sendOnce(url, options, body);
  } catch (error) {
    if (!(error instanceof ReusedConnectionClosed)) throw error;
    return sendOnce(url, options, body, true);
  }
}

class ReusedConnectionClosed extends ControllerError {
  override readonly name = "ReusedConnectionClosed";
  readonly disposition = "retryable";
}

function sendOnce(url: URL, options: RequestOptions, body: Buffer | undefined, retried = false): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const call = url.protocol === "http:" ? httpRequest : httpsRequest;
    const req = call(url, { ...options, timeout: TIMEOUT_MS }, (res: IncomingMessage) => {
      const chunks: Buffer[] = [];
      res.on("data", (chunk: Buffer) => chunks.push(chunk));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8"), retryAfter: res.headers["retry-after"] }));
      res.on("error", reject);
    });
    req.on("timeout", () => req.destroy(new Error(`no answer from ${url.host} within ${TIMEOUT_MS / 1000} s`)));
    req.on("error", (error: NodeJS.ErrnoException) => {
      const closedWhileIdle = req.reusedSocket && !retried && (error.code === "ECONNRESET" || error.code === "EPIPE");
      reject(closedWhileIdle ? new ReusedConnectionClosed(error.message, { cause: error }) : error);
    });
    if (body) req.write(body);
    req.end();
  });
}

/** The REST path of a collection or an object. */
export function resourcePath(apiVersion: string, plural: string, namespace: string | undefined, name?: string, subresource?: string): string {
  const base = apiVersion.includes("/") ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
  return `${base}${namespace ? `/namespaces/${encodeURIComponent(namespace)}` : ""}/${plural}${name ? `/${encodeURIComponent(name)}` : ""}${subresource ? `/${subresource}` : ""}`;
}
