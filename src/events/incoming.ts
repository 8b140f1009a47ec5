/**
 * Incoming CloudEvents, from an HTTP request (structured or binary content mode) or an EventBridge
 * event, as one plain shape. No Lambda types here: src/aws/triggerHandler.ts turns API Gateway and
 * EventBridge payloads into an HttpMessage or a plain object first.
 *
 * The CloudEvents SDK parses (HTTP.toEvent) and validates (CloudEvent#validate). It is lenient where
 * this receiver must not be: a missing `id` becomes a random UUID and a missing `specversion` becomes
 * "1.0", which would turn a broken event into one that is never idempotent. So the required
 * attributes are checked on the raw message first, and every refusal names the field.
 */
import { CloudEvent, type CloudEventV1, HTTP, ValidationError } from "cloudevents";
import { errorText } from "../lib/errorMessage";
import type { FieldIssue } from "../lib/issues";
import { SPEC_VERSION } from "./schema";

/** An HTTP request as far as CloudEvents care: header names in any case, the body as received. */
export interface HttpMessage {
  headers: Record<string, string | string[] | undefined>;
  body: string | Buffer | undefined;
}

export type ContentMode = "structured" | "binary" | "eventbridge" | "eventbridge-cloudevent";

/** A well-formed CloudEvent 1.0 whose `data` is still unchecked. */
export interface ReceivedEvent {
  mode: ContentMode;
  id: string;
  source: string;
  type: string;
  subject?: string | undefined;
  time?: string | undefined;
  data: unknown;
  /** How `data` is named in errors: "data", or "detail" for a plain EventBridge event. */
  dataField: string;
}

/** Why an event is refused; `field` is the first failing field (a CloudEvents attribute, "body", "data.x"). */
export interface Rejection {
  status: 400 | 403 | 413 | 415;
  error: string;
  field: string;
  message: string;
  issues: FieldIssue[];
}

export type Refused = { ok: false; rejection: Rejection };
export type Received = { ok: true; event: ReceivedEvent } | Refused;

/** Default bound of an event: EventBridge's own limit, far above any real migration request. */
export const DEFAULT_MAX_EVENT_BYTES = 256 * 1024;

const REQUIRED_ATTRIBUTES = ["specversion", "id", "source", "type"] as const;
const STRUCTURED = "application/cloudevents+json";
const BATCH = "application/cloudevents-batch+json";
const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;

export function rejection(status: Rejection["status"], error: string, issues: FieldIssue[]): Rejection {
  const first = issues[0] ?? { field: "event", message: error };
  return { status, error, field: first.field, message: first.message, issues };
}

const invalid = (issues: FieldIssue[]): Refused => ({ ok: false, rejection: rejection(400, "invalid event", issues) });

function tooLarge(field: string, bytes: number, maxBytes: number): Refused {
  return { ok: false, rejection: rejection(413, "event too large", [{ field, message: `${bytes} bytes, more than the limit of ${maxBytes}` }]) };
}

/** Parses one CloudEvent from an HTTP request in structured or binary content mode. */
export function receiveHttpEvent(message: HttpMessage, options: { maxBytes?: number } = {}): Received {
  const maxBytes = options.maxBytes ?? DEFAULT_MAX_EVENT_BYTES;
  const body = typeof message.body === "string" ? message.body : (message.body?.toString("utf8") ?? "");
  const bytes = typeof message.body === "string" ? Buffer.byteLength(message.body, "utf8") : (message.body?.length ?? 0);
  if (bytes > maxBytes) return tooLarge("body", bytes, maxBytes);

  const headers = lowerCaseHeaders(message.headers);
  const mediaType = (headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase();
  if (mediaType === BATCH) {
    return {
      ok: false,
      rejection: rejection(415, "unsupported content mode", [
        { field: "content-type", message: "batched CloudEvents are not accepted: send one event per request" },
      ]),
    };
  }
  if (mediaType === STRUCTURED) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(body);
    } catch (error) {
      return invalid([{ field: "body", message: `not JSON: ${(error as Error).message}` }]);
    }
    return receiveStructured(parsed, "structured", "");
  }
  if (mediaType.startsWith("application/cloudevents")) {
    return {
      ok: false,
      rejection: rejection(415, "unsupported content mode", [
        { field: "content-type", message: `${mediaType} is not supported: use ${STRUCTURED} or binary mode` },
      ]),
    };
  }
  if (!Object.keys(headers).some((name) => name.startsWith("ce-"))) {
    return invalid([
      {
        field: "specversion",
        message: `not a CloudEvent: expected Content-Type ${STRUCTURED} (structured mode) or ce-specversion, ce-id, ce-source and ce-type headers (binary mode)`,
      },
    ]);
  }
  return receiveBinary(headers, body);
}

/**
 * Parses an EventBridge event. Two forms:
 *   - plain: `detail-type` is the CloudEvent type, `source` and `id` are EventBridge's own (a
 *     redelivery by EventBridge keeps its id), `detail` is the data;
 *   - wrapped: `detail` is a whole structured CloudEvent (it has `specversion`), whose own `id` and
 *     `source` count, so a sender that calls PutEvents again for the same request stays idempotent.
 */
export function receiveEventBridgeEvent(event: unknown, options: { maxBytes?: number } = {}): Received {
  const maxBytes = options.maxBytes ?? DEFAULT_MAX_EVENT_BYTES;
  if (!isPlainObject(event)) return invalid([{ field: "event", message: "an EventBridge event must be a JSON object" }]);
  const bytes = Buffer.byteLength(JSON.stringify(event), "utf8");
  if (bytes > maxBytes) return tooLarge("detail", bytes, maxBytes);
  const { detail } = event;
  if (isPlainObject(detail) && "specversion" in detail) return receiveStructured(detail, "eventbridge-cloudevent", "detail.");

  const issues: FieldIssue[] = [];
  // EventBridge always sets `time`; the trigger bounds an event's age by it.
  for (const field of ["id", "source", "detail-type", "time"] as const) {
    if (!nonEmptyString(event[field])) issues.push({ field, message: "required: a non-empty string" });
  }
  if (detail === undefined || detail === null) issues.push({ field: "detail", message: "required: the migration request" });
  if (issues.length > 0) return invalid(issues);
  const attributes = {
    specversion: SPEC_VERSION,
    id: event.id,
    source: event.source,
    type: event["detail-type"],
    ...(nonEmptyString(event.time) ? { time: event.time } : {}),
    data: detail,
  };
  const checked = validated(
    () => new CloudEvent(attributes as CloudEventV1<unknown>, false),
    (field) => (field === "type" ? "detail-type" : field),
  );
  if (!checked.ok) return checked;
  return { ok: true, event: { ...eventFields(checked.value), mode: "eventbridge", data: detail, dataField: "detail" } };
}

/** A structured-mode event already parsed from JSON; `prefix` names where it sits ("detail." when wrapped). */
function receiveStructured(parsed: unknown, mode: ContentMode, prefix: string): Received {
  if (!isPlainObject(parsed)) {
    return invalid([{ field: prefix ? prefix.slice(0, -1) : "body", message: "must be a JSON object holding one CloudEvent" }]);
  }
  const issues = checkAttributes((name) => parsed[name], prefix);
  if (issues.length > 0) return invalid(issues);
  if ("data_base64" in parsed) return invalid([{ field: `${prefix}data_base64`, message: "binary data is not accepted: put the request in data as JSON" }]);
  const checked = validated(
    () => HTTP.toEvent({ headers: { "content-type": STRUCTURED }, body: parsed }),
    (field) => `${prefix}${field}`,
  );
  if (!checked.ok) return checked;
  const contentType = checked.value.datacontenttype;
  if (contentType !== undefined && !isJsonMediaType(contentType)) {
    return invalid([{ field: `${prefix}datacontenttype`, message: `must be application/json (got ${contentType})` }]);
  }
  return { ok: true, event: { ...eventFields(checked.value), mode, data: parsed.data, dataField: `${prefix}data` } };
}

function receiveBinary(headers: Record<string, string>, body: string): Received {
  const issues = checkAttributes((name) => headers[`ce-${name}`], "");
  if (issues.length > 0) return invalid(issues);
  const contentType = headers["content-type"];
  if (contentType !== undefined && !isJsonMediaType(contentType)) {
    return invalid([
      { field: "datacontenttype", message: `the Content-Type of a binary-mode request is the data's: must be application/json (got ${contentType})` },
    ]);
  }
  if (body.trim() === "") return invalid([{ field: "data", message: "required: the migration request as the JSON body" }]);
  let data: unknown;
  try {
    data = JSON.parse(body);
  } catch (error) {
    return invalid([{ field: "data", message: `not JSON: ${(error as Error).message}` }]);
  }
  // The SDK parses the attributes from the headers; the body it is given is what we parsed already,
  // so its own guessing about content types cannot change the data.
  const sdkHeaders = { ...headers, "content-type": "application/json" };
  const checked = validated(
    () => HTTP.toEvent({ headers: sdkHeaders, body: data }),
    (field) => field,
  );
  if (!checked.ok) return checked;
  return { ok: true, event: { ...eventFields(checked.value), mode: "binary", data, dataField: "data" } };
}

/** The required context attributes, from the raw message (before the SDK fills in defaults). */
function checkAttributes(read: (name: string) => unknown, prefix: string): FieldIssue[] {
  const issues: FieldIssue[] = [];
  for (const name of REQUIRED_ATTRIBUTES) {
    const value = read(name);
    if (!nonEmptyString(value)) {
      issues.push({ field: `${prefix}${name}`, message: value === undefined ? "required" : "must be a non-empty string" });
    } else if (name === "specversion" && value !== SPEC_VERSION) {
      issues.push({ field: `${prefix}specversion`, message: `CloudEvents ${value} is not supported: only ${SPEC_VERSION}` });
    }
  }
  // Required here although CloudEvents makes it optional: the trigger tells an old replay from a new request
  // by it (src/events/trigger.ts). The SDK replaces a time it cannot read (or none) with the current time.
  const time = read("time");
  if (time === undefined) issues.push({ field: `${prefix}time`, message: "required: when the request was made, so a replay can be told from it" });
  else if (!(typeof time === "string" && RFC3339.test(time) && !Number.isNaN(Date.parse(time)))) {
    issues.push({ field: `${prefix}time`, message: "must be an RFC 3339 timestamp" });
  }
  return issues;
}

/** Runs the SDK's parse + validation; its errors (ajv's, or a message) become named fields. */
function validated(parse: () => unknown, name: (field: string) => string): { ok: true; value: CloudEventV1<unknown> } | Refused {
  try {
    const parsed = parse();
    if (Array.isArray(parsed)) return invalid([{ field: name("specversion"), message: "batched CloudEvents are not accepted" }]);
    const event = parsed as CloudEvent<unknown>;
    event.validate();
    return { ok: true, value: event };
  } catch (error) {
    return invalid(sdkIssues(error, name));
  }
}

function sdkIssues(error: unknown, name: (field: string) => string): FieldIssue[] {
  if (error instanceof ValidationError) {
    const fromSchema = (error.errors ?? []).flatMap((e): FieldIssue[] => {
      if (typeof e !== "object" || e === null) return [];
      const { instancePath, message, params } = e as { instancePath?: string; message?: string; params?: { missingProperty?: string } };
      const field = params?.missingProperty ?? instancePath?.replace(/^\//, "").replace(/\//g, ".");
      return field ? [{ field: name(field), message: message ?? "invalid" }] : [];
    });
    if (fromSchema.length > 0) return fromSchema;
    const attribute = /attribute name: "([^"]+)"|extension name: (\S+)/.exec(error.message);
    const field = attribute?.[1] ?? attribute?.[2];
    return [{ field: name(field ?? "event"), message: error.message.split("\n")[0]! }];
  }
  return [{ field: name("event"), message: errorText(error) }];
}

function eventFields(event: CloudEventV1<unknown>): Omit<ReceivedEvent, "mode" | "data" | "dataField"> {
  return { id: event.id, source: event.source, type: event.type, subject: event.subject, time: event.time };
}

function lowerCaseHeaders(headers: HttpMessage["headers"]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers ?? {})) {
    if (value === undefined) continue;
    out[name.toLowerCase()] = Array.isArray(value) ? value.join(",") : value;
  }
  return out;
}

function isJsonMediaType(contentType: string): boolean {
  const media = contentType.split(";")[0]!.trim().toLowerCase();
  return media === "application/json" || /^application\/[a-z0-9.+-]*\+json$/.test(media);
}

function nonEmptyString(value: unknown): value is string {
  return typeof value === "string" && value.trim() !== "";
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
