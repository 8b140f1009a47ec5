import { ControllerError, type ErrorDisposition } from "../contracts/controllerError";

/** Classified API errors, so callers branch on what happened rather than on status codes. */
export class KubeApiError extends ControllerError {
  override readonly name: string = "KubeApiError";
  constructor(
    message: string,
    readonly statusCode: number | undefined,
    readonly reason: string | undefined,
    /** How long the server asked to wait before trying again (a 429's or 503's Retry-After), when it said. */
    readonly retryAfterMs?: number,
  ) {
    super(message);
  }
  /** 409 on a write guarded by resourceVersion: someone else changed the object. */
  get isConflict(): boolean {
    return this.statusCode === 409 && this.reason !== "AlreadyExists";
  }
  get isAlreadyExists(): boolean {
    return this.statusCode === 409 && this.reason === "AlreadyExists";
  }
  get isNotFound(): boolean {
    return this.statusCode === 404;
  }
  get isGone(): boolean {
    return this.statusCode === 410;
  }
  /** The server or the network is in trouble for now: throttling, server errors, timeouts, network failures. */
  get isTransient(): boolean {
    return this.statusCode === undefined || this.statusCode === 429 || this.statusCode >= 500;
  }
  /**
   * A later try can succeed when the trouble is transient, or on a conflict: not transient (the write
   * lost a race, src/kube/conflictRetry.ts re-reads and writes again), but a request run again reads the
   * object afresh. Anything else (401, 403, 404, 410, 422, AlreadyExists) is not the request's to retry.
   */
  get disposition(): ErrorDisposition {
    return this.isTransient || this.isConflict ? "retryable" : "unexpected";
  }
}

interface StatusBody {
  reason?: string;
  message?: string;
  details?: { retryAfterSeconds?: unknown };
}

/** The longest Retry-After taken from a server: a cluster the DVM's creator controls must not park it for good. */
const MAX_RETRY_AFTER_SECONDS = 600;

/** A Retry-After header (delay-seconds; an HTTP date is read as the time until it) or the Status body's retryAfterSeconds. */
function retryAfterMsOf(header: unknown, body: StatusBody, now = Date.now()): number | undefined {
  let seconds: number | undefined;
  if (typeof header === "string" && header.trim() !== "") {
    const value = header.trim();
    if (/^\d+$/.test(value)) seconds = Number(value);
    else if (!Number.isNaN(Date.parse(value))) seconds = Math.max(0, (Date.parse(value) - now) / 1000);
  }
  const inBody = body.details?.retryAfterSeconds;
  if (seconds === undefined && typeof inBody === "number" && Number.isFinite(inBody) && inBody >= 0) seconds = inBody;
  return seconds === undefined ? undefined : Math.round(Math.min(seconds, MAX_RETRY_AFTER_SECONDS) * 1000);
}

function parseBody(body: unknown): StatusBody {
  if (typeof body === "string") {
    try {
      return JSON.parse(body) as StatusBody;
    } catch {
      return { message: body };
    }
  }
  return (body ?? {}) as StatusBody;
}

/** Turns whatever client-node threw into a KubeApiError (its ApiException carries code + Status body). */
export function toKubeApiError(error: unknown, action: string): KubeApiError {
  if (error instanceof KubeApiError) return error;
  const e = error as { code?: unknown; body?: unknown; message?: string; headers?: Record<string, unknown> };
  const code = typeof e?.code === "number" ? e.code : undefined;
  const body = parseBody(e?.body);
  const detail = body.message ?? e?.message ?? (code !== undefined ? `HTTP ${code}${body.reason ? ` ${body.reason}` : ""}` : String(error));
  const retryAfterMs = code === 429 || code === 503 ? retryAfterMsOf(e.headers?.["retry-after"], body) : undefined;
  return new KubeApiError(`${action}: ${detail}`, code, body.reason, retryAfterMs);
}
