/**
 * A whole migration as deployed: `osls deploy` of a stage of its own to moto (test/support/deployedStack.ts),
 * then the phase function's code read back from moto (the zip its Code.Location names, checked against
 * CodeSha256) and run under AWS's Lambda Runtime Interface Emulator with aws-lambda-ric on Node 24
 * (infra/dev/local/lambdaRuntime.ts), with the deployed configuration's handler, environment, timeout and
 * memory, and a session of its deployed role (STS AssumeRole against moto). The relay drives the DVM
 * through its Lambda transport against Lambda's Invoke API in front of those sandboxes
 * (infra/dev/local/lambdaInvokeApi.ts), on the node-mode clusters (real kubelet, containerd, runc: real rsync
 * pods move the bytes). The kubeconfig the function reads is the SSM SecureString in moto, the ledger is
 * the deployed table in moto's DynamoDB, the CloudEvents go to moto's EventBridge. Then the same function
 * past its deployed timeout (its kubeconfig swapped for one through a proxy that holds every answer back):
 * the emulator kills it as Lambda does, and ledger and status stay consistent. Then `osls remove`.
 *
 * What differs from Lambda, and why:
 *   - the sandboxes get AWS_ENDPOINT_URL (moto) beside the deployed environment: Lambda's SDK finds AWS by
 *     itself; the deployed variables are unchanged;
 *   - moto's IAM enforcement stays off here: it matches DynamoDB, SSM and EventBridge calls against
 *     resource "*", so it would refuse every call the ARN-scoped statements allow (stack.test.ts's header;
 *     its IAM suite shows enforcement where moto has it, SQS);
 *   - the pool holds at most RELAY_CONCURRENCY's default (16) sandboxes, what the relay may ask at once,
 *     so it never throttles below the relay's own bound (an account's Lambda concurrency is 1,000); a
 *     sandbox starts, cold, only when an invocation finds none free, as in Lambda.
 */

import { execFile } from "node:child_process";
import { createHash, randomUUID } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { ListTablesCommand } from "@aws-sdk/client-dynamodb";
import { ListRulesCommand } from "@aws-sdk/client-eventbridge";
import { DeletePolicyCommand, GetRoleCommand, ListPoliciesCommand, ListRolesCommand } from "@aws-sdk/client-iam";
import { InvokeCommand, LambdaClient, ListFunctionsCommand } from "@aws-sdk/client-lambda";
import { DeleteParameterCommand, DescribeParametersCommand, PutParameterCommand } from "@aws-sdk/client-ssm";
import { AssumeRoleCommand } from "@aws-sdk/client-sts";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { type LambdaInvokeApi, startLambdaInvokeApi } from "../../infra/dev/local/lambdaInvokeApi";
import { type LambdaFunctionSpec, lambdaRuntimeTools } from "../../infra/dev/local/lambdaRuntime";
import { findFreePort } from "../../infra/dev/local/ports";
import { DynamoPhaseLedger } from "../../src/aws/ledger";
import { ENV } from "../../src/config/environment";
import { findCondition } from "../../src/dvm/conditions";
import { ITINERARIES } from "../../src/dvm/itinerary";
import type { DirectVolumeMigration } from "../../src/dvm/types";
import { silentLogger } from "../../src/lib/log";
import { runRelay } from "../../src/relay/main";
import { type TestClusters, testClusters } from "../support/clusters";
import { CuttableProxy, proxiedKubeConfig } from "../support/cuttableProxy";
import { manifest, manifestDiff, writeDataset } from "../support/dataset";
import { type AwsClients, awsClients, type DeployedStack, deployStack, removeStack, SERVICE } from "../support/deployedStack";
import { createDvm, readDvm, transferLeftovers } from "../support/migration";
import { MOTO_INSTALL } from "../support/moto";
import { createBoundPvc, ensureNamespace, NODE_ADMIN_NAMESPACE, prepareDestination, testNodes, volumeFolder } from "../support/nodes";
import { missing } from "../support/requirements";

const run = promisify(execFile);
const moto = inject("moto");
const nodeClusters = inject("clusters");
const tools = (() => {
  try {
    return lambdaRuntimeTools();
  } catch {
    return undefined;
  }
})();
const MiB = 1024 * 1024;
/** RELAY_CONCURRENCY's default (src/relay/config.ts): the pool's bound, so the emulator never throttles below it. */
const RELAY_CONCURRENCY = 16;

describe.skipIf(
  missing("moto_server", moto, MOTO_INSTALL) ||
    missing("the node-mode clusters", nodeClusters, "run as root where node mode runs (README.md, Node mode), DVM_TEST_SERVICES unset or naming nodes") ||
    missing("the Lambda runtime (Node 24, aws-lambda-rie, aws-lambda-ric)", tools, "run bash infra/dev/lambda/build.sh (npm test's set-up does)"),
)("a whole migration on real pods, every phase in the deployed artifact under AWS's Lambda runtime emulator", () => {
  const runId = randomUUID().slice(0, 4);
  const stage = `mig${runId}`;
  const scratch = mkdtempSync(join(tmpdir(), "dvm-deployed-migration-"));
  let clusters: TestClusters;
  let aws: AwsClients;
  let stack: DeployedStack;
  let api: LambdaInvokeApi;
  let stopRelay: (() => Promise<void>) | undefined;
  let phaseFunction: string;
  let codeSha256: string;
  /** The deployed phase function as the sandboxes run it. */
  let spec: LambdaFunctionSpec;
  let hostKubeconfig: string;

  /** A session of the deployed role, as Lambda hands one to the function (or IRSA to the relay). */
  async function roleSession(roleArn: string, session: string) {
    const { Credentials } = await aws.sts.send(new AssumeRoleCommand({ RoleArn: roleArn, RoleSessionName: session }));
    return { accessKeyId: Credentials!.AccessKeyId!, secretAccessKey: Credentials!.SecretAccessKey!, sessionToken: Credentials!.SessionToken! };
  }

  beforeAll(async () => {
    clusters = testClusters();
    const nodes = testNodes();
    aws = awsClients(moto!.endpoint, moto!.region);
    hostKubeconfig = readFileSync(clusters.info.source.kubeconfigPath, "utf8");
    stack = await deployStack({
      endpoint: moto!.endpoint,
      region: moto!.region,
      stage,
      // The operator's default policy, with the transfer image node mode built.
      params: [`defaultTransferImage=${nodes.transferImage}`],
      scratch,
      // The host cluster's kubeconfig, as the docs' step 3 stores it: what the deployed function reads.
      kubeconfigs: { host: hostKubeconfig },
    });
    console.info(`[deployed migration] osls deploy --stage ${stage}: ${(stack.deployMs / 1000).toFixed(1)} s`);
    expect(stack.phaseFunctionNames).toHaveLength(1);
    phaseFunction = stack.phaseFunctionNames[0]!;
    const config = await stack.functionConfiguration(phaseFunction);
    const zip = await stack.codeZip(phaseFunction);
    codeSha256 = createHash("sha256").update(zip).digest("base64");
    expect(codeSha256).toBe(config.CodeSha256);
    const codeDir = join(scratch, "code");
    writeFileSync(join(scratch, "deployed.zip"), zip);
    await run("unzip", ["-q", join(scratch, "deployed.zip"), "-d", codeDir]);
    spec = {
      name: phaseFunction,
      codeDir,
      handler: config.Handler!,
      environment: { ...config.Environment!.Variables!, AWS_ENDPOINT_URL: moto!.endpoint },
      timeoutSeconds: config.Timeout!,
      memoryMb: config.MemorySize!,
      region: moto!.region,
      credentials: await roleSession(config.Role!, "phase"),
      concurrency: RELAY_CONCURRENCY,
    };
    api = await startLambdaInvokeApi({ functions: [spec], logDir: scratch, log: silentLogger });
  }, 600_000);

  afterAll(async () => {
    await stopRelay?.();
    await api?.stop();
    aws?.destroy();
    rmSync(scratch, { recursive: true, force: true });
  });

  it("moves 2 PVCs to the destination cluster, byte for byte; each phase completed once in the deployed ledger table", async () => {
    const nodes = testNodes();
    const toDestination = await prepareDestination(clusters, `mig-${runId}`);
    // Two small volumes in one namespace: enough for every phase, small enough for npm test's budget.
    const namespace = `deployed-${runId}`;
    await ensureNamespace(clusters.source, namespace);
    const claims = [];
    const folders = new Map<string, string>();
    for (const [i, name] of ["db", "media"].entries()) {
      await createBoundPvc(clusters.source, namespace, name, { storageClass: nodes.storageClass });
      const folder = await volumeFolder(clusters.source, nodes.source, namespace, name);
      writeDataset(folder, { bytes: 3 * MiB, files: 120, seed: i + 1 });
      folders.set(name, folder);
      claims.push({ name, namespace, targetStorageClass: nodes.storageClass, targetAccessModes: ["ReadWriteOnce"] });
    }

    const { Role } = await aws.iam.send(new GetRoleCommand({ RoleName: stack.physicalIds.get("RelayRole")! }));
    stopRelay = await runRelay(
      {
        kubeconfigPath: clusters.info.source.kubeconfigPath,
        inCluster: false,
        logLevel: "warn",
        target: { kind: "shared", name: phaseFunction },
        invocationType: "RequestResponse",
        healthPort: await findFreePort(),
        resyncMs: 30_000,
        concurrency: RELAY_CONCURRENCY,
        podClusters: [{ name: "destination", kubeconfigPath: clusters.info.destination.kubeconfigPath }],
        leaderElection: { enabled: false },
        metricsMaxDvmSeries: 1_000,
      },
      silentLogger,
      { lambda: { endpoint: api.endpoint, region: moto!.region, credentials: await roleSession(Role!.Arn!, "relay") } },
    );
    const name = `deployed-${runId}`;
    const started = Date.now();
    const created = await createDvm(clusters.source, NODE_ADMIN_NAMESPACE, name, {
      ...toDestination,
      persistentVolumeClaims: claims,
      runAsRoot: true,
    });
    const done = await until(
      "the DVM to complete",
      () => readDvm(clusters.source, NODE_ADMIN_NAMESPACE, name),
      (dvm) => dvm.status?.phase === "Completed" || findCondition(dvm.status?.conditions, "Failed")?.status === "True",
    );
    const wallMs = Date.now() - started;
    await stopRelay();
    stopRelay = undefined;
    expect(done.status?.phase, JSON.stringify(done.status?.conditions)).toBe("Completed");
    expect(findCondition(done.status?.conditions, "Succeeded")?.status).toBe("True");
    expect(done.status?.rsyncOperations?.every((op) => op.succeeded)).toBe(true);

    // The bytes: each destination volume's manifest equals its source's.
    for (const claim of claims) {
      const source = await manifest(folders.get(claim.name)!, { owners: true });
      const copy = await manifest(await volumeFolder(clusters.destination, nodes.destination, namespace, claim.name), {
        owners: true,
        exclude: (p) => p === "lost+found",
      });
      expect(Object.keys(source).length).toBeGreaterThan(10);
      expect(manifestDiff(source, copy)).toEqual([]);
    }
    expect(await transferLeftovers(clusters, created.metadata.uid, [namespace])).toEqual([]);

    // The ledger: the deployed table in moto's DynamoDB, every phase of the itinerary completed once.
    const ledgerTableName = `${SERVICE}-${stage}-ledger`;
    const history = await new DynamoPhaseLedger({ client: aws.dynamodb, tableName: ledgerTableName }).history(created.metadata.uid);
    expect(history.map((e) => e.key.phase)).toEqual(ITINERARIES.VolumeMigration.filter((p) => p !== "Completed"));
    expect(history.every((e) => e.state === "COMPLETED" && e.takeovers === 0)).toBe(true);

    // Every phase ran in the emulator: each completion the ledger holds was logged by a sandbox of the
    // deployed code, in an invocation the emulator reported.
    const reports = api.reports(phaseFunction);
    const requestIds = new Set(reports.map((r) => r.requestId));
    const completions = completionsLogged(api.logFiles(phaseFunction), created.metadata.uid);
    expect([...new Set(completions.map((c) => c.phase))].sort()).toEqual(history.map((e) => e.key.phase).sort());
    for (const completion of completions) expect(requestIds.has(completion.requestId), completion.requestId).toBe(true);
    const coldStarts = reports.filter((r) => r.initDurationMs !== undefined);
    expect(coldStarts.length).toBe(api.logFiles(phaseFunction).length);
    const firstLog = readFileSync(api.logFiles(phaseFunction)[0]!, "utf8");
    expect(firstLog).toContain(`exec '${tools!.node}'`);
    expect(tools!.nodeVersion).toMatch(/^v24\./);
    console.info(
      `[deployed migration] ${stage}: Completed in ${(wallMs / 1000).toFixed(1)} s; ${reports.length} phase invocations in ` +
        `${coldStarts.length} sandbox(es) of ${RELAY_CONCURRENCY}; init durations (ms): ${coldStarts.map((r) => r.initDurationMs).join(", ")}; ` +
        `code ${codeSha256}; Node ${tools!.nodeVersion}`,
    );
  }, 900_000);

  it("stops the deployed function at its deployed timeout; the ledger and status stay consistent, and the next invocation completes the phase once", async () => {
    // Fresh sandboxes of the same deployed function, whose SSM kubeconfig now names an API server that
    // holds every answer back far longer than the function may run.
    await api.stop();
    const proxy = await CuttableProxy.start(new URL(clusters.source.getCurrentCluster()!.server), {
      delay: { ms: (spec.timeoutSeconds + 60) * 1000, fraction: 1, random: Math.random },
    });
    const parameter = spec.environment[ENV.kubeconfigParameter]!;
    const putKubeconfig = (value: string) => aws.ssm.send(new PutParameterCommand({ Name: parameter, Type: "SecureString", Value: value, Overwrite: true }));
    const lambda = () => new LambdaClient({ endpoint: api.endpoint, region: moto!.region, credentials: spec.credentials, maxAttempts: 1 });
    let client: LambdaClient | undefined;
    try {
      await putKubeconfig(proxiedKubeConfig(clusters.source, proxy.url).exportConfig());
      const logDir = join(scratch, "timeout");
      mkdirSync(logDir);
      api = await startLambdaInvokeApi({ functions: [{ ...spec, concurrency: 1 }], logDir, log: silentLogger });
      const namespace = `deployed-timeout-${runId}`;
      await ensureNamespace(clusters.source, namespace);
      const dvm = await createDvm(clusters.source, namespace, "slow", {
        persistentVolumeClaims: [{ name: "db", namespace, targetStorageClass: "standard", targetAccessModes: ["ReadWriteOnce"] }],
      });
      // What the relay sends for a DVM it has seen no phase of: the first phase, claimed before the read.
      const request = { uid: dvm.metadata.uid, namespace, name: "slow", generation: dvm.metadata.generation, phase: "Started" };
      client = lambda();
      const invoke = async () => {
        const out = await client!.send(new InvokeCommand({ FunctionName: phaseFunction, Payload: new TextEncoder().encode(JSON.stringify(request)) }));
        return { functionError: out.FunctionError, body: JSON.parse(new TextDecoder().decode(out.Payload)) as Record<string, unknown> };
      };

      const timedOut = await invoke();
      expect(timedOut.functionError).toBe("Unhandled");
      expect(timedOut.body).toMatchObject({ errorType: "Sandbox.Timedout" });
      expect(timedOut.body.errorMessage).toMatch(new RegExp(`Task timed out after ${spec.timeoutSeconds}\\.00 seconds$`));
      const log = readFileSync(api.logFiles(phaseFunction)[0]!, "utf8");
      expect(log).toContain("Reset initiated: Timeout");
      expect(log).toMatch(/Sending SIGKILL to runtime/);

      // The killed invocation's claim is still RUNNING, its lease ended with the timeout (the runner's deadline
      // is the invocation's), and the status is untouched.
      const ledger = new DynamoPhaseLedger({ client: aws.dynamodb, tableName: `${SERVICE}-${stage}-ledger` });
      const [entry] = await ledger.history(dvm.metadata.uid);
      expect(entry).toMatchObject({ key: { phase: "Started" }, state: "RUNNING", attempts: 1 });
      expect(entry!.leaseExpiresAt).toBeLessThanOrEqual(Date.now());
      expect((await readDvm(clusters.source, namespace, "slow")).status?.phase).toBe(dvm.status?.phase);

      // The API server answers again: the next invocation restarts the runtime (a second cold start in the same
      // sandbox, as Lambda does after a timeout), takes the phase over at once and completes it, once.
      await putKubeconfig(hostKubeconfig);
      const second = await invoke();
      expect(second.functionError, JSON.stringify(second.body)).toBeUndefined();
      expect(second.body).toMatchObject({ kind: "advanced", phase: "Started" });
      const [after] = await ledger.history(dvm.metadata.uid);
      expect(after).toMatchObject({ key: { phase: "Started" }, state: "COMPLETED", takeovers: 1 });
      const reports = api.reports(phaseFunction);
      expect(reports.filter((r) => r.initDurationMs !== undefined)).toHaveLength(2);
    } finally {
      client?.destroy();
      await putKubeconfig(hostKubeconfig);
      await proxy.close();
    }
  }, 300_000);

  it("osls remove leaves nothing of the stage", async () => {
    const removeMs = await removeStack(stack);
    console.info(`[deployed migration] osls remove --stage ${stage}: ${(removeMs / 1000).toFixed(1)} s`);
    // The kubeconfig parameter is the user's (the docs' step 3), not the stack's: removed by hand.
    await aws.ssm.send(new DeleteParameterCommand({ Name: `/${SERVICE}/${stage}/host-kubeconfig` }));
    const ours = (names: (string | undefined)[]) => names.filter((n) => n?.includes(stage));
    expect(ours((await aws.dynamodb.send(new ListTablesCommand({}))).TableNames ?? [])).toEqual([]);
    expect(ours((await aws.lambda.send(new ListFunctionsCommand({}))).Functions?.map((f) => f.FunctionName) ?? [])).toEqual([]);
    expect(ours((await aws.iam.send(new ListRolesCommand({}))).Roles?.map((r) => r.RoleName) ?? [])).toEqual([]);
    // moto's CloudFormation cannot delete an AWS::IAM::ManagedPolicy (stack.test.ts): the relay's invoke
    // policy is left there, and only there; deleted by hand to end clean.
    const policies = (await aws.iam.send(new ListPoliciesCommand({ Scope: "Local" }))).Policies ?? [];
    expect(ours(policies.map((p) => p.Arn))).toEqual([stack.physicalIds.get("RelayInvokePolicy")]);
    await aws.iam.send(new DeletePolicyCommand({ PolicyArn: stack.physicalIds.get("RelayInvokePolicy")! }));
    expect(ours((await aws.events.send(new ListRulesCommand({}))).Rules?.map((r) => r.Name) ?? [])).toEqual([]);
    expect(ours((await aws.sqs.call<{ QueueUrls?: string[] }>("ListQueues", {})).QueueUrls ?? [])).toEqual([]);
    expect(ours((await aws.ssm.send(new DescribeParametersCommand({}))).Parameters?.map((p) => p.Name) ?? [])).toEqual([]);
  });
});

/** The runner's "phase completed" lines for `uid` in the sandboxes' logs (Powertools JSON), with their request ids. */
function completionsLogged(logFiles: string[], uid: string): { phase: string; requestId: string }[] {
  const found: { phase: string; requestId: string }[] = [];
  for (const file of logFiles) {
    for (const line of readFileSync(file, "utf8").split("\n")) {
      if (!line.includes("phase completed") || !line.includes(uid)) continue;
      const json = line.slice(line.indexOf("{"));
      const entry = JSON.parse(json) as Record<string, unknown>;
      found.push({ phase: String(entry.phase), requestId: String(entry.function_request_id) });
    }
  }
  return found;
}

async function until(
  what: string,
  read: () => Promise<DirectVolumeMigration>,
  done: (value: DirectVolumeMigration) => boolean,
  timeoutMs = 600_000,
): Promise<DirectVolumeMigration> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; last: ${JSON.stringify(value.status)}`);
    await new Promise((resolve) => setTimeout(resolve, 1_000));
  }
}
