/**
 * A small REST client for the Kubernetes API: requests authenticated by a KubeConfig (client-node does
 * the credentials), JSON in and out, failures as KubeApiError. The phase function uses this instead of
 * client-node's generated API classes, which would make up most of its bundle and its cold start.
 */
import { request as httpRequest, type IncomingMessage } from "node:http";
import { request as httpsRequest, type RequestOptions } from "node:https";
import type { KubeConfig } from "@kubernetes/client-node";
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
}

const TIMEOUT_MS = 30_000;

export class KubeRest {
  private readonly server: URL;

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
        Accept: req.text ? "text/plain, */*" : "application/json",
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
    let response: { status: number; text: string };
    try {
      response = await send(url, options, body);
    } catch (error) {
      throw toKubeApiError(error, action);
    }
    if (response.status >= 200 && response.status < 300) {
      return (req.text ? response.text : response.text ? JSON.parse(response.text) : undefined) as T;
    }
    throw toKubeApiError({ code: response.status, body: response.text }, action);
  }
}

function send(url: URL, options: RequestOptions, body: Buffer | undefined): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const call = url.protocol === "http:" ? httpRequest : httpsRequest;
    const req = call(url, { ...options, timeout: TIMEOUT_MS }, (res: IncomingMessage) => {
      const chunks: Buffer[] = [];
      res.on("data", (chunk: Buffer) => chunks.push(chunk));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") }));
      res.on("error", reject);
    });
    req.on("timeout", () => req.destroy(new Error(`no answer from ${url.host} within ${TIMEOUT_MS / 1000} s`)));
    req.on("error", reject);
    if (body) req.write(body);
    req.end();
  });
}

/** The REST path of a collection or an object. */
export function resourcePath(apiVersion: string, plural: string, namespace: string | undefined, name?: string, subresource?: string): string {
  const base = apiVersion.includes("/") ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
  return `${base}${namespace ? `/namespaces/${encodeURIComponent(namespace)}` : ""}/${plural}${name ? `/${encodeURIComponent(name)}` : ""}${subresource ? `/${subresource}` : ""}`;
}
