/**
 * The phase function's input: a ReconcileRequest as the relay sends it (the invocation payload), or the
 * same request as the `detail` of an EventBridge event. Anything else is invalid, and the first failing
 * field is named so the log says what to fix.
 */
import { type ReconcileRequest, ReconcileRequestSchema } from "../contracts/request";
import { type FieldIssue, fieldIssues } from "../lib/issues";

/** The field ("uid", "generation"), or "request" when the payload itself is wrong. */
export type RequestIssue = FieldIssue;

export type ParsedEvent = { ok: true; request: ReconcileRequest } | { ok: false; issues: RequestIssue[] };

export function parseReconcileEvent(event: unknown): ParsedEvent {
  let payload = event;
  if (typeof payload === "string") {
    try {
      payload = JSON.parse(payload);
    } catch {
      return { ok: false, issues: [{ field: "request", message: "payload is a string that is not JSON" }] };
    }
  }
  if (isEventBridgeEvent(payload)) payload = payload.detail;
  const parsed = ReconcileRequestSchema.safeParse(payload);
  if (parsed.success) return { ok: true, request: parsed.data };
  return { ok: false, issues: fieldIssues("", parsed.error, "request") };
}

function isEventBridgeEvent(value: unknown): value is { detail: unknown } {
  return typeof value === "object" && value !== null && "detail-type" in value && "detail" in value;
}
