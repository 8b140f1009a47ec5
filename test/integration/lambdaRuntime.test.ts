/**
 * The deployment package as Lambda runs it: `osls package` builds the zip, the test unzips it and runs
 * its functions under AWS's Lambda Runtime Interface Emulator with AWS's Node runtime interface client
 * on Node 24 (infra/dev/local/lambdaRuntime.ts), each with the handler, timeout, memory and environment of its
 * function configuration in the packaged template. The relay drives a whole migration through its
 * Lambda transport against the Invoke API in front of them (infra/dev/local/lambdaInvokeApi.ts); a phase
 * function that runs past its timeout is stopped by the emulator; the trigger creates DVMs from an
 * EventBridge event and an HTTP API v2 event in the exact shapes AWS delivers them.
 *
 * Differences from the deployed stack, on purpose: the kubeconfig is a file (KUBECONFIG) instead of the
 * SSM parameter, events go nowhere (eventsSink none), and the credentials are DynamoDB Local's dummy
 * ones rather than a session of the function's role.
 */

import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { InvokeCommand, LambdaClient } from "@aws-sdk/client-lambda";
import { CoreV1Api } from "@kubernetes/client-node";
import { CloudEvent, HTTP } from "cloudevents";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { type LambdaInvokeApi, startLambdaInvokeApi } from "../../infra/dev/local/lambdaInvokeApi";
import { type LambdaFunctionSpec, lambdaRuntimeTools } from "../../infra/dev/local/lambdaRuntime";
import { findFreePort } from "../../infra/dev/local/ports";
import { DynamoPhaseLedger } from "../../src/aws/ledger";
import { ENV } from "../../src/config/environment";
import { findCondition } from "../../src/dvm/conditions";
import { ITINERARIES } from "../../src/dvm/itinerary";
import { POLICY_ENV, policyEnv } from "../../src/dvm/policyConfig";
import { dvmNameForEvent } from "../../src/events/names";
import { MIGRATION_REQUESTED } from "../../src/events/schema";
import { silentLogger } from "../../src/lib/log";
import { runRelay } from "../../src/relay/main";
import { testClusters } from "../support/clusters";
import { CuttableProxy, proxiedKubeConfig } from "../support/cuttableProxy";
import { dynamoEndpoint, type FreshTable, freshLedgerTable, testAwsAccess } from "../support/dynamo";
import { createDvm, createMigrationFixture, readDvm, TEST_MIGRATION_POLICY } from "../support/migration";
import { packageService } from "../support/osls";
import { until } from "../support/poll";
import { missing } from "../support/requirements";

const run = promisify(execFile);
const dynamo = dynamoEndpoint();
const available = inject("clusters");
const tools = (() => {
  try {
    return lambdaRuntimeTools();
  } catch {
    return undefined;
  }
})();
const BRIDGE_SOURCE = "com.example.ci";
const HTTP_SOURCE = "https://ci.example.com/rie";

// biome-ignore lint/suspicious/noExplicitAny: parsed JSON, walked freely by the test
type Json = Record<string, any>;

describe.skipIf(
  missing("the clusters and DynamoDB test services", dynamo && available, "run without DVM_TEST_SERVICES") ||
    missing("the Lambda runtime (Node 24, aws-lambda-rie, aws-lambda-ric)", tools, "run bash infra/dev/lambda/build.sh (npm test's set-up does)"),
)("the packaged functions in AWS's Lambda runtime emulator on Node 24", () => {
  const clusters = available ? testClusters() : (undefined as never);
  const runId = `rie${Date.now().toString(36)}`;
  const scratch = mkdtempSync(join(tmpdir(), "dvm-rie-"));
  const aws = testAwsAccess(dynamo!.endpoint, dynamo!.region);
  const credentials = aws.credentials ?? { accessKeyId: "dvmlocal", secretAccessKey: "dvmlocal" };
  let table: FreshTable;
  let codeDir: string;
  let template: Json;

  /** A function as the packaged template configures it, with this run's local differences. */
  function configured(logicalId: string, name: string, local: Record<string, string>, overrides: Partial<LambdaFunctionSpec> = {}): LambdaFunctionSpec {
    const props = template.Resources[logicalId].Properties as Json;
    const environment = { ...(props.Environment.Variables as Record<string, string>), ...local };
    // No SSM here: the kubeconfig is the KUBECONFIG file.
    delete environment[ENV.kubeconfigParameter];
    return {
      name,
      codeDir,
      handler: props.Handler,
      environment,
      timeoutSeconds: props.Timeout,
      memoryMb: props.MemorySize,
      region: dynamo!.region,
      credentials,
      ...overrides,
    };
  }

  beforeAll(async () => {
    table = await freshLedgerTable();
    const policy = policyEnv(TEST_MIGRATION_POLICY);
    const params = [
      `ledgerTableName=${table.tableName}`,
      "eventsSink=none",
      `triggerAllowedSources=${BRIDGE_SOURCE},${HTTP_SOURCE}`,
      // The trigger's own namespace rule: the namespaces its tests create events for (src/events/namespaces.ts).
      "triggerAllowedNamespaces=rie-trigger-*",
      ...Object.entries(POLICY_ENV).flatMap(([param, variable]) => (policy[variable] ? [`${param}=${policy[variable]}`] : [])),
    ];
    const packaged = await packageService({ stage: "rie", scratch, name: "package", params: params.map((p) => `--param=${p}`) });
    template = packaged.template;
    codeDir = join(scratch, "code");
    const zip = join(scratch, "function.zip");
    writeFileSync(zip, packaged.zip);
    await run("unzip", ["-q", zip, "-d", codeDir]);
  }, 300_000);

  afterAll(async () => {
    await table?.drop();
    rmSync(scratch, { recursive: true, force: true });
  });

  it("runs on Node 24, the Node of the declared runtime", async () => {
    const { stdout } = await run(tools!.node, ["--version"]);
    expect(stdout.trim()).toBe(tools!.nodeVersion);
    expect(tools!.nodeVersion).toMatch(/^v24\./);
  });

  describe("a whole migration, every phase invocation in the emulator, through the relay's Lambda transport", () => {
    let api: LambdaInvokeApi;
    let stopRelay: (() => Promise<void>) | undefined;
    const phaseFunction = `dvm-serverless-rie-phase-${runId}`;

    beforeAll(async () => {
      api = await startLambdaInvokeApi({
        functions: [
          configured("PhaseLambdaFunction", phaseFunction, {
            [ENV.kubeconfig]: clusters.info.source.kubeconfigPath,
            [ENV.awsDynamoEndpoint]: dynamo!.endpoint,
          }),
        ],
        logDir: scratch,
        log: silentLogger,
      });
    });

    afterAll(async () => {
      await stopRelay?.();
      await api?.stop();
    });

    it("migrates a DVM to Completed, each phase completed once in the ledger", async () => {
      const fixture = await createMigrationFixture(clusters, runId);
      stopRelay = await runRelay(
        {
          kubeconfigPath: clusters.info.source.kubeconfigPath,
          inCluster: false,
          logLevel: "warn",
          target: { kind: "shared", name: phaseFunction },
          invocationType: "RequestResponse",
          healthPort: await findFreePort(),
          resyncMs: 30_000,
          concurrency: 16,
          metricsMaxDvmSeries: 1_000,
          podClusters: fixture.sameCluster ? [] : [{ name: "destination", kubeconfigPath: clusters.info.destination.kubeconfigPath }],
          leaderElection: { enabled: false },
        },
        silentLogger,
        { lambda: { endpoint: api.endpoint, region: dynamo!.region, credentials } },
      );
      const created = await createDvm(clusters.source, fixture.dvmNamespace, "rie-move", fixture.spec);
      const done = await until(
        "the DVM to complete",
        () => readDvm(clusters.source, fixture.dvmNamespace, "rie-move"),
        (dvm) => dvm.status.phase === "Completed",
        { timeoutMs: 240_000 },
      );
      expect(findCondition(done.status.conditions, "Succeeded")?.status).toBe("True");
      expect(done.status.rsyncOperations?.every((op) => op.succeeded)).toBe(true);
      const history = await new DynamoPhaseLedger({ client: table.client, tableName: table.tableName }).history(created.metadata.uid);
      expect(history.map((e) => e.key.phase)).toEqual(ITINERARIES.VolumeMigration.filter((p) => p !== "Completed"));
      expect(history.every((e) => e.state === "COMPLETED" && e.takeovers === 0)).toBe(true);

      // Every invocation went through the emulator; each sandbox started cold once.
      const reports = api.reports(phaseFunction);
      expect(reports.length).toBeGreaterThanOrEqual(history.length);
      const coldStarts = reports.filter((r) => r.initDurationMs !== undefined);
      expect(coldStarts.length).toBe(api.logFiles(phaseFunction).length);
      console.info(
        `[lambda runtime] ${reports.length} phase invocations in ${coldStarts.length} sandbox(es); init durations (ms): ${coldStarts.map((r) => r.initDurationMs).join(", ")}`,
      );
      const log = readFileSync(api.logFiles(phaseFunction)[0]!, "utf8");
      expect(log).toContain(`exec '${tools!.node}'`);
    });
  });

  describe("a phase function past its timeout", () => {
    let api: LambdaInvokeApi;
    let proxy: CuttableProxy;
    const slow = `dvm-serverless-rie-slow-${runId}`;
    const fast = `dvm-serverless-rie-fast-${runId}`;

    beforeAll(async () => {
      // Every answer of the API server held back far longer than the function may run.
      proxy = await CuttableProxy.start(new URL(clusters.source.getCurrentCluster()!.server), { delay: { ms: 60_000, fraction: 1, random: Math.random } });
      const slowKubeconfig = join(scratch, "slow-kubeconfig");
      writeFileSync(slowKubeconfig, proxiedKubeConfig(clusters.source, proxy.url).exportConfig());
      const local = (kubeconfig: string) => ({ [ENV.kubeconfig]: kubeconfig, [ENV.awsDynamoEndpoint]: dynamo!.endpoint });
      api = await startLambdaInvokeApi({
        functions: [
          configured("PhaseLambdaFunction", slow, local(slowKubeconfig), { timeoutSeconds: 15, concurrency: 1 }),
          configured("PhaseLambdaFunction", fast, local(clusters.info.source.kubeconfigPath), { concurrency: 1 }),
        ],
        logDir: scratch,
        log: silentLogger,
      });
    });

    afterAll(async () => {
      await api?.stop();
      await proxy?.close();
    });

    it("is stopped by the emulator as Lambda stops it; its lease ends with it, and the takeover completes the phase once", async () => {
      const namespace = `rie-timeout-${runId}`;
      await clusters.source.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: namespace } } });
      const dvm = await createDvm(clusters.source, namespace, "slow", {
        persistentVolumeClaims: [{ name: "db", namespace, targetStorageClass: "fast", targetAccessModes: ["ReadWriteOnce"] }],
      });
      const lambda = new LambdaClient({ endpoint: api.endpoint, region: dynamo!.region, credentials, maxAttempts: 1 });
      // The relay's request for a DVM it has not seen a phase of yet: a guess of the first phase, claimed before the read.
      const request = { uid: dvm.metadata.uid, namespace, name: "slow", generation: dvm.metadata.generation, phase: "Started" };
      const invoke = async (functionName: string) => {
        const out = await lambda.send(new InvokeCommand({ FunctionName: functionName, Payload: new TextEncoder().encode(JSON.stringify(request)) }));
        return { functionError: out.FunctionError, body: JSON.parse(new TextDecoder().decode(out.Payload)) as Json };
      };

      // Warm first: the emulator counts a cold start's init against the first invocation's timeout.
      const warmUp = await lambda.send(new InvokeCommand({ FunctionName: slow, Payload: new TextEncoder().encode("{}") }));
      expect(warmUp.FunctionError).toBeUndefined();
      const timedOut = await invoke(slow);
      expect(timedOut.functionError).toBe("Unhandled");
      expect(timedOut.body).toMatchObject({ errorType: "Sandbox.Timedout" });
      expect(timedOut.body.errorMessage).toMatch(/Task timed out after 15\.00 seconds$/);
      const slowLog = readFileSync(api.logFiles(slow)[0]!, "utf8");
      expect(slowLog).toContain("Reset initiated: Timeout");
      expect(slowLog).toMatch(/Sending SIGKILL to runtime/);

      // The ledger: the killed invocation's claim (attempt 1) was never completed, and its lease ended with the
      // function's timeout: under Lambda a lease never outlives its invocation (second audit, item 11).
      const ledger = new DynamoPhaseLedger({ client: table.client, tableName: table.tableName });
      const [entry] = await ledger.history(dvm.metadata.uid);
      expect(entry).toMatchObject({ key: { phase: "Started" }, state: "RUNNING", attempts: 1 });
      expect(entry!.leaseExpiresAt).toBeLessThanOrEqual(Date.now());
      // The status: untouched.
      expect((await readDvm(clusters.source, namespace, "slow")).status.phase).toBe(dvm.status.phase);
      // The next invocation, on a healthy API server, takes the phase over at once, fenced by a higher attempt
      // (the killed one can no longer complete), and runs it to completion once.
      const second = await invoke(fast);
      expect(second.functionError, JSON.stringify(second.body)).toBeUndefined();
      expect(second.body).toMatchObject({ kind: "advanced", phase: "Started" });
      const [after] = await ledger.history(dvm.metadata.uid);
      // One takeover of the killed claim (its guessed claim may be given back unrun and taken again: more attempts).
      expect(after).toMatchObject({ key: { phase: "Started" }, state: "COMPLETED", takeovers: 1 });
      lambda.destroy();
      await clusters.source
        .makeApiClient(CoreV1Api)
        .deleteNamespace({ name: namespace })
        .catch(() => undefined);
    }, 150_000);
  });

  describe("the trigger function, with events as AWS delivers them", () => {
    let api: LambdaInvokeApi;
    let lambda: LambdaClient;
    const trigger = `dvm-serverless-rie-trigger-${runId}`;
    const namespace = `rie-trigger-${runId}`;
    const data = {
      namespace,
      spec: { persistentVolumeClaims: [{ name: "db", namespace: "shop", targetStorageClass: "fast", targetAccessModes: ["ReadWriteOnce"] }] },
    };

    beforeAll(async () => {
      await clusters.source.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: namespace } } });
      api = await startLambdaInvokeApi({
        functions: [
          configured(
            "TriggerLambdaFunction",
            trigger,
            // Its handled-event records are in the ledger table (DynamoDB Local here).
            { [ENV.kubeconfig]: clusters.info.source.kubeconfigPath, [ENV.awsDynamoEndpoint]: dynamo!.endpoint },
            { concurrency: 1 },
          ),
        ],
        logDir: scratch,
        log: silentLogger,
      });
      lambda = new LambdaClient({ endpoint: api.endpoint, region: dynamo!.region, credentials, maxAttempts: 1 });
    });

    afterAll(async () => {
      lambda?.destroy();
      await api?.stop();
      await clusters.source
        .makeApiClient(CoreV1Api)
        .deleteNamespace({ name: namespace })
        .catch(() => undefined);
    });

    async function invoke(event: unknown): Promise<{ functionError?: string | undefined; body: Json }> {
      const out = await lambda.send(new InvokeCommand({ FunctionName: trigger, Payload: new TextEncoder().encode(JSON.stringify(event)) }));
      return { functionError: out.FunctionError, body: JSON.parse(new TextDecoder().decode(out.Payload)) as Json };
    }

    it("creates a DVM from an EventBridge event in the envelope EventBridge delivers", async () => {
      const id = randomUUID();
      // What EventBridge hands a Lambda target: https://docs.aws.amazon.com/eventbridge/latest/ref/overiew-event-structure.html
      const event = {
        version: "0",
        id,
        "detail-type": MIGRATION_REQUESTED,
        source: BRIDGE_SOURCE,
        account: "123456789012",
        time: new Date().toISOString().replace(/\.\d{3}Z$/, "Z"),
        region: dynamo!.region,
        resources: [],
        detail: data,
      };
      const reply = await invoke(event);
      expect(reply.functionError, JSON.stringify(reply.body)).toBeUndefined();
      expect(reply.body).toMatchObject({ status: 201, body: { migration: { name: dvmNameForEvent({ source: BRIDGE_SOURCE, id }) } } });
      const dvm = await readDvm(clusters.source, namespace, reply.body.body.migration.name);
      expect(dvm.metadata.uid).toBe(reply.body.body.migration.uid);
    });

    it("creates a DVM from an HTTP API (payload format 2.0) event carrying a structured CloudEvent", async () => {
      const id = randomUUID();
      const message = HTTP.structured(new CloudEvent<unknown>({ type: MIGRATION_REQUESTED, source: HTTP_SOURCE, id, data }));
      const reply = await invoke(httpApiEvent(message.headers as Record<string, string>, message.body as string, dynamo!.region));
      expect(reply.functionError, JSON.stringify(reply.body)).toBeUndefined();
      expect(reply.body.statusCode).toBe(201);
      const body = JSON.parse(reply.body.body as string) as Json;
      expect(body.migration.name).toBe(dvmNameForEvent({ source: HTTP_SOURCE, id }));
      expect((await readDvm(clusters.source, namespace, body.migration.name)).metadata.uid).toBe(body.migration.uid);
    });
  });
});

/** What API Gateway's HTTP API hands the function for POST /migrations (payload format version 2.0, IAM authorizer). */
function httpApiEvent(headers: Record<string, string>, body: string, region: string): Json {
  const now = new Date();
  return {
    version: "2.0",
    routeKey: "POST /migrations",
    rawPath: "/migrations",
    rawQueryString: "",
    headers: {
      ...Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v])),
      "content-length": String(Buffer.byteLength(body)),
      host: `abcdef1234.execute-api.${region}.amazonaws.com`,
      "user-agent": "curl/8.5.0",
      "x-amzn-trace-id": "Root=1-67891233-abcdef012345678912345678",
      "x-forwarded-for": "198.51.100.7",
      "x-forwarded-port": "443",
      "x-forwarded-proto": "https",
    },
    requestContext: {
      accountId: "123456789012",
      apiId: "abcdef1234",
      authorizer: {
        iam: {
          accessKey: "AKIAIOSFODNN7EXAMPLE",
          accountId: "123456789012",
          callerId: "AIDACKCEVSQ6C2EXAMPLE",
          principalOrgId: null,
          userArn: "arn:aws:iam::123456789012:user/ci",
          userId: "AIDACKCEVSQ6C2EXAMPLE",
        },
      },
      domainName: `abcdef1234.execute-api.${region}.amazonaws.com`,
      domainPrefix: "abcdef1234",
      http: { method: "POST", path: "/migrations", protocol: "HTTP/1.1", sourceIp: "198.51.100.7", userAgent: "curl/8.5.0" },
      requestId: "JKJaXmPLvHcESHA=",
      routeKey: "POST /migrations",
      stage: "$default",
      time: now.toUTCString(),
      timeEpoch: now.getTime(),
    },
    body,
    isBase64Encoded: false,
  };
}
