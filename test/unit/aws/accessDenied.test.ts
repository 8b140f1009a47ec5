/**
 * What a user reads when a function's role lacks a permission. AWS answers a refused call with
 * AccessDeniedException naming the action (moto, in the deployed tests, cannot: its refusals of
 * JSON-protocol services are XML the SDK does not parse). The real SDK clients talk here to a local HTTP
 * server that answers as AWS does; the project's own code (the ledger, the kubeconfig source, the event
 * sink) must pass the named permission on in one line, and the phase function must neither retry it as
 * transient nor drop it (thrown: Lambda's retries, then the dead-letter queue with the message).
 */

import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { EventBridgeClient } from "@aws-sdk/client-eventbridge";
import { SSMClient } from "@aws-sdk/client-ssm";
import { CloudEvent } from "cloudevents";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { classifyError } from "../../../src/aws/errors";
import { EventBridgeSink } from "../../../src/aws/eventBridgeSink";
import { createKubeconfigSource } from "../../../src/aws/kubeconfigSource";
import { DynamoPhaseLedger } from "../../../src/aws/ledger";
import { errorMessage } from "../../../src/lib/errorMessage";

const ROLE = "arn:aws:sts::123456789012:assumed-role/dvm-serverless-dev-us-east-1-lambdaRole/dvm-serverless-dev-phase";
/** The JSON-protocol services' target prefix -> the IAM action namespace AWS's message names. */
const SERVICE_OF_TARGET: Record<string, string> = { DynamoDB_20120810: "dynamodb", AmazonSSM: "ssm", AWSEvents: "events" };

let server: Server;
let endpoint: string;

beforeAll(async () => {
  // AWS's refusal, per the JSON protocol: HTTP 400, the error type, and the message naming action and resource.
  server = createServer((req, res) => {
    const [prefix, operation] = String(req.headers["x-amz-target"]).split(".");
    const action = `${SERVICE_OF_TARGET[prefix!]}:${operation}`;
    req.resume();
    res.writeHead(400, { "content-type": "application/x-amz-json-1.1", "x-amzn-errortype": "AccessDeniedException" });
    res.end(
      JSON.stringify({
        __type: "com.amazon.coral.service#AccessDeniedException",
        message: `User: ${ROLE} is not authorized to perform: ${action} on resource: arn:aws:test because no identity-based policy allows the ${action} action`,
      }),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

const config = () => ({ endpoint, region: "us-east-1", credentials: { accessKeyId: "AKIATEST", secretAccessKey: "test" }, maxAttempts: 1 });

async function refusal(call: () => Promise<unknown>): Promise<unknown> {
  return call().then(
    () => {
      throw new Error("the call was not refused");
    },
    (error: unknown) => error,
  );
}

function expectNamedPermission(error: unknown, permission: string): void {
  const line = errorMessage(error);
  expect(line).toContain(`not authorized to perform: ${permission}`);
  expect(line).toContain("AccessDeniedException");
  // One line: no stack, no response body dump.
  expect(line).not.toMatch(/\n|\bat .+:\d+:\d+|\$metadata/);
  expect(classifyError(error)).toBe("unexpected");
}

describe("a missing permission, as the functions report it", () => {
  it("names dynamodb:UpdateItem when the ledger may not claim", async () => {
    const ledger = new DynamoPhaseLedger({ client: new DynamoDBClient(config()), tableName: "dvm-serverless-dev-ledger" });
    const error = await refusal(() => ledger.claim({ uid: "u-1", phase: "Started", generation: 1 }, { leaseMs: 60_000 }));
    expectNamedPermission(error, "dynamodb:UpdateItem");
  });

  it("names dynamodb:Query when the ledger may not read a history", async () => {
    const ledger = new DynamoPhaseLedger({ client: new DynamoDBClient(config()), tableName: "dvm-serverless-dev-ledger" });
    expectNamedPermission(await refusal(() => ledger.history("u-1")), "dynamodb:Query");
  });

  it("names ssm:GetParameter when the kubeconfig may not be read", async () => {
    const source = createKubeconfigSource({ parameterName: "/dvm-serverless/dev/host-kubeconfig", ssm: new SSMClient(config()) });
    expectNamedPermission(await refusal(source), "ssm:GetParameter");
  });

  it("names events:PutEvents when an event may not be sent", async () => {
    const sink = new EventBridgeSink({ busName: "default", client: new EventBridgeClient(config()) });
    const event = new CloudEvent({ type: "io.dvm-serverless.phase.completed.v1", source: "dvm-serverless/dev", data: {} });
    const error = await refusal(() => sink.send(event, AbortSignal.timeout(10_000)));
    expect(errorMessage(error)).toContain("not authorized to perform: events:PutEvents");
    expect(errorMessage(error)).not.toMatch(/\n/);
  });
});
