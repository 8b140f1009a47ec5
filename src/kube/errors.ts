/** Classified API errors, so callers branch on what happened rather than on status codes. */
export class KubeApiError extends Error {
  override readonly name: string = "KubeApiError";
  constructor(
    message: string,
    readonly statusCode: number | undefined,
    readonly reason: string | undefined,
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
  /** Worth retrying: throttling, server errors, timeouts, network failures. */
  get isTransient(): boolean {
    return this.statusCode === undefined || this.statusCode === 429 || this.statusCode >= 500 || this.isConflict;
  }
}

interface StatusBody {
  reason?: string;
  message?: string;
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
  const e = error as { code?: unknown; body?: unknown; message?: string };
  const code = typeof e?.code === "number" ? e.code : undefined;
  const body = parseBody(e?.body);
  const detail = body.message ?? e?.message ?? String(error);
  return new KubeApiError(`${action}: ${detail}`, code, body.reason);
}
