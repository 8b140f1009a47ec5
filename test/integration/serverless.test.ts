/**
 * The phase function as Lambda runs it, through serverless-offline: the serverless.yml, the esbuild
 * bundle, middy and Powertools, invoked with @aws-sdk/client-lambda against offline's Invoke API.
 * The function talks to the integration run's DynamoDB Local (a fresh ledger table) and to the
 * "source" control plane as its host cluster.
 */

import { randomUUID } from "node:crypto";
import { type InvocationType, InvokeCommand, LambdaClient } from "@aws-sdk/client-lambda";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { type ServerlessOffline, startServerlessOffline } from "../../infra/dev/local/serverlessOffline";
import { dynamoEndpoint, type FreshTable, freshLedgerTable } from "../support/dynamo";
import { missing } from "../support/requirements";

const dynamo = dynamoEndpoint();
const clusters = inject("clusters");

describe.skipIf(missing("the clusters and DynamoDB test services", dynamo && clusters, "run without DVM_TEST_SERVICES"))(
  "phase function under serverless-offline",
  () => {
    let offline: ServerlessOffline | undefined;
    let table: FreshTable | undefined;
    let lambda: LambdaClient;

    beforeAll(async () => {
      table = await freshLedgerTable();
      const local = !process.env.AWS_ACCESS_KEY_ID;
      offline = await startServerlessOffline({
        env: {
          LEDGER_TABLE_NAME: table.tableName,
          KUBECONFIG: clusters!.source.kubeconfigPath,
          AWS_ENDPOINT_URL_DYNAMODB: dynamo!.endpoint,
          AWS_REGION: dynamo!.region,
          // DynamoDB Local accepts letters and digits only as access key ids (see test/support/dynamo.ts).
          ...(local ? { AWS_ACCESS_KEY_ID: "dvmlocal", AWS_SECRET_ACCESS_KEY: "dvmlocal" } : {}),
          LOG_LEVEL: "INFO",
        },
      });
      lambda = new LambdaClient({
        endpoint: offline.lambdaEndpoint,
        region: dynamo!.region,
        credentials: { accessKeyId: "offline", secretAccessKey: "offline" },
        maxAttempts: 1,
      });
    }, 180_000);

    afterAll(async () => {
      lambda?.destroy();
      await offline?.stop();
      await table?.drop();
    });

    async function invoke(payload: unknown, type: InvocationType = "RequestResponse") {
      const out = await lambda.send(
        new InvokeCommand({
          FunctionName: offline!.functionName(),
          InvocationType: type,
          Payload: new TextEncoder().encode(JSON.stringify(payload)),
        }),
      );
      const text = out.Payload && out.Payload.length > 0 ? new TextDecoder().decode(out.Payload) : "";
      return { status: out.StatusCode, functionError: out.FunctionError, body: text ? (JSON.parse(text) as Record<string, unknown>) : undefined };
    }

    it("answers a request for a DVM that does not exist with gone", async () => {
      const res = await invoke({ uid: randomUUID(), namespace: "default", name: `missing-${randomUUID().slice(0, 8)}` });
      expect(res.functionError, JSON.stringify(res.body)).toBeUndefined();
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ kind: "gone" });
    });

    it("returns a terminal result naming the field of an invalid request, without failing the invocation", async () => {
      const res = await invoke({ uid: "", namespace: "default", name: "x" });
      expect(res.functionError).toBeUndefined();
      expect(res.body).toMatchObject({ kind: "invalid", field: "uid" });

      const wrongType = await invoke({ uid: "u", namespace: "default", name: "x", generation: "2" });
      expect(wrongType.body).toMatchObject({ kind: "invalid", field: "generation" });
    });

    it("accepts an asynchronous (Event) invocation with 202", async () => {
      const res = await invoke({ uid: randomUUID(), namespace: "default", name: "async" }, "Event");
      expect(res.status).toBe(202);
      expect(res.functionError).toBeUndefined();
    });
  },
);
