/**
 * An HTTP endpoint as the sink of outgoing CloudEvents: one POST per event, in structured mode
 * (Content-Type application/cloudevents+json, the whole event as the body) or binary mode (ce-*
 * headers, the data as the body), serialized by the CloudEvents SDK (HTTP.structured / HTTP.binary).
 *
 * A 2xx is success; 408, 429 and 5xx and network errors are worth retrying; any other status is
 * final. Messages name the endpoint by origin only: webhook URLs often carry a token in the path.
 */
import { type CloudEventV1, HTTP } from "cloudevents";
import { type EventSink, SendError } from "./publisher";

export type HttpContentMode = "structured" | "binary";
export const HTTP_CONTENT_MODES: readonly HttpContentMode[] = ["structured", "binary"];

export interface HttpSinkOptions {
  url: string;
  /** Default structured. */
  mode?: HttpContentMode;
  /** Default globalThis.fetch. */
  fetch?: typeof fetch;
}

export class HttpEventSink implements EventSink {
  readonly name = "http";
  private readonly url: URL;
  private readonly mode: HttpContentMode;
  private readonly fetch: typeof fetch;

  constructor(options: HttpSinkOptions) {
    this.url = new URL(options.url);
    if (this.url.protocol !== "http:" && this.url.protocol !== "https:") throw new Error(`the event sink URL must be http or https (got ${this.url.protocol})`);
    this.mode = options.mode ?? "structured";
    this.fetch = options.fetch ?? globalThis.fetch;
  }

  /** Where events go, without path, query or credentials. */
  get origin(): string {
    return this.url.origin;
  }

  async send(event: CloudEventV1<unknown>, signal: AbortSignal): Promise<void> {
    const message = this.mode === "binary" ? HTTP.binary(event) : HTTP.structured(event);
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(message.headers))
      if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(",") : String(value);
    let response: Response;
    try {
      response = await this.fetch(this.url, { method: "POST", headers, body: message.body as string, signal });
    } catch (error) {
      const reason =
        error instanceof Error ? (error.name === "TimeoutError" || error.name === "AbortError" ? "timed out" : describeCause(error)) : String(error);
      throw new SendError(`POST ${this.origin}: ${reason}`, true);
    }
    // The body is not needed; reading it frees the connection for reuse.
    await response.arrayBuffer().catch(() => undefined);
    if (response.ok) return;
    const retryable = response.status === 408 || response.status === 429 || response.status >= 500;
    throw new SendError(`POST ${this.origin}: HTTP ${response.status}`, retryable);
  }
}

/** undici's "fetch failed" says nothing; its cause has the socket error (ECONNREFUSED, ...). */
function describeCause(error: Error): string {
  const cause = (error as { cause?: { code?: unknown; message?: unknown } }).cause;
  const code = typeof cause?.code === "string" ? cause.code : undefined;
  return code ? `${error.message} (${code})` : error.message;
}
