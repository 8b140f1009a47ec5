/**
 * The stack as a user deploys it, against moto's AWS API emulator (docs/operations.md, "Dry run against
 * moto"): `osls deploy` of a stage of its own, then everything read back through the AWS APIs and compared
 * with what serverless.yml and the project's sources say (the ledger table definition, the itinerary-driven
 * function list, the trigger's allow-list, the configuration parsers), the events as EventBridge delivers
 * them, IAM as moto enforces it, and `osls remove` leaving nothing.
 *
 * What moto 5.2 leaves out (read from its source, so the test says it rather than skipping it):
 *   - its CloudFormation creates no AWS::Lambda::EventInvokeConfig, AWS::ApiGatewayV2::*,
 *     AWS::SQS::QueuePolicy or AWS::S3::BucketPolicy, lists the Lambda permissions it creates without a
 *     physical id, ignores a function's Architectures (x86_64), a table's TimeToLiveSpecification /
 *     PointInTimeRecoverySpecification and a role's ManagedPolicyArns (RelayRole gets no attached
 *     policy): for those the deployed template is checked (test/unit/infra/serverless.test.ts relates it
 *     to the sources);
 *   - it stores the inline role policies its CloudFormation creates as objects, which its own IAM
 *     enforcement cannot read (HTTP 500): the IAM suite writes each back, unchanged, through PutRolePolicy;
 *   - EventBridge's TestEventPattern is not implemented, and a rule delivers whatever its State: the
 *     deployed rule's pattern is checked by delivery, on a rule of the test's own with an SQS target;
 *   - its IAM enforcement evaluates resource-scoped statements only for SQS, S3, IAM roles and STS
 *     AssumeRole; DynamoDB, SSM, EventBridge and Lambda calls are matched against resource "*", so a
 *     statement naming an ARN (all of ours) never allows them (getmoto/moto#9581); its refusals of those
 *     JSON-protocol services are XML, which the SDK cannot parse (SyntaxError, no code, no message); and
 *     its trust-policy check fails on a Service principal. Those stay covered by the policy comparison in
 *     the unit test (every SDK operation in the bundle against the role's statements).
 */

import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DescribeContinuousBackupsCommand, DescribeTableCommand, DescribeTimeToLiveCommand, ListTablesCommand } from "@aws-sdk/client-dynamodb";
import {
  CreateEventBusCommand,
  DeleteEventBusCommand,
  DeleteRuleCommand,
  DescribeRuleCommand,
  ListRulesCommand,
  ListTargetsByRuleCommand,
  PutEventsCommand,
  PutRuleCommand,
  PutTargetsCommand,
  RemoveTargetsCommand,
} from "@aws-sdk/client-eventbridge";
import {
  CreateAccessKeyCommand,
  CreateUserCommand,
  DeleteAccessKeyCommand,
  DeletePolicyCommand,
  DeleteUserCommand,
  DeleteUserPolicyCommand,
  GetPolicyCommand,
  GetPolicyVersionCommand,
  GetRoleCommand,
  GetRolePolicyCommand,
  ListAccessKeysCommand,
  ListAttachedRolePoliciesCommand,
  ListPoliciesCommand,
  ListRolePoliciesCommand,
  ListRolesCommand,
  PutRolePolicyCommand,
  PutUserPolicyCommand,
} from "@aws-sdk/client-iam";
import { GetFunctionCommand, GetPolicyCommand as GetFunctionPolicyCommand, ListFunctionsCommand } from "@aws-sdk/client-lambda";
import { DeleteParameterCommand, DescribeParametersCommand, GetParameterCommand } from "@aws-sdk/client-ssm";
import { AssumeRoleCommand } from "@aws-sdk/client-sts";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { parse } from "yaml";
import ledgerTable from "../../infra/deploy/ledger-table.json" with { type: "json" };
import { EventBridgeSink } from "../../src/aws/eventBridgeSink";
import { phaseFunctionKeys, phaseFunctionName } from "../../src/aws/functionLayout";
import { createKubeconfigSource } from "../../src/aws/kubeconfigSource";
import { DynamoPhaseLedger } from "../../src/aws/ledger";
import { parsePhaseFunctionEnv } from "../../src/aws/phaseConfig";
import { parseTriggerEnv } from "../../src/aws/triggerConfig";
import { completionEvents } from "../../src/events/outgoing";
import { EventPublisher } from "../../src/events/publisher";
import { MIGRATION_REQUESTED, PHASE_COMPLETED } from "../../src/events/schema";
import { type AwsClients, awsClients, type DeployedStack, deployStack, removeStack, SERVICE } from "../support/deployedStack";
import { MOTO_INSTALL, setIamEnforcement } from "../support/moto";
import { ROOT } from "../support/osls";
import { missing } from "../support/requirements";
import { type AwsCredentials, SqsJsonClient } from "../support/sqsJson";

// biome-ignore lint/suspicious/noExplicitAny: parsed YAML/JSON, walked freely by the test
type Json = Record<string, any>;

const moto = inject("moto");
const require = createRequire(import.meta.url);
const serverlessYml = parse(require("node:fs").readFileSync(join(ROOT, "serverless.yml"), "utf8"), { logLevel: "silent" }) as Json;
const triggerRule = require(join(ROOT, "infra", "deploy", "serverless", "trigger.cjs")) as {
  eventPattern(context: { resolveVariable(name: string): Promise<unknown> }): Promise<Json>;
  ruleName(context: { resolveConfigurationProperty(path: string[]): Promise<unknown>; resolveVariable(name: string): Promise<unknown> }): Promise<string>;
};

const STAGE = `dry${randomUUID().slice(0, 4)}`;
/** The trigger's allow-list this stage is deployed with: a prefix and an exact source. */
const ALLOWED_SOURCES = "https://ci.example.com/*,com.example.ci";
const PARAMS = [`triggerAllowedSources=${ALLOWED_SOURCES}`];
const kubeconfig = (server: string, token: string) =>
  `apiVersion: v1\nkind: Config\nclusters:\n- name: host\n  cluster:\n    server: ${server}\ncontexts:\n- name: host\n  context:\n    cluster: host\n    user: fn\ncurrent-context: host\nusers:\n- name: fn\n  user:\n    token: ${token}\n`;
const HOST_KUBECONFIG = kubeconfig("https://host.example.com:6443", "phase-token");
const TRIGGER_KUBECONFIG = kubeconfig("https://host.example.com:6443", "trigger-token");

/** Resource types moto's CloudFormation does not create (ListStackResources does not name them). */
const NOT_CREATED_BY_MOTO = [
  "AWS::ApiGatewayV2::Api",
  "AWS::ApiGatewayV2::Integration",
  "AWS::ApiGatewayV2::Route",
  "AWS::ApiGatewayV2::Stage",
  "AWS::Lambda::EventInvokeConfig",
  "AWS::S3::BucketPolicy",
  "AWS::SQS::QueuePolicy",
];
/** Created, but listed without a physical id (checked through the function's resource policy instead). */
const UNLISTED_BY_MOTO = ["AWS::Lambda::Permission"];

describe.skipIf(missing("moto_server", moto, MOTO_INSTALL))("the stack deployed with osls to moto", () => {
  const scratch = mkdtempSync(join(tmpdir(), "dvm-deployed-"));
  let stack: DeployedStack;
  let aws: AwsClients;
  /** Physical ids by logical id, and the deployed template's resources. */
  let physical: Map<string, string>;
  let resources: Json;

  beforeAll(async () => {
    aws = awsClients(moto!.endpoint, moto!.region);
    stack = await deployStack({
      endpoint: moto!.endpoint,
      region: moto!.region,
      stage: STAGE,
      params: PARAMS,
      scratch,
      kubeconfigs: { host: HOST_KUBECONFIG, trigger: TRIGGER_KUBECONFIG },
    });
    console.log(`osls deploy --stage ${STAGE} against moto: ${(stack.deployMs / 1000).toFixed(1)} s`);
    resources = stack.template.Resources as Json;
    physical = stack.physicalIds;
  }, 600_000);

  afterAll(() => {
    aws?.destroy();
    rmSync(scratch, { recursive: true, force: true });
  });

  const ofType = (type: string) => Object.entries(resources).filter(([, r]) => r.Type === type) as [string, Json][];
  const roleNameOf = (logicalId: string) => physical.get(logicalId)!;
  const queueUrl = async (logicalId: string) =>
    (await aws.sqs.call<{ QueueUrl: string }>("GetQueueUrl", { QueueName: resources[logicalId].Properties.QueueName })).QueueUrl;
  const queueArn = async (logicalId: string) =>
    (await aws.sqs.call<{ Attributes: Record<string, string> }>("GetQueueAttributes", { QueueUrl: await queueUrl(logicalId), AttributeNames: ["QueueArn"] }))
      .Attributes.QueueArn!;

  describe("as deployed", () => {
    it("creates every resource of the template but the types moto's CloudFormation lacks", () => {
      const notCreated = Object.keys(resources).filter((id) => !physical.has(id));
      expect([...new Set(notCreated.map((id) => resources[id].Type as string))].sort()).toEqual([...NOT_CREATED_BY_MOTO, ...UNLISTED_BY_MOTO].sort());
    });

    it("has the ledger table infra/deploy/ledger-table.json defines, under the stage's name", async () => {
      const { Table } = await aws.dynamodb.send(new DescribeTableCommand({ TableName: `${SERVICE}-${STAGE}-ledger` }));
      expect(Table?.KeySchema).toEqual(ledgerTable.Properties.KeySchema);
      expect(Table?.AttributeDefinitions).toEqual(expect.arrayContaining(ledgerTable.Properties.AttributeDefinitions));
      expect(Table?.BillingModeSummary?.BillingMode).toBe(ledgerTable.Properties.BillingMode);
      // moto's CloudFormation drops the TTL (and PITR) specification: it is in the deployed template, as defined.
      const ttl = await aws.dynamodb.send(new DescribeTimeToLiveCommand({ TableName: Table!.TableName! }));
      expect(ttl.TimeToLiveDescription?.TimeToLiveStatus).toBe("DISABLED");
      expect(resources.LedgerTable.Properties.TimeToLiveSpecification).toEqual(ledgerTable.Properties.TimeToLiveSpecification);
      const backups = await aws.dynamodb.send(new DescribeContinuousBackupsCommand({ TableName: Table!.TableName! }));
      expect(backups.ContinuousBackupsDescription?.PointInTimeRecoveryDescription?.PointInTimeRecoveryStatus).toBe("DISABLED");
      expect(resources.LedgerTable.Properties.PointInTimeRecoverySpecification).toEqual(ledgerTable.Properties.PointInTimeRecoverySpecification);
    });

    it("has the phase function(s) of the itinerary's layout and the trigger, configured as serverless.yml says", async () => {
      expect(stack.phaseFunctionNames).toEqual(phaseFunctionKeys("shared").map(() => phaseFunctionName(SERVICE, STAGE, "shared", "Started")));
      const phase = serverlessYml.custom.phaseFunction as Json;
      const trigger = (serverlessYml.functions as Json[]).find((f) => f.trigger)!.trigger as Json;
      const expected = [
        ...stack.phaseFunctionNames.map((name) => ({ name, spec: phase, role: "IamRoleLambdaExecution" })),
        { name: stack.triggerFunctionName, spec: trigger, role: "TriggerRole" },
      ];
      for (const { name, spec, role } of expected) {
        const config = await stack.functionConfiguration(name);
        expect(config.Runtime, name).toBe(serverlessYml.provider.runtime);
        expect(config.Handler, name).toBe(spec.handler);
        expect(config.MemorySize, name).toBe(spec.memorySize);
        expect(config.Timeout, name).toBe(spec.timeout);
        const { Role } = await aws.iam.send(new GetRoleCommand({ RoleName: roleNameOf(role) }));
        expect(config.Role, name).toBe(Role?.Arn);
        // moto ignores Architectures (every function is x86_64 there); the deployed template has serverless.yml's.
        const [logicalId] = ofType("AWS::Lambda::Function").find(([, r]) => r.Properties.FunctionName === name)!;
        expect(resources[logicalId].Properties.Architectures).toEqual([serverlessYml.provider.architecture]);
        // The environment is the template's, and the function's own configuration parser accepts it.
        expect(config.Environment?.Variables, name).toEqual(resources[logicalId].Properties.Environment.Variables);
      }
      const phaseEnv = (await stack.functionConfiguration(stack.phaseFunctionNames[0]!)).Environment!.Variables!;
      expect(parsePhaseFunctionEnv(phaseEnv)).toMatchObject({
        ledgerTableName: `${SERVICE}-${STAGE}-ledger`,
        kubeconfigParameter: `/${SERVICE}/${STAGE}/host-kubeconfig`,
      });
      const triggerEnv = (await stack.functionConfiguration(stack.triggerFunctionName)).Environment!.Variables!;
      expect(parseTriggerEnv(triggerEnv)).toEqual({
        allowedSources: ALLOWED_SOURCES,
        namespaces: { allowedNamespaces: [], adminNamespaces: ["dvm-system"], allowAdminNamespaces: false },
        ledgerTableName: `${SERVICE}-${STAGE}-ledger`,
        kubeconfigParameter: `/${SERVICE}/${STAGE}/trigger-kubeconfig`,
        scheduleHistoryLimit: 3,
      });
    });

    it("gives each role exactly its statements, on the deployed resources' ARNs", async () => {
      const { Table } = await aws.dynamodb.send(new DescribeTableCommand({ TableName: `${SERVICE}-${STAGE}-ledger` }));
      const account = Table!.TableArn!.split(":")[4]!;
      const arn = (service: string, resource: string) => `arn:aws:${service}:${moto!.region}:${account}:${resource}`;
      const phase = await deployedStatements(aws, roleNameOf("IamRoleLambdaExecution"));
      expect(phase.get("dynamodb:UpdateItem")).toEqual([Table!.TableArn]);
      expect(phase.get("dynamodb:Query")).toEqual([Table!.TableArn]);
      expect(phase.get("ssm:GetParameter")).toEqual([arn("ssm", `parameter/${SERVICE}/${STAGE}/host-kubeconfig`)]);
      expect(phase.get("events:PutEvents")).toEqual([arn("events", "event-bus/default")]);
      expect(phase.get("sqs:SendMessage")).toEqual([await queueArn("PhaseFailureQueue")]);
      const logs = [arn("logs", `log-group:/aws/lambda/${SERVICE}-${STAGE}*:*`)];
      expect(Object.fromEntries([...phase].filter(([a]) => a.startsWith("logs:")))).toEqual({
        "logs:CreateLogGroup": logs,
        "logs:CreateLogStream": logs,
        "logs:TagResource": logs,
        "logs:PutLogEvents": [`${logs[0]}:*`],
      });
      expect(phase.size).toBe(9);

      const trigger = await deployedStatements(aws, roleNameOf("TriggerRole"));
      // GetAtt of a log group's Arn: AWS ends it in ":*", moto does not.
      const triggerLogs = [expect.stringMatching(new RegExp(`^${arn("logs", `log-group:/aws/lambda/${SERVICE}-${STAGE}-trigger`)}(:\\*)?$`))];
      expect(Object.fromEntries(trigger)).toEqual({
        "logs:CreateLogStream": triggerLogs,
        "logs:PutLogEvents": triggerLogs,
        "ssm:GetParameter": [arn("ssm", `parameter/${SERVICE}/${STAGE}/trigger-kubeconfig`)],
        "sqs:SendMessage": [await queueArn("TriggerFailureQueue")],
        // Its handled-event records; the LeadingKeys condition is checked in the template's unit test.
        "dynamodb:GetItem": [Table!.TableArn],
        "dynamodb:UpdateItem": [Table!.TableArn],
      });
    });

    it("has the relay's invoke policy: the phase function(s) and nothing else", async () => {
      const policyArn = physical.get("RelayInvokePolicy")!;
      const document = await managedPolicyDocument(aws, policyArn);
      const phaseArns = await Promise.all(stack.phaseFunctionNames.map(async (name) => (await stack.functionConfiguration(name)).FunctionArn));
      expect(document.Statement).toEqual([{ Effect: "Allow", Action: ["lambda:InvokeFunction"], Resource: phaseArns }]);
      // RelayRole exists with no policy of its own; moto ignores ManagedPolicyArns, so the attachment is the template's.
      const relayRole = roleNameOf("RelayRole");
      expect((await aws.iam.send(new ListRolePoliciesCommand({ RoleName: relayRole }))).PolicyNames).toEqual([]);
      expect((await aws.iam.send(new ListAttachedRolePoliciesCommand({ RoleName: relayRole }))).AttachedPolicies).toEqual([]);
      expect(resources.RelayRole.Properties.ManagedPolicyArns).toEqual([{ Ref: "RelayInvokePolicy" }]);
    });

    it("lets EventBridge and the HTTP API invoke the trigger, from this stack's rule and API only", async () => {
      const { Policy } = await aws.lambda.send(new GetFunctionPolicyCommand({ FunctionName: stack.triggerFunctionName }));
      const statements = (JSON.parse(Policy!) as Json).Statement as Json[];
      const { Configuration } = await aws.lambda.send(new GetFunctionCommand({ FunctionName: stack.triggerFunctionName }));
      expect(statements.map((st) => [st.Principal.Service, st.Action, st.Resource]).sort()).toEqual([
        ["apigateway.amazonaws.com", "lambda:InvokeFunction", Configuration!.FunctionArn],
        ["events.amazonaws.com", "lambda:InvokeFunction", Configuration!.FunctionArn],
      ]);
      const name = await triggerRule.ruleName({ resolveConfigurationProperty: async () => SERVICE, resolveVariable: async () => STAGE });
      const { Arn } = await aws.events.send(new DescribeRuleCommand({ Name: name }));
      expect(statements.find((st) => st.Principal.Service === "events.amazonaws.com")!.Condition).toEqual({ ArnLike: { "AWS:SourceArn": Arn } });
      // The phase functions are invoked by the relay's identity only: no resource policy.
      for (const phase of stack.phaseFunctionNames) {
        await expect(aws.lambda.send(new GetFunctionPolicyCommand({ FunctionName: phase }))).rejects.toMatchObject({ name: "ResourceNotFoundException" });
      }
    });

    it("has the trigger's EventBridge rule, enabled, with the pattern trigger.cjs makes of the allow-list", async () => {
      const name = await triggerRule.ruleName({ resolveConfigurationProperty: async () => SERVICE, resolveVariable: async () => STAGE });
      const rule = await aws.events.send(new DescribeRuleCommand({ Name: name }));
      expect(rule.State).toBe("ENABLED");
      const pattern = await triggerRule.eventPattern({ resolveVariable: async () => ALLOWED_SOURCES });
      expect(JSON.parse(rule.EventPattern!)).toEqual(pattern);
      const { Targets } = await aws.events.send(new ListTargetsByRuleCommand({ Rule: name }));
      const { Configuration } = await aws.lambda.send(new GetFunctionCommand({ FunctionName: stack.triggerFunctionName }));
      expect(Targets?.map((t) => ({ Arn: t.Arn, DeadLetterConfig: t.DeadLetterConfig }))).toEqual([
        { Arn: Configuration!.FunctionArn, DeadLetterConfig: { Arn: await queueArn("TriggerFailureQueue") } },
      ]);
    });

    it("has both dead-letter queues, encrypted and keeping messages 14 days", async () => {
      for (const id of ["PhaseFailureQueue", "TriggerFailureQueue"]) {
        const { Attributes } = await aws.sqs.call<{ Attributes: Record<string, string> }>("GetQueueAttributes", {
          QueueUrl: await queueUrl(id),
          AttributeNames: ["All"],
        });
        expect(Attributes.MessageRetentionPeriod, id).toBe(String(resources[id].Properties.MessageRetentionPeriod));
        expect(Attributes.SqsManagedSseEnabled, id).toBe("true");
      }
      // The functions' on-failure destinations (EventInvokeConfig) are not created by moto: the template has them.
      for (const [, config] of ofType("AWS::Lambda::EventInvokeConfig"))
        expect(config.Properties.DestinationConfig.OnFailure.Destination["Fn::GetAtt"][0]).toMatch(/FailureQueue$/);
    });

    it("serves each function's code as the zip osls uploaded, holding the bundles", async () => {
      for (const name of [...stack.phaseFunctionNames, stack.triggerFunctionName]) {
        const zip = await stack.codeZip(name);
        const config = await stack.functionConfiguration(name);
        const { createHash } = await import("node:crypto");
        expect(createHash("sha256").update(zip).digest("base64"), name).toBe(config.CodeSha256);
        expect(zip.includes(Buffer.from("functions/phase.cjs")) && zip.includes(Buffer.from("functions/trigger.cjs")), name).toBe(true);
      }
    });
  });

  describe("events as EventBridge delivers them", () => {
    const probe = `dvm-probe-${STAGE}`;
    const created: { buses: string[]; rules: { name: string; bus: string }[]; queues: string[] } = { buses: [], rules: [], queues: [] };

    afterAll(async () => {
      for (const { name, bus } of created.rules) {
        await aws.events.send(new RemoveTargetsCommand({ Rule: name, EventBusName: bus, Ids: ["queue"] }));
        await aws.events.send(new DeleteRuleCommand({ Name: name, EventBusName: bus }));
      }
      for (const bus of created.buses) await aws.events.send(new DeleteEventBusCommand({ Name: bus }));
      for (const url of created.queues) await aws.sqs.call("DeleteQueue", { QueueUrl: url });
    });

    /** A rule of the test's own on `bus` with `pattern`, delivering to a new SQS queue; returns the queue URL. */
    async function ruleToQueue(name: string, bus: string, pattern: string): Promise<string> {
      const { QueueUrl } = await aws.sqs.call<{ QueueUrl: string }>("CreateQueue", { QueueName: name });
      created.queues.push(QueueUrl);
      const { Attributes } = await aws.sqs.call<{ Attributes: Record<string, string> }>("GetQueueAttributes", { QueueUrl, AttributeNames: ["QueueArn"] });
      await aws.events.send(new PutRuleCommand({ Name: name, EventBusName: bus, EventPattern: pattern, State: "ENABLED" }));
      created.rules.push({ name, bus });
      await aws.events.send(new PutTargetsCommand({ Rule: name, EventBusName: bus, Targets: [{ Id: "queue", Arn: Attributes.QueueArn! }] }));
      return QueueUrl;
    }

    /** Every message in the queue (EventBridge delivered them during PutEvents), parsed. */
    async function drain(queue: string): Promise<Json[]> {
      const bodies: Json[] = [];
      for (;;) {
        const { Messages } = await aws.sqs.call<{ Messages?: { Body: string; ReceiptHandle: string }[] }>("ReceiveMessage", {
          QueueUrl: queue,
          MaxNumberOfMessages: 10,
        });
        if (!Messages?.length) return bodies;
        for (const m of Messages) {
          bodies.push(JSON.parse(m.Body) as Json);
          await aws.sqs.call("DeleteMessage", { QueueUrl: queue, ReceiptHandle: m.ReceiptHandle });
        }
      }
    }

    it("the deployed rule's pattern delivers the allowed sources and no others", async () => {
      // moto has no TestEventPattern, and its rules deliver whatever their State (and to a Lambda target not
      // at all): the deployed rule's pattern is read back and put on a rule of the test's own, on a bus of its own.
      const name = await triggerRule.ruleName({ resolveConfigurationProperty: async () => SERVICE, resolveVariable: async () => STAGE });
      const { EventPattern } = await aws.events.send(new DescribeRuleCommand({ Name: name }));
      await aws.events.send(new CreateEventBusCommand({ Name: probe }));
      created.buses.push(probe);
      const queue = await ruleToQueue(`${probe}-requests`, probe, EventPattern!);
      const cases = [
        { source: "com.example.ci", matches: true },
        { source: "https://ci.example.com/team-a", matches: true },
        // A CloudEvent wrapped by another producer: its own source is in detail.source.
        { source: "aws.partner/relay", detailSource: "https://ci.example.com/nightly", matches: true },
        { source: "com.example.ci.evil", matches: false },
        { source: "https://evil.example.com/https://ci.example.com/", matches: false },
        { source: "aws.partner/relay", detailSource: "com.example.other", matches: false },
        { source: "com.example.ci", type: PHASE_COMPLETED, matches: false },
      ];
      const { FailedEntryCount } = await aws.events.send(
        new PutEventsCommand({
          Entries: cases.map((c, i) => ({
            EventBusName: probe,
            Source: c.source,
            DetailType: c.type ?? MIGRATION_REQUESTED,
            Detail: JSON.stringify({ case: i, ...(c.detailSource ? { source: c.detailSource } : {}) }),
          })),
        }),
      );
      expect(FailedEntryCount).toBe(0);
      const delivered = (await drain(queue)).map((event) => event.detail.case as number).sort();
      expect(delivered).toEqual(cases.flatMap((c, i) => (c.matches ? [i] : [])));
    });

    it("outgoing CloudEvents reach the functions' bus as PutEvents entries a rule with an SQS target receives", async () => {
      const env = (await stack.functionConfiguration(stack.phaseFunctionNames[0]!)).Environment!.Variables!;
      const { ledgerTableName } = parsePhaseFunctionEnv(env);
      const source = env.DVM_EVENTS_SOURCE!;
      const queue = await ruleToQueue(`${probe}-outgoing`, env.DVM_EVENTS_BUS_NAME!, JSON.stringify({ source: [source] }));
      // A completed phase in the deployed ledger table, and the events the functions build from its history.
      const ledger = new DynamoPhaseLedger({ client: aws.dynamodb, tableName: ledgerTableName });
      const dvm = { uid: randomUUID(), namespace: "apps", name: "db-move" };
      const claimed = await ledger.claim({ uid: dvm.uid, phase: "Started", generation: 1 }, { leaseMs: 60_000, dvm });
      if (claimed.kind !== "claimed") throw new Error(`claim: ${claimed.kind}`);
      await ledger.complete(claimed.claim, { result: "advanced", nextPhase: "Completed" });
      const events = completionEvents("Started", dvm, await ledger.history(dvm.uid), source);
      expect(events.length).toBe(2);
      const publisher = new EventPublisher({ sink: new EventBridgeSink({ busName: env.DVM_EVENTS_BUS_NAME!, client: aws.events }) });
      publisher.publish(...events);
      expect(await publisher.flush(10_000)).toMatchObject({ sent: 2, failed: 0, dropped: 0 });
      const delivered = await drain(queue);
      expect(delivered.map((e) => [e.source, e["detail-type"], e.detail.id]).sort()).toEqual(events.map((e) => [source, e.type, e.id]).sort());
      for (const event of events) expect(delivered.find((e) => e.detail.id === event.id)!.detail).toEqual(JSON.parse(JSON.stringify(event)));
    });

    it("SSM SecureStrings hold the kubeconfigs the functions read", async () => {
      for (const name of [stack.phaseFunctionNames[0]!, stack.triggerFunctionName]) {
        const parameter = (await stack.functionConfiguration(name)).Environment!.Variables!.DVM_KUBECONFIG_PARAMETER!;
        const { Parameter } = await aws.ssm.send(new GetParameterCommand({ Name: parameter }));
        expect(Parameter?.Type, parameter).toBe("SecureString");
        const kc = await createKubeconfigSource({ parameterName: parameter, ssm: aws.ssm })();
        expect(kc.getCurrentCluster()?.server).toBe("https://host.example.com:6443");
        expect(kc.getCurrentUser()?.token).toBe(name === stack.triggerFunctionName ? "trigger-token" : "phase-token");
      }
    });
  });

  describe("IAM as moto enforces it", () => {
    const admin = `dvm-admin-${STAGE}`;
    const roleCredentials = new Map<string, AwsCredentials>();
    let adminAws: AwsClients;
    /** The deployed inline policies, by role logical id: [policy name, document]. */
    const deployedPolicies = new Map<string, [string, Json]>();

    beforeAll(async () => {
      // Enforcement off: set up an administrator, and take each function role's credentials as the Lambda
      // service would (moto's trust check fails on a Service principal).
      await aws.iam.send(new CreateUserCommand({ UserName: admin }));
      await aws.iam.send(
        new PutUserPolicyCommand({
          UserName: admin,
          PolicyName: "all",
          PolicyDocument: JSON.stringify({ Version: "2012-10-17", Statement: [{ Effect: "Allow", Action: "*", Resource: "*" }] }),
        }),
      );
      const { AccessKey } = await aws.iam.send(new CreateAccessKeyCommand({ UserName: admin }));
      adminAws = awsClients(moto!.endpoint, moto!.region, { accessKeyId: AccessKey!.AccessKeyId!, secretAccessKey: AccessKey!.SecretAccessKey! });
      for (const id of ["IamRoleLambdaExecution", "TriggerRole"]) {
        const roleName = roleNameOf(id);
        const { PolicyNames } = await aws.iam.send(new ListRolePoliciesCommand({ RoleName: roleName }));
        expect(PolicyNames).toHaveLength(1);
        const { PolicyDocument } = await aws.iam.send(new GetRolePolicyCommand({ RoleName: roleName, PolicyName: PolicyNames![0]! }));
        const document = policyDocument(PolicyDocument!);
        deployedPolicies.set(id, [PolicyNames![0]!, document]);
        // Written back unchanged, as JSON text: moto's enforcement cannot read what its CloudFormation stored.
        await aws.iam.send(new PutRolePolicyCommand({ RoleName: roleName, PolicyName: PolicyNames![0]!, PolicyDocument: JSON.stringify(document) }));
        const { Role } = await aws.iam.send(new GetRoleCommand({ RoleName: roleName }));
        const { Credentials } = await aws.sts.send(new AssumeRoleCommand({ RoleArn: Role!.Arn!, RoleSessionName: id }));
        roleCredentials.set(id, {
          accessKeyId: Credentials!.AccessKeyId!,
          secretAccessKey: Credentials!.SecretAccessKey!,
          sessionToken: Credentials!.SessionToken!,
        });
      }
      await setIamEnforcement(moto!.endpoint, true);
    }, 120_000);

    afterAll(async () => {
      await setIamEnforcement(moto!.endpoint, false);
      adminAws?.destroy();
      const { AccessKeyMetadata } = await aws.iam.send(new ListAccessKeysCommand({ UserName: admin }));
      for (const key of AccessKeyMetadata ?? []) await aws.iam.send(new DeleteAccessKeyCommand({ UserName: admin, AccessKeyId: key.AccessKeyId! }));
      await aws.iam.send(new DeleteUserPolicyCommand({ UserName: admin, PolicyName: "all" }));
      await aws.iam.send(new DeleteUserCommand({ UserName: admin }));
    });

    const sqsAs = (id: string) => new SqsJsonClient({ endpoint: moto!.endpoint, region: moto!.region, credentials: roleCredentials.get(id)! });
    const send = (id: string, queue: string) => sqsAs(id).call("SendMessage", { QueueUrl: queue, MessageBody: JSON.stringify({ probe: id }) });

    it("refuses a caller without credentials moto knows", async () => {
      await expect(aws.sqs.call("GetQueueUrl", { QueueName: resources.PhaseFailureQueue.Properties.QueueName })).rejects.toMatchObject({ status: 403 });
    });

    it("lets each function's role send to its own failure queue, and to no other", async () => {
      const phaseQueue = await queueUrlAs(adminAws, resources.PhaseFailureQueue.Properties.QueueName);
      const triggerQueue = await queueUrlAs(adminAws, resources.TriggerFailureQueue.Properties.QueueName);
      await expect(send("IamRoleLambdaExecution", phaseQueue)).resolves.toBeDefined();
      await expect(send("TriggerRole", triggerQueue)).resolves.toBeDefined();
      await expect(send("IamRoleLambdaExecution", triggerQueue)).rejects.toMatchObject({
        name: "AccessDenied",
        message: expect.stringContaining("not authorized to perform: sqs:SendMessage"),
      });
      await expect(send("TriggerRole", phaseQueue)).rejects.toMatchObject({ name: "AccessDenied", message: expect.stringContaining("sqs:SendMessage") });
    });

    it("refuses the phase role's send once its sqs:SendMessage statement is removed, naming the permission", async () => {
      const phaseQueue = await queueUrlAs(adminAws, resources.PhaseFailureQueue.Properties.QueueName);
      const [policyName, document] = deployedPolicies.get("IamRoleLambdaExecution")!;
      const without = { ...document, Statement: (document.Statement as Json[]).filter((s) => ![s.Action].flat().includes("sqs:SendMessage")) };
      expect(without.Statement).toHaveLength((document.Statement as Json[]).length - 1);
      const roleName = roleNameOf("IamRoleLambdaExecution");
      await adminAws.iam.send(new PutRolePolicyCommand({ RoleName: roleName, PolicyName: policyName, PolicyDocument: JSON.stringify(without) }));
      try {
        const refused = await send("IamRoleLambdaExecution", phaseQueue).then(
          () => undefined,
          (error: unknown) => error as Error,
        );
        expect(refused?.name).toBe("AccessDenied");
        expect(refused?.message).toMatch(
          /^User: arn:aws:sts::\d+:assumed-role\/.*lambdaRole\/IamRoleLambdaExecution is not authorized to perform: sqs:SendMessage$/,
        );
      } finally {
        await adminAws.iam.send(new PutRolePolicyCommand({ RoleName: roleName, PolicyName: policyName, PolicyDocument: JSON.stringify(document) }));
      }
      await expect(send("IamRoleLambdaExecution", phaseQueue)).resolves.toBeDefined();
    });
  });

  describe("osls remove", () => {
    it("removes everything it deployed", async () => {
      const removeMs = await removeStack(stack);
      console.log(`osls remove --stage ${STAGE} against moto: ${(removeMs / 1000).toFixed(1)} s`);
      // The kubeconfig parameters are the user's (the docs' step 3), not the stack's: removed by hand, as a user would.
      for (const which of ["host", "trigger"]) await aws.ssm.send(new DeleteParameterCommand({ Name: `/${SERVICE}/${STAGE}/${which}-kubeconfig` }));
      const ours = (names: (string | undefined)[]) => names.filter((n) => n?.includes(STAGE));
      expect(ours((await aws.dynamodb.send(new ListTablesCommand({}))).TableNames ?? [])).toEqual([]);
      expect(ours((await aws.lambda.send(new ListFunctionsCommand({}))).Functions?.map((f) => f.FunctionName) ?? [])).toEqual([]);
      expect(ours((await aws.iam.send(new ListRolesCommand({}))).Roles?.map((r) => r.RoleName) ?? [])).toEqual([]);
      // moto's CloudFormation cannot delete an AWS::IAM::ManagedPolicy (it has no delete for it): the relay's
      // invoke policy is the one thing left behind there, and only there. Deleted by hand to end clean.
      const policies = (await aws.iam.send(new ListPoliciesCommand({ Scope: "Local" }))).Policies ?? [];
      expect(ours(policies.map((p) => p.Arn))).toEqual([physical.get("RelayInvokePolicy")]);
      await aws.iam.send(new DeletePolicyCommand({ PolicyArn: physical.get("RelayInvokePolicy")! }));
      expect(ours((await aws.iam.send(new ListPoliciesCommand({ Scope: "Local" }))).Policies?.map((p) => p.PolicyName) ?? [])).toEqual([]);
      expect(ours((await aws.events.send(new ListRulesCommand({}))).Rules?.map((r) => r.Name) ?? [])).toEqual([]);
      expect(ours((await aws.sqs.call<{ QueueUrls?: string[] }>("ListQueues", {})).QueueUrls ?? [])).toEqual([]);
      expect(ours((await aws.ssm.send(new DescribeParametersCommand({}))).Parameters?.map((p) => p.Name) ?? [])).toEqual([]);
    });
  });
});

async function queueUrlAs(aws: AwsClients, name: string): Promise<string> {
  return (await aws.sqs.call<{ QueueUrl: string }>("GetQueueUrl", { QueueName: name })).QueueUrl;
}

/** The deployed inline policies of a role, as action -> resources (moto returns CloudFormation's as a Python repr). */
async function deployedStatements(aws: AwsClients, roleName: string): Promise<Map<string, string[]>> {
  const byAction = new Map<string, string[]>();
  const { PolicyNames } = await aws.iam.send(new ListRolePoliciesCommand({ RoleName: roleName }));
  for (const policyName of PolicyNames ?? []) {
    const { PolicyDocument } = await aws.iam.send(new GetRolePolicyCommand({ RoleName: roleName, PolicyName: policyName }));
    for (const statement of policyDocument(PolicyDocument!).Statement as Json[]) {
      expect(statement.Effect).toBe("Allow");
      for (const action of [statement.Action].flat() as string[]) byAction.set(action, [statement.Resource].flat() as string[]);
    }
  }
  return byAction;
}

async function managedPolicyDocument(aws: AwsClients, policyArn: string): Promise<Json> {
  const { Policy } = await aws.iam.send(new GetPolicyCommand({ PolicyArn: policyArn }));
  const { PolicyVersion } = await aws.iam.send(new GetPolicyVersionCommand({ PolicyArn: policyArn, VersionId: Policy!.DefaultVersionId! }));
  return policyDocument(PolicyVersion!.Document!);
}

/**
 * A policy document as IAM returns it (URL-encoded JSON), or as moto returns the inline policies its
 * CloudFormation created: Python's repr of the object (single quotes; our policies hold no quote, True,
 * False or None, which this conversion would get wrong).
 */
function policyDocument(text: string): Json {
  const decoded = decodeURIComponent(text);
  try {
    return JSON.parse(decoded) as Json;
  } catch {
    if (/True|False|None|\\'|"/.test(decoded)) throw new Error(`cannot read policy document ${decoded}`);
    return JSON.parse(decoded.replaceAll("'", '"')) as Json;
  }
}
