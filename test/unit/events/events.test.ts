/**
 * CloudEvents in and out, as pure logic: the request schema and the refusal of malformed events (each
 * naming its field), the DVM name derived from an event, and the outgoing events built from a ledger
 * history (their timings, their ids, and that no credential reaches them).
 */

import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { CloudEvent, HTTP, type Message } from "cloudevents";
import { describe, expect, it } from "vitest";
import { DEFAULT_MAX_EVENT_BYTES, type HttpMessage, receiveEventBridgeEvent, receiveHttpEvent } from "../../../src/events/incoming";
import type { CreateResult, MigrationStore, NewMigration } from "../../../src/events/migrationStore";
import { createdForEvent, dvmNameForEvent, EVENT_ANNOTATION, NAME_HASH_LENGTH } from "../../../src/events/names";
import { triggerNamespaceRule } from "../../../src/events/namespaces";
import { completionEvents, eventsWanted, redactSecrets } from "../../../src/events/outgoing";
import {
  MAX_NAME_PREFIX,
  MIGRATION_FAILED,
  MIGRATION_REQUESTED,
  MIGRATION_SUCCEEDED,
  MigrationFinishedDataSchema,
  MigrationRequestedDataSchema,
  OUTGOING_EVENT_TYPES,
  PHASE_COMPLETED,
  PhaseCompletedDataSchema,
} from "../../../src/events/schema";
import { eventBridgeSourceMatch, parseSourceAllowList } from "../../../src/events/sources";
import { createTrigger } from "../../../src/events/trigger";
import type { LedgerEntry } from "../../../src/ledger";
import { MemoryHandledEvents } from "../../support/memoryHandledEvents";

const SPEC = {
  persistentVolumeClaims: [{ name: "db", namespace: "shop", targetStorageClass: "fast", targetAccessModes: ["ReadWriteOnce"] }],
};
const DATA = { namespace: "migrations", spec: SPEC };
const NAMESPACES = triggerNamespaceRule({ allowedNamespaces: ["migrations"], adminNamespaces: ["dvm-system"], allowAdminNamespaces: false });
const SOURCE = "https://ci.example.com/pipelines/7";

const requested = (overrides: Record<string, unknown> = {}) =>
  new CloudEvent<unknown>({ type: MIGRATION_REQUESTED, source: SOURCE, id: "req-1", data: DATA, ...overrides });

/** A structured-mode request with a hand-written body (for events the SDK would refuse to build). */
const rawStructured = (body: unknown): HttpMessage => ({
  headers: { "Content-Type": "application/cloudevents+json; charset=utf-8" },
  body: typeof body === "string" ? body : JSON.stringify(body),
});
const envelope = { specversion: "1.0", id: "req-1", source: SOURCE, type: MIGRATION_REQUESTED, time: "2026-12-03T10:00:00Z" };
const asMessage = (message: Message): HttpMessage => message as HttpMessage;

/** A store that records creations; the table below checks that no refused event reaches it. */
class RecordingStore implements MigrationStore {
  readonly created: NewMigration[] = [];
  async create(migration: NewMigration): Promise<CreateResult> {
    this.created.push(migration);
    return { kind: "created", uid: `uid-${this.created.length}` };
  }
  async get() {
    return undefined;
  }
  async listLabelled() {
    return [];
  }
  async delete() {}
}

describe("malformed events: refused with the failing field named, nothing created", () => {
  const allowed = parseSourceAllowList("https://ci.example.com/*, urn:dvm:tests");
  const oversize = { ...DATA, spec: { ...SPEC, transferPodAnnotations: { padding: "x".repeat(DEFAULT_MAX_EVENT_BYTES) } } };
  const cases: [string, HttpMessage, number, string][] = [
    ["a body that is not JSON", rawStructured("{not json"), 400, "body"],
    ["a JSON array", rawStructured([envelope]), 400, "body"],
    ["no specversion", rawStructured({ ...envelope, specversion: undefined, data: DATA }), 400, "specversion"],
    ["specversion 0.3", rawStructured({ ...envelope, specversion: "0.3", data: DATA }), 400, "specversion"],
    ["another event type", asMessage(HTTP.structured(requested({ type: "com.example.build.finished.v1" }))), 400, "type"],
    ["no id", rawStructured({ ...envelope, id: undefined, data: DATA }), 400, "id"],
    ["an empty id", rawStructured({ ...envelope, id: "", data: DATA }), 400, "id"],
    ["no source", rawStructured({ ...envelope, source: undefined, data: DATA }), 400, "source"],
    ["a source that is not a URI reference", rawStructured({ ...envelope, source: "not a uri", data: DATA }), 400, "source"],
    ["a time that is not a timestamp", rawStructured({ ...envelope, time: "yesterday", data: DATA }), 400, "time"],
    ["data that is not an object", asMessage(HTTP.structured(requested({ data: "please migrate" }))), 400, "data"],
    ["no data", rawStructured(envelope), 400, "data"],
    ["binary data (data_base64)", rawStructured({ ...envelope, data_base64: "e30=" }), 400, "data_base64"],
    ["no namespace", asMessage(HTTP.structured(requested({ data: { spec: SPEC } }))), 400, "data.namespace"],
    ["a misspelt field", asMessage(HTTP.structured(requested({ data: { ...DATA, namesapce: "x" } }))), 400, "data.namesapce"],
    ["no PVCs", asMessage(HTTP.structured(requested({ data: { ...DATA, spec: { persistentVolumeClaims: [] } } }))), 400, "data.spec.persistentVolumeClaims"],
    [
      "a bad access mode",
      asMessage(
        HTTP.structured(
          requested({
            data: { ...DATA, spec: { persistentVolumeClaims: [{ ...SPEC.persistentVolumeClaims[0], targetAccessModes: ["ReadWriteSometimes"] }] } },
          }),
        ),
      ),
      400,
      "data.spec.persistentVolumeClaims[0].targetAccessModes[0]",
    ],
    [
      "no target storage class",
      asMessage(
        HTTP.structured(
          requested({ data: { ...DATA, spec: { persistentVolumeClaims: [{ ...SPEC.persistentVolumeClaims[0], targetStorageClass: undefined }] } } }),
        ),
      ),
      400,
      "data.spec.persistentVolumeClaims[0].targetStorageClass",
    ],
    [
      "a PVC name that is not a DNS name",
      asMessage(HTTP.structured(requested({ data: { ...DATA, spec: { persistentVolumeClaims: [{ ...SPEC.persistentVolumeClaims[0], name: "DB_Data" }] } } }))),
      400,
      "data.spec.persistentVolumeClaims[0].name",
    ],
    ["a name prefix that is not a DNS label", asMessage(HTTP.structured(requested({ data: { ...DATA, namePrefix: "Nightly_Move" } }))), 400, "data.namePrefix"],
    [
      "a name prefix too long for a 63-character name",
      asMessage(HTTP.structured(requested({ data: { ...DATA, namePrefix: "a".repeat(MAX_NAME_PREFIX + 1) } }))),
      400,
      "data.namePrefix",
    ],
    ["a namespace that is not a DNS label", asMessage(HTTP.structured(requested({ data: { ...DATA, namespace: "Migrations" } }))), 400, "data.namespace"],
    ["a payload over 256 KiB", asMessage(HTTP.structured(requested({ data: oversize }))), 413, "body"],
    ["a source not on the allow-list", asMessage(HTTP.structured(requested({ source: "https://evil.example.org/x" }))), 403, "source"],
    ["a plain JSON POST (no CloudEvent at all)", { headers: { "content-type": "application/json" }, body: JSON.stringify(DATA) }, 400, "specversion"],
    ["a batch of events", { headers: { "content-type": "application/cloudevents-batch+json" }, body: JSON.stringify([envelope]) }, 415, "content-type"],
    [
      "binary mode without ce-id",
      (() => {
        const m = HTTP.binary(requested());
        delete m.headers["ce-id"];
        return asMessage(m);
      })(),
      400,
      "id",
    ],
    [
      "binary mode with ce-specversion 0.3",
      (() => {
        const m = HTTP.binary(requested());
        m.headers["ce-specversion"] = "0.3";
        return asMessage(m);
      })(),
      400,
      "specversion",
    ],
    ["binary mode with a body that is not JSON", { ...asMessage(HTTP.binary(requested())), body: "{namespace:" }, 400, "data"],
    [
      "binary mode with a text body",
      { headers: { ...HTTP.binary(requested()).headers, "content-type": "text/plain" }, body: "migrate please" },
      400,
      "datacontenttype",
    ],
    [
      "binary mode with a bad access mode",
      asMessage(
        HTTP.binary(requested({ data: { ...DATA, spec: { persistentVolumeClaims: [{ ...SPEC.persistentVolumeClaims[0], targetAccessModes: ["RWO"] }] } } })),
      ),
      400,
      "data.spec.persistentVolumeClaims[0].targetAccessModes[0]",
    ],
  ];

  it("has at least ten cases", () => expect(cases.length).toBeGreaterThanOrEqual(10));

  it.each(cases)("%s → %i naming %s", async (_name, message, status, field) => {
    const store = new RecordingStore();
    const trigger = createTrigger({ handledEvents: new MemoryHandledEvents(), store: async () => store, allowedSources: allowed, namespaces: NAMESPACES });
    const reply = await trigger.handleHttp(message);
    expect(reply.status, JSON.stringify(reply.body)).toBe(status);
    expect(reply.body).toMatchObject({ field });
    expect(store.created).toEqual([]);
  });

  const bridge = {
    version: "0",
    id: "0f1e",
    "detail-type": MIGRATION_REQUESTED,
    source: "urn:dvm:tests",
    account: "1",
    time: "2024-05-01T10:00:00Z",
    region: "eu-west-1",
    resources: [],
    detail: DATA,
  };
  const bridgeCases: [string, unknown, number, string][] = [
    ["an EventBridge event without detail-type", { ...bridge, "detail-type": undefined }, 400, "detail-type"],
    ["an EventBridge event of another type", { ...bridge, "detail-type": "com.example.other" }, 400, "detail-type"],
    ["an EventBridge event without detail", { ...bridge, detail: undefined }, 400, "detail"],
    ["an EventBridge event whose detail has no namespace", { ...bridge, detail: { spec: SPEC } }, 400, "detail.namespace"],
    ["an EventBridge event with no PVCs", { ...bridge, detail: { ...DATA, spec: { persistentVolumeClaims: [] } } }, 400, "detail.spec.persistentVolumeClaims"],
    ["an EventBridge event from a source not allowed", { ...bridge, source: "com.example.other" }, 403, "source"],
    ["a wrapped CloudEvent without id", { ...bridge, detail: { ...envelope, id: undefined, data: DATA } }, 400, "detail.id"],
    [
      "a wrapped CloudEvent with a bad storage class",
      {
        ...bridge,
        detail: { ...envelope, data: { ...DATA, spec: { persistentVolumeClaims: [{ ...SPEC.persistentVolumeClaims[0], targetStorageClass: "" }] } } },
      },
      400,
      "detail.data.spec.persistentVolumeClaims[0].targetStorageClass",
    ],
    ["an oversized EventBridge event", { ...bridge, detail: { ...DATA, padding: "x".repeat(DEFAULT_MAX_EVENT_BYTES) } }, 413, "detail"],
  ];

  it.each(bridgeCases)("%s → %i naming %s", async (_name, event, status, field) => {
    const store = new RecordingStore();
    const trigger = createTrigger({ handledEvents: new MemoryHandledEvents(), store: async () => store, allowedSources: allowed, namespaces: NAMESPACES });
    const reply = await trigger.handleEventBridge(event);
    expect(reply.status, JSON.stringify(reply.body)).toBe(status);
    expect(reply.body).toMatchObject({ field });
    expect(store.created).toEqual([]);
  });

  it("lists every issue, not only the first", async () => {
    const trigger = createTrigger({ handledEvents: new MemoryHandledEvents(), store: async () => new RecordingStore() });
    const reply = await trigger.handleHttp(rawStructured({ specversion: "1.0", type: MIGRATION_REQUESTED }));
    expect(reply.status).toBe(400);
    expect((reply.body as { issues?: { field: string }[] }).issues?.map((i) => i.field)).toEqual(["id", "source", "time"]);
  });
});

describe("well-formed events", () => {
  it("are read the same from structured mode, binary mode and EventBridge (plain and wrapped)", () => {
    const event = requested({ subject: "shop", time: "2024-05-01T10:00:00.000Z" });
    const structured = receiveHttpEvent(asMessage(HTTP.structured(event)));
    const binary = receiveHttpEvent(asMessage(HTTP.binary(event)));
    const plain = receiveEventBridgeEvent({ id: "req-1", "detail-type": MIGRATION_REQUESTED, source: SOURCE, time: "2024-05-01T10:00:00Z", detail: DATA });
    const wrapped = receiveEventBridgeEvent({
      id: "eventbridge-id",
      "detail-type": MIGRATION_REQUESTED,
      source: "elsewhere",
      detail: JSON.parse(HTTP.structured(event).body as string),
    });
    for (const received of [structured, binary, plain, wrapped]) {
      expect(received.ok, JSON.stringify(received)).toBe(true);
      if (received.ok) expect(received.event).toMatchObject({ id: "req-1", source: SOURCE, type: MIGRATION_REQUESTED, data: DATA });
    }
    expect(structured.ok && structured.event.mode).toBe("structured");
    expect(binary.ok && binary.event.mode).toBe("binary");
    expect(plain.ok && plain.event.dataField).toBe("detail");
    expect(wrapped.ok && wrapped.event.dataField).toBe("detail.data");
  });

  it("accept header names in any case and a base64 body already decoded to bytes", () => {
    const message = HTTP.binary(requested());
    const upper = Object.fromEntries(Object.entries(message.headers).map(([k, v]) => [k.toUpperCase(), v]));
    const received = receiveHttpEvent({ headers: upper, body: Buffer.from(message.body as string) });
    expect(received.ok).toBe(true);
  });

  it("have data that the request schema accepts, with the DVM spec's defaults", () => {
    const parsed = MigrationRequestedDataSchema.parse({ ...DATA, spec: { ...SPEC, destinationCluster: { kubeconfigSecretRef: { name: "dst" } } } });
    expect(parsed.spec.destinationCluster?.kubeconfigSecretRef.key).toBe("kubeconfig");
  });
});

describe("the DVM name of an event", () => {
  it("is <prefix>-<10 hex of sha256(source\\nid)>, the same for every delivery", () => {
    const name = dvmNameForEvent({ source: SOURCE, id: "req-1" });
    expect(name).toMatch(new RegExp(`^migration-[0-9a-f]{${NAME_HASH_LENGTH}}$`));
    expect(dvmNameForEvent({ source: SOURCE, id: "req-1" })).toBe(name);
    // sha256("https://ci.example.com/pipelines/7\nreq-1"), first 10 hex digits.
    expect(name).toBe(`migration-${createHashHex(`${SOURCE}\nreq-1`).slice(0, 10)}`);
  });

  it("differs when the source or the id differs, and takes the prefix", () => {
    const names = new Set([
      dvmNameForEvent({ source: SOURCE, id: "req-1" }),
      dvmNameForEvent({ source: SOURCE, id: "req-2" }),
      dvmNameForEvent({ source: `${SOURCE}0`, id: "req-1" }),
      dvmNameForEvent({ source: SOURCE, id: "req-1" }, "nightly"),
    ]);
    expect(names.size).toBe(4);
    expect(dvmNameForEvent({ source: SOURCE, id: "req-1" }, "nightly")).toMatch(/^nightly-[0-9a-f]{10}$/);
  });

  it("fits a DNS label with the longest prefix allowed", () => {
    expect(dvmNameForEvent({ source: SOURCE, id: "x" }, "a".repeat(MAX_NAME_PREFIX))).toHaveLength(63);
  });

  it("tells a redelivery from a collision by the annotations", () => {
    const annotations = { [EVENT_ANNOTATION.source]: SOURCE, [EVENT_ANNOTATION.id]: "req-1" };
    expect(createdForEvent(annotations, { source: SOURCE, id: "req-1" })).toBe(true);
    expect(createdForEvent(annotations, { source: SOURCE, id: "req-2" })).toBe(false);
    expect(createdForEvent(undefined, { source: SOURCE, id: "req-1" })).toBe(false);
  });
});

describe("the source allow-list", () => {
  it("matches exact sources and prefixes ending in *", () => {
    const list = parseSourceAllowList(" https://ci.example.com/* ,urn:dvm:tests,, ");
    expect(list.refusesAll).toBe(false);
    expect(list.patterns).toEqual(["https://ci.example.com/*", "urn:dvm:tests"]);
    expect(list.allows("https://ci.example.com/pipelines/7")).toBe(true);
    expect(list.allows("urn:dvm:tests")).toBe(true);
    expect(list.allows("urn:dvm:tests2")).toBe(false);
    expect(list.allows("https://ci.example.org/")).toBe(false);
  });

  it("refuses everything when empty: accepting any source must be written out as *", () => {
    for (const text of [undefined, "", " , "]) {
      expect(parseSourceAllowList(text).refusesAll).toBe(true);
      expect(parseSourceAllowList(text).allows("anything")).toBe(false);
    }
    expect(parseSourceAllowList("*").allows("anything")).toBe(true);
  });

  it("gives the trigger's EventBridge rule the same list: disabled when empty, any for *, else exact and prefix", () => {
    expect(eventBridgeSourceMatch(parseSourceAllowList(""))).toBe("none");
    expect(eventBridgeSourceMatch(parseSourceAllowList("urn:a,*"))).toBe("any");
    expect(eventBridgeSourceMatch(parseSourceAllowList("https://ci.example.com/*,urn:a"))).toEqual([{ prefix: "https://ci.example.com/" }, "urn:a"]);
  });
});

// ---- outgoing events --------------------------------------------------------------------------------

const DVM = { namespace: "migrations", name: "move-shop", uid: "6b1f0e7c-1111-4c4c-9d9d-0123456789ab" };
const T0 = Date.parse("2024-05-01T10:00:00.000Z");

function entry(
  phase: string,
  startedAt: number,
  finishedAt: number,
  extra: Partial<LedgerEntry> & { next?: string; result?: "advanced" | "failed"; errors?: string[] } = {},
): LedgerEntry {
  const { next = "Completed", result = "advanced", errors, ...rest } = extra;
  return {
    key: { uid: DVM.uid, phase: phase as LedgerEntry["key"]["phase"], generation: 1 },
    state: "COMPLETED",
    attempts: 1,
    takeovers: 0,
    waits: 0,
    failures: 0,
    startedAt,
    finishedAt,
    elapsedSeconds: (finishedAt - startedAt) / 1000,
    outcome: { result, nextPhase: next as LedgerEntry["key"]["phase"], finishedAt, ...(errors ? { errors } : {}) },
    ...rest,
  };
}

describe("outgoing events", () => {
  it("are wanted when a phase completed (or its completion was repaired), not otherwise", () => {
    expect(eventsWanted({ kind: "advanced", phase: "Started", next: "CleanStaleRsyncResources", requeueAfterMs: 0 })).toBe(true);
    expect(eventsWanted({ kind: "duplicate", phase: "Started", next: "x", statusRepaired: true, requeueAfterMs: 0 })).toBe(true);
    expect(eventsWanted({ kind: "duplicate", phase: "Started", next: "x", statusRepaired: false, requeueAfterMs: 0 })).toBe(false);
    expect(eventsWanted({ kind: "waiting", phase: "RunRsyncOperations", reason: "", requeueAfterMs: 0 })).toBe(false);
    expect(eventsWanted({ kind: "finished", phase: "Completed" })).toBe(false);
    expect(eventsWanted({ kind: "gone" })).toBe(false);
  });

  it("report a completed phase with the ledger's timings and the DVM's identity", () => {
    const history = [
      entry("Started", T0, T0 + 1_500, { next: "CleanStaleRsyncResources" }),
      entry("CleanStaleRsyncResources", T0 + 2_000, T0 + 2_250, { next: "WaitForStaleRsyncResourcesTerminated", attempts: 2 }),
    ];
    const events = completionEvents("CleanStaleRsyncResources", DVM, history, "dvm-serverless/test");
    expect(events).toHaveLength(1);
    const [event] = events;
    expect(event).toMatchObject({
      specversion: "1.0",
      type: PHASE_COMPLETED,
      source: "dvm-serverless/test",
      subject: "migrations/move-shop",
      id: `${PHASE_COMPLETED}:${DVM.uid}:1:CleanStaleRsyncResources`,
      time: "2024-05-01T10:00:02.250Z",
      datacontenttype: "application/json",
    });
    expect(event!.data).toEqual({
      ...DVM,
      generation: 1,
      phase: "CleanStaleRsyncResources",
      result: "advanced",
      next: "WaitForStaleRsyncResourcesTerminated",
      attempts: 2,
      startedAt: "2024-05-01T10:00:02.000Z",
      finishedAt: "2024-05-01T10:00:02.250Z",
      elapsedSeconds: 0.25,
    });
    expect(PhaseCompletedDataSchema.safeParse(event!.data).success).toBe(true);
    expect(() => event!.validate()).not.toThrow();
  });

  it("add migration.succeeded after the last phase, with the total elapsed time and attempts", () => {
    const history = [
      entry("Started", T0, T0 + 1_000, { next: "CleanStaleRsyncResources" }),
      entry("RunRsyncOperations", T0 + 2_000, T0 + 62_000, { next: "DeleteRsyncResources", attempts: 7, waits: 6 }),
      entry("WaitForRsyncResourcesTerminated", T0 + 63_000, T0 + 65_500, { next: "Completed", attempts: 2 }),
    ];
    const events = completionEvents("WaitForRsyncResourcesTerminated", DVM, history);
    expect(events.map((e) => e.type)).toEqual([PHASE_COMPLETED, MIGRATION_SUCCEEDED]);
    const finished = events[1]!;
    expect(finished).toMatchObject({ id: `${MIGRATION_SUCCEEDED}:${DVM.uid}`, subject: "migrations/move-shop", time: "2024-05-01T10:01:05.500Z" });
    expect(finished.data).toEqual({
      ...DVM,
      startedAt: "2024-05-01T10:00:00.000Z",
      finishedAt: "2024-05-01T10:01:05.500Z",
      elapsedSeconds: 65.5,
      phases: 3,
      attempts: 10,
      errors: [],
    });
    expect(MigrationFinishedDataSchema.safeParse(finished.data).success).toBe(true);
  });

  it("send migration.failed after the failure itinerary, naming the failed phase and its errors", () => {
    const history = [
      entry("Started", T0, T0 + 1_000, { next: "CreateDestinationPVCs" }),
      entry("CreateDestinationPVCs", T0 + 1_000, T0 + 2_000, {
        result: "failed",
        next: "MigrationFailed",
        errors: ["storage class fast not found on the destination"],
      }),
      entry("MigrationFailed", T0 + 2_000, T0 + 2_100, { next: "CleanupAfterFailure" }),
      entry("CleanupAfterFailure", T0 + 2_100, T0 + 2_300, { next: "WaitForCleanupAfterFailure" }),
      entry("WaitForCleanupAfterFailure", T0 + 2_300, T0 + 5_000, { next: "Completed" }),
    ];
    const failedPhase = completionEvents("CreateDestinationPVCs", DVM, history);
    expect(failedPhase.map((e) => e.type)).toEqual([PHASE_COMPLETED]);
    expect(failedPhase[0]!.data).toMatchObject({ result: "failed", next: "MigrationFailed", errors: ["storage class fast not found on the destination"] });

    const events = completionEvents("WaitForCleanupAfterFailure", DVM, history);
    expect(events.map((e) => e.type)).toEqual([PHASE_COMPLETED, MIGRATION_FAILED]);
    expect(events[1]!.data).toMatchObject({
      failedPhase: "CreateDestinationPVCs",
      errors: ["storage class fast not found on the destination"],
      elapsedSeconds: 5,
    });
  });

  it("are none when the ledger has no completed entry for the phase", () => {
    const { outcome: _outcome, ...running } = entry("Started", T0, T0);
    expect(completionEvents("Started", DVM, [{ ...running, state: "RUNNING" }])).toEqual([]);
    expect(completionEvents("Started", DVM, [])).toEqual([]);
  });

  it("never carry a credential, even when a phase quoted one in an error", () => {
    const key = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n-----END PRIVATE KEY-----";
    const clientKey = "LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQpNSUlFb3dJQkFBS0NBUUVBMnNqd3d2d3d3d3d3d3d3d3d3d3d3d3d3d3d3d3d3d3d3d3d3d3d3d3d3d3d3d3d3d3d3d3d";
    const errors = [
      `rsync failed: password=hunter2secret, retrying`,
      `stunnel: cannot load ${key}`,
      `kubeconfig invalid: client-key-data: ${clientKey}`,
      `GET https://admin:s3cr3tpw@api.example.com:6443/api failed`,
      `token: eyJhbGciOiJSUzI1NiIsImtpZCI6IiJ9.payload.signature`,
    ];
    const history = [
      entry("Started", T0, T0 + 1_000, { result: "failed", next: "MigrationFailed", errors }),
      entry("WaitForCleanupAfterFailure", T0 + 1_000, T0 + 2_000),
    ];
    const text = [...completionEvents("Started", DVM, history), ...completionEvents("WaitForCleanupAfterFailure", DVM, history)]
      .map((e) => JSON.stringify(e))
      .join("\n");
    for (const secret of [
      "hunter2secret",
      "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7",
      clientKey.slice(0, 40),
      "s3cr3tpw",
      "eyJhbGciOiJSUzI1NiIsImtpZCI6IiJ9",
    ]) {
      expect(text).not.toContain(secret);
    }
    // What the messages were about stays readable.
    expect(text).toContain("rsync failed: password=[redacted]");
    expect(text).toContain("https://admin:[redacted]@api.example.com");
  });

  it("redactSecrets leaves ordinary messages alone", () => {
    const message = 'secret "dvm-6b1f0e7c11-rsync-credentials" not found; pods "rsync-server" is forbidden';
    expect(redactSecrets(message)).toBe(message);
  });
});

function createHashHex(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

describe("docs/events.md", () => {
  const docs = readFileSync(new URL("../../../docs/events.md", import.meta.url), "utf8");

  it("names every event type and every field of every data schema", () => {
    for (const type of [MIGRATION_REQUESTED, ...OUTGOING_EVENT_TYPES]) expect(docs).toContain(`\`${type}\``);
    const fields = [
      ...Object.keys(MigrationRequestedDataSchema.shape),
      ...Object.keys(PhaseCompletedDataSchema.shape),
      ...Object.keys(MigrationFinishedDataSchema.shape),
    ];
    for (const field of fields) expect(docs, field).toMatch(new RegExp(`[\`"]${field}[\`"]`));
  });

  it("shows the annotations the trigger writes", () => {
    for (const annotation of Object.values(EVENT_ANNOTATION)) expect(docs).toContain(annotation);
  });
});
