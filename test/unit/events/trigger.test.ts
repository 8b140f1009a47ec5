/**
 * The trigger's decisions with an in-memory store: idempotent creation (201, then 200 for a
 * redelivery, 409 for a name collision), what lands on the DVM, how API server errors are answered,
 * and the Lambda adapter (API Gateway v2 and EventBridge in, response or thrown error out). The real
 * API server and serverless-offline are in test/integration/trigger.test.ts.
 */
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from "aws-lambda";
import { CloudEvent, HTTP } from "cloudevents";
import { describe, expect, it } from "vitest";
import type { MetricsWriter } from "../../../src/aws/phaseMetrics";
import { createTriggerHandler, TriggerUnavailableError, triggerFromEnv } from "../../../src/aws/triggerHandler";
import { ENV } from "../../../src/config/environment";
import { POLICY_ENV } from "../../../src/dvm/policyConfig";
import type { DvmSpec } from "../../../src/dvm/types";
import type { HandledEvents } from "../../../src/events/handledEvents";
import type { CreateResult, ExistingMigration, LabelledMigration, MigrationStore, NewMigration } from "../../../src/events/migrationStore";
import { dvmNameForEvent, EVENT_ANNOTATION } from "../../../src/events/names";
import { triggerNamespaceRule } from "../../../src/events/namespaces";
import { MIGRATION_REQUESTED } from "../../../src/events/schema";
import { parseSourceAllowList } from "../../../src/events/sources";
import { CREATED_BY, CREATED_BY_LABEL, createTrigger, type Trigger } from "../../../src/events/trigger";
import { KubeApiError } from "../../../src/kube/errors";
import { LedgerUnavailableError } from "../../../src/ledger/errors";
import type { LogAttributes, Logger } from "../../../src/lib/log";
import { MemoryHandledEvents } from "../../support/memoryHandledEvents";

const SPEC: DvmSpec = {
  persistentVolumeClaims: [{ name: "db", namespace: "shop", targetStorageClass: "fast", targetAccessModes: ["ReadWriteOnce"] }],
};
const DATA = { namespace: "migrations", spec: SPEC };
const SOURCE = "https://ci.example.com/pipelines/7";
const requested = (overrides: Record<string, unknown> = {}) =>
  new CloudEvent<unknown>({ type: MIGRATION_REQUESTED, source: SOURCE, id: "req-1", data: DATA, ...overrides });

class MemoryStore implements MigrationStore {
  readonly objects = new Map<string, NewMigration & { uid: string }>();
  creates = 0;
  failCreate: Error | undefined;
  /** Deletes the object right after the next AlreadyExists (a DVM deleted between create and read). */
  vanishOnce = false;

  async create(migration: NewMigration): Promise<CreateResult> {
    this.creates++;
    if (this.failCreate) throw this.failCreate;
    const key = `${migration.namespace}/${migration.name}`;
    if (this.objects.has(key)) {
      if (this.vanishOnce) {
        this.vanishOnce = false;
        this.objects.delete(key);
      }
      return { kind: "exists" };
    }
    const uid = `uid-${this.objects.size + 1}`;
    this.objects.set(key, { ...migration, uid });
    return { kind: "created", uid };
  }

  async get(namespace: string, name: string): Promise<ExistingMigration | undefined> {
    const found = this.objects.get(`${namespace}/${name}`);
    return found && { uid: found.uid, annotations: found.annotations };
  }

  /** Names of the DVMs whose status.phase is Completed. */
  readonly completed = new Set<string>();

  async listLabelled(namespace: string, label: string, value: string): Promise<LabelledMigration[]> {
    return [...this.objects.values()]
      .filter((o) => o.namespace === namespace && o.labels[label] === value)
      .map((o) => ({ name: o.name, uid: o.uid, annotations: o.annotations, completed: this.completed.has(o.name) }));
  }

  async delete(namespace: string, name: string, uid: string): Promise<void> {
    if (this.objects.get(`${namespace}/${name}`)?.uid === uid) this.objects.delete(`${namespace}/${name}`);
  }
}

function capturingLogger(lines: { level: string; message: string; attributes?: LogAttributes }[] = []): Logger & { lines: typeof lines } {
  const at = (level: string) => (message: string, attributes?: LogAttributes) => void lines.push({ level, message, ...(attributes ? { attributes } : {}) });
  return { lines, debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error"), child: () => capturingLogger(lines) };
}

/** Events may create DVMs in "migrations" and "team-*"; dvm-system is the admin namespace. */
const NAMESPACES = triggerNamespaceRule({ allowedNamespaces: ["migrations", "team-*"], adminNamespaces: ["dvm-system"], allowAdminNamespaces: false });

function withStore(store = new MemoryStore()): { trigger: Trigger; store: MemoryStore } {
  return {
    trigger: createTrigger({
      handledEvents: new MemoryHandledEvents(),
      store: async () => store,
      allowedSources: parseSourceAllowList("https://ci.example.com/*"),
      namespaces: NAMESPACES,
    }),
    store,
  };
}

describe("the trigger", () => {
  it("creates one DVM per event, named from its source and id, annotated with the event", async () => {
    const { trigger, store } = withStore();
    const reply = await trigger.handleHttp(HTTP.structured(requested()) as never);
    const name = dvmNameForEvent({ source: SOURCE, id: "req-1" });
    expect(reply).toEqual({
      status: 201,
      body: {
        result: "created",
        migration: { namespace: "migrations", name, uid: "uid-1" },
        event: { source: SOURCE, id: "req-1", type: MIGRATION_REQUESTED },
      },
    });
    const created = store.objects.get(`migrations/${name}`)!;
    expect(created.annotations).toEqual({ [EVENT_ANNOTATION.source]: SOURCE, [EVENT_ANNOTATION.id]: "req-1", [EVENT_ANNOTATION.type]: MIGRATION_REQUESTED });
    expect(created.labels).toEqual({ [CREATED_BY_LABEL]: CREATED_BY });
    expect(created.spec).toEqual(SPEC);
  });

  it("answers a redelivery (any mode) with 200 and the DVM that exists, creating nothing more", async () => {
    const { trigger, store } = withStore();
    const first = await trigger.handleHttp(HTTP.structured(requested()) as never);
    const again = await trigger.handleHttp(HTTP.binary(requested()) as never);
    const viaBridge = await trigger.handleEventBridge({
      id: "bridge-1",
      "detail-type": MIGRATION_REQUESTED,
      time: new Date().toISOString(),
      source: "ignored",
      detail: JSON.parse(HTTP.structured(requested()).body as string),
    });
    expect(first.status).toBe(201);
    for (const reply of [again, viaBridge]) {
      expect(reply.status).toBe(200);
      expect(reply.body).toMatchObject({ result: "exists", migration: { uid: "uid-1", name: dvmNameForEvent({ source: SOURCE, id: "req-1" }) } });
    }
    expect(store.objects.size).toBe(1);
  });

  it("creates another DVM for another id, and uses the name prefix", async () => {
    const { trigger, store } = withStore();
    await trigger.handleHttp(HTTP.structured(requested()) as never);
    const reply = await trigger.handleHttp(HTTP.structured(requested({ id: "req-2", data: { ...DATA, namePrefix: "nightly" } })) as never);
    expect(reply.status).toBe(201);
    expect(reply.body).toMatchObject({ migration: { name: dvmNameForEvent({ source: SOURCE, id: "req-2" }, "nightly") } });
    expect(store.objects.size).toBe(2);
  });

  it("answers 409 when a DVM of the derived name was created for another event", async () => {
    const store = new MemoryStore();
    const name = dvmNameForEvent({ source: SOURCE, id: "req-1" });
    store.objects.set(`migrations/${name}`, {
      namespace: "migrations",
      name,
      uid: "other",
      labels: {},
      spec: SPEC,
      annotations: { [EVENT_ANNOTATION.source]: "urn:else", [EVENT_ANNOTATION.id]: "x" },
    });
    const { trigger } = withStore(store);
    const reply = await trigger.handleHttp(HTTP.structured(requested()) as never);
    expect(reply.status).toBe(409);
    expect(reply.body).toMatchObject({ error: "name collision", field: "id" });
  });

  it("creates again when the DVM vanished between AlreadyExists and the read", async () => {
    const { trigger, store } = withStore();
    // Created by an earlier delivery that ended before it recorded the event.
    await store.create({ namespace: "migrations", name: dvmNameForEvent({ source: SOURCE, id: "req-1" }), annotations: {}, labels: {}, spec: SPEC });
    store.vanishOnce = true;
    const reply = await trigger.handleHttp(HTTP.structured(requested()) as never);
    expect(reply.status).toBe(201);
    expect(store.creates).toBe(3);
  });

  it.each([
    ["a namespace that does not exist", new KubeApiError('create: namespaces "migrations" not found', 404, "NotFound"), 422, { field: "data.namespace" }],
    ["the CRD refusing the object", new KubeApiError("create: spec.persistentVolumeClaims: Invalid value", 422, "Invalid"), 422, { field: "data.spec" }],
    ["an API server that is down", new KubeApiError("create: connect ECONNREFUSED", undefined, undefined), 503, { error: "unavailable" }],
    ["throttling", new KubeApiError("create: too many requests", 429, "TooManyRequests"), 503, { error: "unavailable" }],
    ["a write conflict (a fresh try re-reads)", new KubeApiError("create: conflict", 409, "Conflict"), 503, { error: "unavailable" }],
    [
      "RBAC refusing the create",
      new KubeApiError('create: directvolumemigrations is forbidden: User "trigger"', 403, "Forbidden"),
      500,
      { error: "internal error" },
    ],
    ["the CRD not installed", new KubeApiError("create: the server could not find the requested resource", 404, "NotFound"), 500, { error: "internal error" }],
  ])("answers %s with %i", async (_name, error, status, body) => {
    const store = new MemoryStore();
    store.failCreate = error;
    const { trigger } = withStore(store);
    const reply = await trigger.handleHttp(HTTP.structured(requested()) as never);
    expect(reply.status).toBe(status);
    expect(reply.body).toMatchObject(body);
    // The reply never echoes the API server's words for a fault of ours (they can name users and hosts).
    if (status === 500) expect(JSON.stringify(reply.body)).not.toContain("User");
  });

  it("refuses every event, creating nothing, when the allow-list is empty (or not given)", async () => {
    for (const allowedSources of [parseSourceAllowList(""), parseSourceAllowList(" , "), undefined]) {
      const store = new MemoryStore();
      let loads = 0;
      const trigger = createTrigger({
        handledEvents: new MemoryHandledEvents(),
        store: async () => (loads++, store),
        ...(allowedSources ? { allowedSources } : {}),
      });
      const http = await trigger.handleHttp(HTTP.structured(requested()) as never);
      expect(http).toMatchObject({ status: 403, body: { error: "source not allowed", field: "source" } });
      const bridge = await trigger.handleEventBridge({
        version: "0",
        id: "e-1",
        "detail-type": MIGRATION_REQUESTED,
        time: new Date().toISOString(),
        source: "com.example.ci",
        detail: { namespace: "migrations", spec: {} },
      });
      expect(bridge).toMatchObject({ status: 403, body: { field: "source" } });
      expect(store.objects.size).toBe(0);
      expect(loads).toBe(0);
    }
  });

  it("refuses an event from a source outside the allow-list, creating nothing", async () => {
    const { trigger, store } = withStore();
    const reply = await trigger.handleHttp(HTTP.structured(requested({ source: "https://intruder.example.org/x" })) as never);
    expect(reply).toMatchObject({ status: 403, body: { field: "source" } });
    expect(store.objects.size).toBe(0);
  });

  it.each([
    ["a namespace outside the list", "shop", /not in TRIGGER_ALLOWED_NAMESPACES/],
    ["the admin namespace, which no entry names", "dvm-system", /not in TRIGGER_ALLOWED_NAMESPACES/],
  ])("refuses %s (403 naming data.namespace), creating nothing", async (_case, namespace, why) => {
    const { trigger, store } = withStore();
    const reply = await trigger.handleHttp(HTTP.structured(requested({ data: { ...DATA, namespace } })) as never);
    expect(reply).toMatchObject({ status: 403, body: { error: "namespace not allowed", field: "data.namespace" } });
    expect((reply.body as { message: string }).message).toMatch(why);
    expect(store.objects.size).toBe(0);
  });

  it("refuses an admin namespace that a prefix or even an exact entry covers, unless the operator allows admin DVMs", async () => {
    const event = (namespace: string, id: string) =>
      HTTP.structured(requested({ id, data: { ...DATA, namespace, spec: { ...SPEC, runAsRoot: true } } })) as never;
    for (const allowedNamespaces of [["dvm-*"], ["*"], ["dvm-system"]]) {
      const store = new MemoryStore();
      const namespaces = triggerNamespaceRule({ allowedNamespaces, adminNamespaces: ["dvm-system"], allowAdminNamespaces: false });
      const trigger = createTrigger({
        handledEvents: new MemoryHandledEvents(),
        store: async () => store,
        allowedSources: parseSourceAllowList("*"),
        namespaces,
      });
      const reply = await trigger.handleHttp(event("dvm-system", `admin-${allowedNamespaces[0]}`));
      expect(reply, allowedNamespaces[0]).toMatchObject({ status: 403, body: { field: "data.namespace" } });
      expect((reply.body as { message: string }).message).toMatch(/is an admin namespace \(DVM_ADMIN_NAMESPACES\)/);
      expect(store.objects.size).toBe(0);
    }
    // Allowed only as asked: the flag and the namespace's own name; a prefix still does not reach it.
    for (const [allowedNamespaces, status] of [
      [["dvm-system"], 201],
      [["dvm-*"], 403],
    ] as const) {
      const store = new MemoryStore();
      const namespaces = triggerNamespaceRule({ allowedNamespaces, adminNamespaces: ["dvm-system"], allowAdminNamespaces: true });
      const trigger = createTrigger({
        handledEvents: new MemoryHandledEvents(),
        store: async () => store,
        allowedSources: parseSourceAllowList("*"),
        namespaces,
      });
      expect((await trigger.handleHttp(event("dvm-system", `flag-${allowedNamespaces[0]}`))).status, allowedNamespaces[0]).toBe(status);
    }
  });

  it("refuses every event's namespace when no namespace rule is given", async () => {
    const store = new MemoryStore();
    const trigger = createTrigger({ handledEvents: new MemoryHandledEvents(), store: async () => store, allowedSources: parseSourceAllowList("*") });
    expect(await trigger.handleHttp(HTTP.structured(requested()) as never)).toMatchObject({ status: 403, body: { field: "data.namespace" } });
    expect(store.objects.size).toBe(0);
  });

  it("never creates a second DVM for an event replayed after its DVM was deleted (409 naming the DVM it made)", async () => {
    const { trigger, store } = withStore();
    const first = await trigger.handleHttp(HTTP.structured(requested()) as never);
    expect(first.status).toBe(201);
    store.objects.clear();
    const replay = await trigger.handleHttp(HTTP.binary(requested()) as never);
    expect(replay).toMatchObject({ status: 409, body: { error: "event already handled", field: "id" } });
    expect((replay.body as { message: string }).message).toMatch(
      /created DirectVolumeMigration migrations\/migration-[0-9a-f]+ \(uid uid-1\).*no longer exists/,
    );
    expect(store.objects.size).toBe(0);
    expect(store.creates).toBe(1);
  });

  it("records an event whose DVM an earlier, interrupted delivery created, so a later replay is refused too", async () => {
    const handledEvents = new MemoryHandledEvents();
    const store = new MemoryStore();
    const trigger = createTrigger({ handledEvents, store: async () => store, allowedSources: parseSourceAllowList("*"), namespaces: NAMESPACES });
    const name = dvmNameForEvent({ source: SOURCE, id: "req-1" });
    const annotations = { [EVENT_ANNOTATION.source]: SOURCE, [EVENT_ANNOTATION.id]: "req-1", [EVENT_ANNOTATION.type]: MIGRATION_REQUESTED };
    await store.create({ namespace: "migrations", name, annotations, labels: {}, spec: SPEC });
    expect((await trigger.handleHttp(HTTP.structured(requested()) as never)).status).toBe(200);
    expect(handledEvents.records.size).toBe(1);
    store.objects.clear();
    expect((await trigger.handleHttp(HTTP.structured(requested()) as never)).status).toBe(409);
  });

  it("refuses an event older than its age bound, or from too far ahead, naming time", async () => {
    const now = Date.parse("2026-12-03T12:00:00Z");
    const store = new MemoryStore();
    const trigger = createTrigger({
      handledEvents: new MemoryHandledEvents(),
      store: async () => store,
      allowedSources: parseSourceAllowList("*"),
      namespaces: NAMESPACES,
      maxEventAgeSeconds: 3600,
      clock: { now: () => now },
    });
    const at = (offsetMs: number, id: string) => HTTP.structured(requested({ id, time: new Date(now + offsetMs).toISOString() })) as never;
    const old = await trigger.handleHttp(at(-3601_000, "old"));
    expect(old).toMatchObject({ status: 400, body: { field: "time" } });
    expect((old.body as { message: string }).message).toMatch(/older than 3600 s \(TRIGGER_MAX_EVENT_AGE_SECONDS\)/);
    expect(await trigger.handleHttp(at(10 * 60_000, "ahead"))).toMatchObject({ status: 400, body: { field: "time" } });
    expect(store.objects.size).toBe(0);
    expect((await trigger.handleHttp(at(-3599_000, "recent"))).status).toBe(201);
  });

  it("answers 503 when its records of handled events cannot be read, creating nothing", async () => {
    const store = new MemoryStore();
    const unavailable: HandledEvents = {
      recall: async () => {
        throw new LedgerUnavailableError("recall a handled event", 3, new Error("throttled"));
      },
      remember: async () => undefined,
    };
    const trigger = createTrigger({ handledEvents: unavailable, store: async () => store, allowedSources: parseSourceAllowList("*"), namespaces: NAMESPACES });
    expect(await trigger.handleHttp(HTTP.structured(requested()) as never)).toMatchObject({ status: 503, retryAfterSeconds: 5 });
    expect(store.objects.size).toBe(0);
  });

  it("does not load the kubeconfig for an event it refuses", async () => {
    let loads = 0;
    const trigger = createTrigger({ handledEvents: new MemoryHandledEvents(), store: async () => (loads++, new MemoryStore()) });
    await trigger.handleHttp({ headers: {}, body: "{}" });
    expect(loads).toBe(0);
  });
});

class MetricsRecorder implements MetricsWriter {
  readonly dimensions: Record<string, string> = {};
  readonly values: Record<string, number> = {};
  addDimension(name: string, value: string) {
    this.dimensions[name] = value;
  }
  addMetric(name: string, _unit: string, value: number) {
    this.values[name] = value;
  }
}

function httpApiEvent(message: { headers: Record<string, unknown>; body: unknown }, base64 = false): APIGatewayProxyEventV2 {
  const body = String(message.body);
  return {
    version: "2.0",
    routeKey: "POST /migrations",
    rawPath: "/migrations",
    rawQueryString: "",
    headers: Object.fromEntries(Object.entries(message.headers).map(([k, v]) => [k.toLowerCase(), String(v)])),
    requestContext: {
      http: { method: "POST", path: "/migrations", protocol: "HTTP/1.1", sourceIp: "127.0.0.1", userAgent: "test" },
    } as APIGatewayProxyEventV2["requestContext"],
    body: base64 ? Buffer.from(body).toString("base64") : body,
    isBase64Encoded: base64,
  };
}

describe("the trigger function's adapter", () => {
  const setup = () => {
    const store = new MemoryStore();
    const metrics = new MetricsRecorder();
    const handle = createTriggerHandler({
      trigger: createTrigger({
        handledEvents: new MemoryHandledEvents(),
        store: async () => store,
        allowedSources: parseSourceAllowList("*"),
        namespaces: NAMESPACES,
      }),
      log: capturingLogger(),
      metrics,
    });
    return { store, metrics, handle };
  };

  it("turns an HTTP API request (base64 or not) into a JSON response", async () => {
    const { handle, metrics } = setup();
    const created = (await handle(httpApiEvent(HTTP.binary(requested()), true))) as APIGatewayProxyStructuredResultV2;
    expect(created.statusCode).toBe(201);
    expect(created.headers).toEqual({ "content-type": "application/json" });
    expect(JSON.parse(created.body!)).toMatchObject({ result: "created", migration: { namespace: "migrations" } });
    expect(metrics.dimensions).toEqual({ Transport: "http" });
    expect(metrics.values).toEqual({ MigrationsCreated: 1, MigrationsExisted: 0, MigrationsRefused: 0, MigrationsFailed: 0 });

    const again = (await handle(httpApiEvent(HTTP.structured(requested())))) as APIGatewayProxyStructuredResultV2;
    expect(again.statusCode).toBe(200);
    const bad = (await handle(
      httpApiEvent({ headers: { "content-type": "application/cloudevents+json" }, body: "nope" }),
    )) as APIGatewayProxyStructuredResultV2;
    expect(bad.statusCode).toBe(400);
    expect(JSON.parse(bad.body!)).toMatchObject({ field: "body" });
    expect(metrics.values.MigrationsRefused).toBe(1);
  });

  it("answers 503 with Retry-After over HTTP, and throws for EventBridge so Lambda retries", async () => {
    const { handle, store } = setup();
    store.failCreate = new KubeApiError("create: connect ECONNREFUSED", undefined, undefined);
    const http = (await handle(httpApiEvent(HTTP.structured(requested())))) as APIGatewayProxyStructuredResultV2;
    expect(http.statusCode).toBe(503);
    expect(http.headers).toMatchObject({ "retry-after": "5" });
    await expect(
      handle({ id: "b1", "detail-type": MIGRATION_REQUESTED, time: new Date().toISOString(), source: "urn:x", detail: DATA }),
    ).rejects.toBeInstanceOf(TriggerUnavailableError);
  });

  it("returns the reply of an EventBridge event, refused ones included (not retried)", async () => {
    const { handle, store } = setup();
    const created = await handle({
      version: "0",
      id: "b1",
      "detail-type": MIGRATION_REQUESTED,
      time: new Date().toISOString(),
      source: "com.example.ci",
      detail: DATA,
    });
    expect(created).toMatchObject({ status: 201, body: { event: { source: "com.example.ci", id: "b1" } } });
    const redelivered = await handle({
      version: "0",
      id: "b1",
      "detail-type": MIGRATION_REQUESTED,
      time: new Date().toISOString(),
      source: "com.example.ci",
      detail: DATA,
    });
    expect(redelivered).toMatchObject({ status: 200 });
    const refused = await handle({
      id: "b2",
      "detail-type": MIGRATION_REQUESTED,
      time: new Date().toISOString(),
      source: "com.example.ci",
      detail: { namespace: "migrations" },
    });
    expect(refused).toMatchObject({ status: 400, body: { field: "detail.spec" } });
    expect(store.objects.size).toBe(1);
  });

  it("refuses anything else with 400", async () => {
    const { handle } = setup();
    expect(await handle({ hello: "world" })).toMatchObject({ status: 400, body: { field: "event" } });
    expect(await handle("text")).toMatchObject({ status: 400 });
  });
});

describe("triggerFromEnv", () => {
  it("warns once, when built, that an empty allow-list refuses every event", () => {
    const log = capturingLogger();
    triggerFromEnv({ [ENV.ledgerTable]: "ledger" }, log);
    expect(log.lines.filter((l) => l.level === "warn").map((l) => l.message)).toEqual([
      expect.stringContaining("TRIGGER_ALLOWED_SOURCES is empty: every event will be refused"),
      expect.stringContaining("TRIGGER_ALLOWED_NAMESPACES is empty: every event will be refused"),
    ]);
    const quiet = capturingLogger();
    triggerFromEnv({ [ENV.ledgerTable]: "ledger", [ENV.triggerAllowedSources]: "urn:a", [ENV.triggerAllowedNamespaces]: "shop" }, quiet);
    expect(quiet.lines).toEqual([]);
  });

  it("refuses to start when the namespace list names an admin namespace without the operator's permission", () => {
    const env = { [ENV.ledgerTable]: "ledger", [ENV.triggerAllowedSources]: "*", [ENV.triggerAllowedNamespaces]: "shop,ops" };
    expect(() => triggerFromEnv({ ...env, [POLICY_ENV.adminNamespaces]: "ops" }, capturingLogger())).toThrow(
      /^trigger configuration: TRIGGER_ALLOWED_NAMESPACES: ops is an admin namespace \(DVM_ADMIN_NAMESPACES\); set TRIGGER_ALLOW_ADMIN_NAMESPACES=true/,
    );
    expect(() => triggerFromEnv({ ...env, [ENV.triggerAllowedNamespaces]: "dvm-system" }, capturingLogger())).toThrow(/dvm-system is an admin namespace/);
    expect(() => triggerFromEnv({ ...env, [POLICY_ENV.adminNamespaces]: "ops", [ENV.triggerAllowAdminNamespaces]: "true" }, capturingLogger())).not.toThrow();
  });

  it("reads the namespace list and the admin namespaces from the environment", async () => {
    const trigger = triggerFromEnv(
      { [ENV.ledgerTable]: "ledger", [ENV.triggerAllowedSources]: "*", [ENV.triggerAllowedNamespaces]: "team-*,ops*" },
      capturingLogger(),
    );
    // The default admin namespace (dvm-system) is refused although no entry covers it; "ops" is not an admin namespace here.
    const store = (namespace: string, id: string) => trigger.handleHttp(HTTP.structured(requested({ id, data: { ...DATA, namespace } })) as never);
    expect(await store("migrations", "n-1")).toMatchObject({ status: 403, body: { field: "data.namespace" } });
    const admin = triggerFromEnv(
      {
        [ENV.ledgerTable]: "ledger",
        [ENV.triggerAllowedSources]: "*",
        [ENV.triggerAllowedNamespaces]: "team-*,ops*",
        [POLICY_ENV.adminNamespaces]: "ops-admin",
      },
      capturingLogger(),
    );
    const reply = await admin.handleHttp(HTTP.structured(requested({ id: "n-2", data: { ...DATA, namespace: "ops-admin" } })) as never);
    expect(reply).toMatchObject({ status: 403, body: { field: "data.namespace" } });
    expect((reply.body as { message: string }).message).toMatch(/admin namespace/);
  });

  it("applies the allow-list and the size limit from the environment", async () => {
    const trigger = triggerFromEnv(
      { [ENV.ledgerTable]: "ledger", [ENV.triggerAllowedSources]: "urn:only", [ENV.triggerAllowedNamespaces]: "migrations", [ENV.triggerMaxEventBytes]: "160" },
      capturingLogger(),
    );
    expect((await trigger.handleHttp(HTTP.structured(requested()) as never)).status).toBe(413);
    const small = await trigger.handleHttp({
      headers: { "content-type": "application/cloudevents+json" },
      body: JSON.stringify({ specversion: "1.0", id: "1", source: "urn:x", type: MIGRATION_REQUESTED, time: new Date().toISOString() }),
    });
    expect(small).toMatchObject({ status: 403, body: { field: "source" } });
  });
});
