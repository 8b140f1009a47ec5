/**
 * The trigger function as Lambda runs it, through serverless-offline: real CloudEvents built with the
 * SDK (HTTP.structured / HTTP.binary) POSTed to the HTTP API route, and EventBridge-shaped events sent
 * through offline's Lambda Invoke API; DirectVolumeMigrations land on the "source" control plane (its
 * host cluster). Checked on the API server itself: one DVM per distinct event, none more for a
 * redelivery (same source and id, any mode, even concurrent), none at all for a malformed event, whose
 * reply names the failing field, and none for a replay after the DVM was deleted (the trigger's records
 * of handled events in the ledger table, DynamoDB Local here).
 */
import { InvokeCommand, LambdaClient } from "@aws-sdk/client-lambda";
import { CoreV1Api, CustomObjectsApi } from "@kubernetes/client-node";
import { CloudEvent, HTTP, type Message } from "cloudevents";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { type ServerlessOffline, startServerlessOffline } from "../../infra/dev/local/serverlessOffline";
import { DVM_GROUP, DVM_PLURAL, DVM_VERSION } from "../../src/dvm/types";
import { dvmNameForEvent, EVENT_ANNOTATION } from "../../src/events/names";
import { MIGRATION_REQUESTED } from "../../src/events/schema";
import { testClusters } from "../support/clusters";
import { dynamoEndpoint, type FreshTable, freshLedgerTable, testAwsAccess } from "../support/dynamo";
import { createDvm } from "../support/migration";
import { missing } from "../support/requirements";

const available = inject("clusters") && dynamoEndpoint();
const dynamo = dynamoEndpoint();
const run = Date.now().toString(36);
const NAMESPACE = `trigger-${run}`;
const CI = `https://ci.example.com/runs/${run}`;
const BRIDGE_SOURCE = "com.example.ci";
const SPEC = {
  persistentVolumeClaims: [{ name: "db", namespace: "shop", targetStorageClass: "fast", targetAccessModes: ["ReadWriteOnce"] }],
};
const DATA = { namespace: NAMESPACE, spec: SPEC };

// biome-ignore lint/suspicious/noExplicitAny: parsed YAML/JSON, walked freely by the test
type Reply = { status: number; body: Record<string, any> };

describe.skipIf(missing("the clusters and DynamoDB test services", available, "run without DVM_TEST_SERVICES"))(
  "trigger function under serverless-offline",
  () => {
    const clusters = available ? testClusters() : undefined;
    let offline: ServerlessOffline | undefined;
    let table: FreshTable | undefined;
    let lambda: LambdaClient;
    /** Every DVM name a successful (201) reply named; the namespace must hold exactly these. */
    const created = new Set<string>();

    beforeAll(async () => {
      await clusters!.source.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: NAMESPACE } } });
      table = await freshLedgerTable();
      const { credentials } = testAwsAccess(dynamo!.endpoint, dynamo!.region);
      offline = await startServerlessOffline({
        env: {
          KUBECONFIG: clusters!.info.source.kubeconfigPath,
          LEDGER_TABLE_NAME: table.tableName,
          AWS_ENDPOINT_URL_DYNAMODB: dynamo!.endpoint,
          ...(credentials ? { AWS_ACCESS_KEY_ID: credentials.accessKeyId, AWS_SECRET_ACCESS_KEY: credentials.secretAccessKey } : {}),
          TRIGGER_ALLOWED_SOURCES: `https://ci.example.com/*,${BRIDGE_SOURCE}`,
          // The test's namespace, and one the operator lists but nobody created (422 from the API server).
          TRIGGER_ALLOWED_NAMESPACES: `${NAMESPACE},missing-${run}`,
          AWS_REGION: "us-east-1",
          LOG_LEVEL: "INFO",
        },
      });
      lambda = new LambdaClient({
        endpoint: offline.lambdaEndpoint,
        region: "us-east-1",
        credentials: { accessKeyId: "offline", secretAccessKey: "offline" },
        maxAttempts: 1,
      });
    }, 180_000);

    afterAll(async () => {
      lambda?.destroy();
      await offline?.stop();
      await table?.drop();
      await clusters?.source
        .makeApiClient(CoreV1Api)
        .deleteNamespace({ name: NAMESPACE })
        .catch(() => undefined);
    });

    const requested = (id: string, overrides: Record<string, unknown> = {}) =>
      new CloudEvent<unknown>({ type: MIGRATION_REQUESTED, source: CI, id, data: DATA, ...overrides });

    async function post(message: Message | { headers: Record<string, string>; body: string }): Promise<Reply> {
      const response = await fetch(`${offline!.httpEndpoint}/migrations`, {
        method: "POST",
        headers: message.headers as Record<string, string>,
        body: message.body as string,
      });
      const text = await response.text();
      return { status: response.status, body: text ? (JSON.parse(text) as Reply["body"]) : {} };
    }

    async function invoke(event: unknown): Promise<Reply & { functionError?: string | undefined }> {
      const out = await lambda.send(
        new InvokeCommand({ FunctionName: offline!.triggerFunctionName, Payload: new TextEncoder().encode(JSON.stringify(event)) }),
      );
      const payload = JSON.parse(new TextDecoder().decode(out.Payload)) as Reply;
      return { ...payload, functionError: out.FunctionError };
    }

    const bridgeEvent = (id: string, detail: unknown, overrides: Record<string, unknown> = {}) => ({
      version: "0",
      id,
      "detail-type": MIGRATION_REQUESTED,
      source: BRIDGE_SOURCE,
      account: "000000000000",
      time: new Date().toISOString(),
      region: "us-east-1",
      resources: [],
      detail,
      ...overrides,
    });

    async function dvmsInNamespace(): Promise<{ name: string; uid: string; annotations: Record<string, string>; spec: unknown }[]> {
      const list = (await clusters!.source
        .makeApiClient(CustomObjectsApi)
        .listNamespacedCustomObject({ group: DVM_GROUP, version: DVM_VERSION, namespace: NAMESPACE, plural: DVM_PLURAL })) as {
        items: { metadata: { name: string; uid: string; annotations?: Record<string, string> }; spec: unknown }[];
      };
      return list.items.map((i) => ({ name: i.metadata.name, uid: i.metadata.uid, annotations: i.metadata.annotations ?? {}, spec: i.spec }));
    }

    function remember(reply: Reply): void {
      expect(reply.status, JSON.stringify(reply.body)).toBe(201);
      created.add(reply.body.migration.name as string);
    }

    it("creates a DVM for a structured-mode CloudEvent and answers a binary-mode redelivery with the same one", async () => {
      const first = await post(HTTP.structured(requested("req-1")));
      remember(first);
      const name = dvmNameForEvent({ source: CI, id: "req-1" });
      expect(first.body).toMatchObject({
        result: "created",
        migration: { namespace: NAMESPACE, name },
        event: { source: CI, id: "req-1", type: MIGRATION_REQUESTED },
      });
      expect(first.body.migration.uid).toMatch(/^[0-9a-f-]{36}$/);

      const again = await post(HTTP.binary(requested("req-1")));
      expect(again.status).toBe(200);
      expect(again.body).toMatchObject({ result: "exists", migration: { name, uid: first.body.migration.uid } });

      const dvm = (await dvmsInNamespace()).find((d) => d.name === name)!;
      expect(dvm.uid).toBe(first.body.migration.uid);
      expect(dvm.annotations).toMatchObject({ [EVENT_ANNOTATION.source]: CI, [EVENT_ANNOTATION.id]: "req-1", [EVENT_ANNOTATION.type]: MIGRATION_REQUESTED });
      expect(dvm.spec).toEqual(SPEC);
    });

    it("creates one DVM per distinct event, in binary mode too, with the name prefix", async () => {
      remember(await post(HTTP.binary(requested("req-2"))));
      const prefixed = await post(HTTP.structured(requested("req-3", { data: { ...DATA, namePrefix: "nightly" } })));
      remember(prefixed);
      expect(prefixed.body.migration.name).toBe(dvmNameForEvent({ source: CI, id: "req-3" }, "nightly"));
    });

    it("creates exactly one DVM when the same event arrives five times at once", async () => {
      const replies = await Promise.all(
        Array.from({ length: 5 }, (_, i) => post(i % 2 ? HTTP.binary(requested("req-burst")) : HTTP.structured(requested("req-burst")))),
      );
      expect(replies.map((r) => r.status).sort()).toEqual([200, 200, 200, 200, 201]);
      expect(new Set(replies.map((r) => r.body.migration.uid)).size).toBe(1);
      created.add(replies[0]!.body.migration.name as string);
    });

    it("handles EventBridge events through the Lambda Invoke API: plain and wrapped, redeliveries included", async () => {
      const plain = await invoke(bridgeEvent("eb-1", DATA));
      expect(plain.functionError).toBeUndefined();
      remember(plain);
      expect(plain.body.migration.name).toBe(dvmNameForEvent({ source: BRIDGE_SOURCE, id: "eb-1" }));
      const redelivered = await invoke(bridgeEvent("eb-1", DATA));
      expect(redelivered).toMatchObject({ status: 200, body: { result: "exists", migration: { uid: plain.body.migration.uid } } });

      // A whole CloudEvent as the detail: its own source and id count, not EventBridge's.
      const inner = JSON.parse(HTTP.structured(requested("req-wrapped")).body as string) as object;
      const wrapped = await invoke(bridgeEvent("eb-2", inner));
      remember(wrapped);
      expect(wrapped.body.migration.name).toBe(dvmNameForEvent({ source: CI, id: "req-wrapped" }));
      const putAgain = await invoke(bridgeEvent("eb-3", inner));
      expect(putAgain).toMatchObject({ status: 200, body: { migration: { uid: wrapped.body.migration.uid } } });
    });

    // A replayed CutOver or Rollback after its DVM was deleted would migrate again and overwrite what was
    // written since: the record of the handled event outlives the DVM (second audit, item 7).
    it("never creates a second DVM for an event replayed after its DVM was deleted, and refuses an old event", async () => {
      const first = await post(HTTP.structured(requested("req-replayed")));
      expect(first.status, JSON.stringify(first.body)).toBe(201);
      const name = first.body.migration.name as string;
      await clusters!.source
        .makeApiClient(CustomObjectsApi)
        .deleteNamespacedCustomObject({ group: DVM_GROUP, version: DVM_VERSION, namespace: NAMESPACE, plural: DVM_PLURAL, name });
      await expect.poll(async () => (await dvmsInNamespace()).some((d) => d.name === name)).toBe(false);

      for (const replay of [
        post(HTTP.binary(requested("req-replayed"))),
        invoke(bridgeEvent("eb-replayed", JSON.parse(HTTP.structured(requested("req-replayed")).body as string))),
      ]) {
        const reply = await replay;
        expect(reply).toMatchObject({ status: 409, body: { error: "event already handled", field: "id" } });
        expect(reply.body.message).toContain(first.body.migration.uid);
      }
      expect((await dvmsInNamespace()).some((d) => d.name === name)).toBe(false);

      const dayAndMore = new Date(Date.now() - 25 * 60 * 60 * 1000).toISOString();
      const old = await post(HTTP.structured(requested("req-old", { time: dayAndMore })));
      expect(old).toMatchObject({ status: 400, body: { field: "time" } });
      expect((await dvmsInNamespace()).some((d) => d.name === dvmNameForEvent({ source: CI, id: "req-old" }))).toBe(false);
    });

    it("answers a DVM of the derived name made for another event with 409", async () => {
      const name = dvmNameForEvent({ source: CI, id: "req-taken" });
      await createDvm(clusters!.source, NAMESPACE, name, SPEC);
      created.add(name);
      const reply = await post(HTTP.structured(requested("req-taken")));
      expect(reply).toMatchObject({ status: 409, body: { field: "id", error: "name collision" } });
    });

    it("refuses malformed events with 4xx naming the field, and creates nothing for them", async () => {
      const before = (await dvmsInNamespace()).map((d) => d.name).sort();
      const structured = (body: unknown) => ({
        headers: { "content-type": "application/cloudevents+json" },
        body: typeof body === "string" ? body : JSON.stringify(body),
      });
      const envelope = { specversion: "1.0", id: "bad-1", source: CI, type: MIGRATION_REQUESTED };
      const pvc = SPEC.persistentVolumeClaims[0]!;
      const binaryWithout = (header: string) => {
        const message = HTTP.binary(requested("bad-2"));
        delete message.headers[header];
        return message;
      };
      const cases: [string, Promise<Reply>, number, string][] = [
        ["not JSON", post(structured("{oops")), 400, "body"],
        ["no specversion", post(structured({ ...envelope, specversion: undefined, data: DATA })), 400, "specversion"],
        ["specversion 0.3", post(structured({ ...envelope, specversion: "0.3", data: DATA })), 400, "specversion"],
        ["another type", post(HTTP.structured(requested("bad-3", { type: "com.example.other.v1" }))), 400, "type"],
        ["no id", post(structured({ ...envelope, id: undefined, data: DATA })), 400, "id"],
        ["no source (binary)", post(binaryWithout("ce-source")), 400, "source"],
        ["data not an object", post(HTTP.structured(requested("bad-4", { data: "migrate" }))), 400, "data"],
        ["no namespace", post(HTTP.binary(requested("bad-5", { data: { spec: SPEC } }))), 400, "data.namespace"],
        [
          "no PVCs",
          post(HTTP.structured(requested("bad-6", { data: { ...DATA, spec: { persistentVolumeClaims: [] } } }))),
          400,
          "data.spec.persistentVolumeClaims",
        ],
        [
          "a bad access mode",
          post(HTTP.structured(requested("bad-7", { data: { ...DATA, spec: { persistentVolumeClaims: [{ ...pvc, targetAccessModes: ["RWX"] }] } } }))),
          400,
          "data.spec.persistentVolumeClaims[0].targetAccessModes[0]",
        ],
        [
          "no target storage class",
          post(HTTP.binary(requested("bad-8", { data: { ...DATA, spec: { persistentVolumeClaims: [{ ...pvc, targetStorageClass: "" }] } } }))),
          400,
          "data.spec.persistentVolumeClaims[0].targetStorageClass",
        ],
        ["a bad name prefix", post(HTTP.structured(requested("bad-9", { data: { ...DATA, namePrefix: "Not_A_Label" } }))), 400, "data.namePrefix"],
        ["a source not allowed", post(HTTP.structured(requested("bad-10", { source: "https://elsewhere.example.org/x" }))), 403, "source"],
        [
          "over 256 KiB",
          post(HTTP.structured(requested("bad-11", { data: { ...DATA, spec: { ...SPEC, transferPodAnnotations: { pad: "x".repeat(300 * 1024) } } } }))),
          413,
          "body",
        ],
        [
          "a namespace that does not exist",
          post(HTTP.structured(requested("bad-12", { data: { ...DATA, namespace: `missing-${run}` } }))),
          422,
          "data.namespace",
        ],
        ["EventBridge: detail without spec", invoke(bridgeEvent("eb-bad-1", { namespace: NAMESPACE })), 400, "detail.spec"],
        ["EventBridge: another detail-type", invoke(bridgeEvent("eb-bad-2", DATA, { "detail-type": "com.example.other" })), 400, "detail-type"],
        ["EventBridge: a source not allowed", invoke(bridgeEvent("eb-bad-3", DATA, { source: "com.example.intruder" })), 403, "source"],
      ];
      for (const [name, reply, status, field] of cases) {
        const { status: got, body } = await reply;
        expect(got, `${name}: ${JSON.stringify(body)}`).toBe(status);
        expect(body.field, name).toBe(field);
      }
      expect((await dvmsInNamespace()).map((d) => d.name).sort()).toEqual(before);
    });

    it("leaves exactly one DVM per distinct event in the namespace", async () => {
      expect((await dvmsInNamespace()).map((d) => d.name).sort()).toEqual([...created].sort());
      // req-1, req-2, req-3, req-burst, eb-1, req-wrapped, and the one made by hand for the collision.
      expect(created.size).toBe(7);
    });
  },
);
