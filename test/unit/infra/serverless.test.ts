/**
 * serverless.yml, checked through what it produces: `osls package` runs offline (dummy credentials)
 * for both function layouts, and the CloudFormation template and the zip are inspected. No services are
 * needed, but packaging bundles with esbuild: the hooks have a generous timeout. The per-phase layout is
 * packaged with its own EventBridge bus (eventBusName) and a trigger source allow-list, so both the default
 * bus and a named one, an empty allow-list and a set one are checked.
 */
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { inflateRawSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import ledgerTable from "../../../infra/deploy/ledger-table.json" with { type: "json" };
import { type FunctionLayout, phaseFunctionKeys, phaseFunctionName } from "../../../src/aws/functionLayout";
import { EXECUTABLE_PHASES, PHASES } from "../../../src/dvm/itinerary";
import { DEFAULT_MIGRATION_POLICY } from "../../../src/dvm/policy";
import { POLICY_ENV, parsePolicyEnv } from "../../../src/dvm/policyConfig";
import { handledEventKey } from "../../../src/events/handledEvents";
import { parseScheduledStage } from "../../../src/events/schedule";
import { MIGRATION_REQUESTED } from "../../../src/events/schema";
import { DEFAULT_LEASE_MS } from "../../../src/runner/runner";
import { CFN_LINT_INSTALL, cfnLint, cfnLintInstalled } from "../../support/cfnLint";
import { type PackagedService, packageService } from "../../support/osls";
import { missing } from "../../support/requirements";

const run = promisify(execFile);
const STAGE = "ci";
const SERVICE = "dvm-serverless";
const LAYOUTS: FunctionLayout[] = ["shared", "per-phase"];
const PACKAGE_TIMEOUT_MS = 240_000;
const TRIGGER = "TriggerLambdaFunction";
/** Lambda's runtime for every function (provider.runtime). */
const RUNTIME = "nodejs24.x";
/** The bus each layout is packaged with ("default" is the account's default bus: no EventBusName). */
const BUS: Record<FunctionLayout, string> = { shared: "default", "per-phase": "dvm-events-ci" };
/** The trigger's allowed sources each layout is packaged with (empty: the default, refuse everything). */
const SOURCES: Record<FunctionLayout, string> = { shared: "", "per-phase": "https://ci.example.com/*,com.example.ci" };
/** The admin namespaces each layout is packaged with, by POLICY_ENV's key as serverless-offline passes it. */
const ADMIN: Record<FunctionLayout, string | undefined> = { shared: undefined, "per-phase": "ops,mig-*" };

/**
 * What each AWS API operation a bundle can call needs in IAM. The operations are read from the bundle
 * itself (the SDK command classes esbuild kept), so a new call without its permission fails here.
 */
const ACTION_OF_OPERATION: Record<string, string> = {
  UpdateItem: "dynamodb:UpdateItem",
  GetItem: "dynamodb:GetItem",
  Query: "dynamodb:Query",
  GetParameter: "ssm:GetParameter",
  PutEvents: "events:PutEvents",
};
/** The SDK's credential providers and DynamoDB endpoint discovery: bundled, never called in Lambda. */
const NOT_CALLED_IN_LAMBDA = new Set(["AssumeRole", "AssumeRoleWithWebIdentity", "CreateToken", "GetRoleCredentials", "DescribeEndpoints"]);

// CloudFormation JSON, read by path: typing every intrinsic function would only restate the template.
// biome-ignore lint/suspicious/noExplicitAny: parsed YAML/JSON, walked freely by the test
type Json = Record<string, any>;
type Packaged = PackagedService;

const packaged = new Map<FunctionLayout, Packaged>();
const scratch = mkdtempSync(join(tmpdir(), "dvm-sls-package-"));

/**
 * A private service directory: a copy of serverless.yml (osls wants a real file) and symlinks to the
 * repository's other top-level entries. osls always writes
 * <service>/.serverless (and serverless-esbuild <service>/.esbuild) before moving the result to
 * --package, so two packagings in one directory (both layouts here, or another test run in parallel)
 * would trip over each other.
 */
async function osPackage(layout: FunctionLayout): Promise<Packaged> {
  const params = [
    `--param=functionLayout=${layout}`,
    ...(BUS[layout] === "default" ? [] : [`--param=eventBusName=${BUS[layout]}`]),
    ...(SOURCES[layout] ? [`--param=triggerAllowedSources=${SOURCES[layout]}`] : []),
    ...(ADMIN[layout] ? [`--param=${keyOf(POLICY_ENV, POLICY_ENV.adminNamespaces)}=${ADMIN[layout]}`] : []),
  ];
  return packageService({ stage: STAGE, scratch, name: layout, params, timeoutMs: PACKAGE_TIMEOUT_MS });
}

beforeAll(async () => {
  const results = await Promise.all(LAYOUTS.map(osPackage));
  for (const [i, layout] of LAYOUTS.entries()) packaged.set(layout, results[i]!);
}, PACKAGE_TIMEOUT_MS * 2);

afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const get = (layout: FunctionLayout) => packaged.get(layout)!;
const ofType = (resources: Json, type: string) => Object.entries(resources).filter(([, r]) => r.Type === type) as [string, Json][];
const logicalId = (key: string) => `${key.charAt(0).toUpperCase()}${key.slice(1)}LambdaFunction`;
const getAtt = (id: string, attribute = "Arn") => ({ "Fn::GetAtt": [id, attribute] });
/** The phase functions: every Lambda function but the trigger. */
const phaseFunctionsOf = (resources: Json) => ofType(resources, "AWS::Lambda::Function").filter(([id]) => id !== TRIGGER);

describe.each(LAYOUTS)("osls package, layout %s", (layout) => {
  it("generates the functions from the itinerary table", () => {
    const { resources } = get(layout);
    const functions = phaseFunctionsOf(resources);
    const expected = phaseFunctionKeys(layout).map(logicalId);
    expect(
      ofType(resources, "AWS::Lambda::Function")
        .map(([id]) => id)
        .sort(),
    ).toEqual([...expected, TRIGGER].sort());
    expect(functions.map(([id]) => id).sort()).toEqual([...expected].sort());
    if (layout === "per-phase") {
      expect(functions).toHaveLength(EXECUTABLE_PHASES.length);
      for (const phase of EXECUTABLE_PHASES) {
        const fn = resources[logicalId(`phase${phase}`)];
        expect(fn.Properties.FunctionName).toBe(phaseFunctionName(SERVICE, STAGE, layout, phase));
        expect(fn.Properties.Description).toBe(`${phase}: ${PHASES[phase].description}`);
      }
    } else {
      expect(functions).toHaveLength(1);
      expect(functions[0]![1].Properties.FunctionName).toBe(phaseFunctionName(SERVICE, STAGE, layout, "Started"));
    }
  });

  it("runs every phase function on nodejs24.x with the bundled handler, within the runner's lease", () => {
    for (const [, fn] of phaseFunctionsOf(get(layout).resources)) {
      expect(fn.Properties.Runtime).toBe(RUNTIME);
      expect(fn.Properties.Handler).toBe("functions/phase.handler");
      // A live invocation must never be taken over: the lease outlasts the function timeout.
      expect(fn.Properties.Timeout * 1000).toBeLessThan(DEFAULT_LEASE_MS);
      expect(fn.Properties.Environment.Variables).toMatchObject({
        LEDGER_TABLE_NAME: `${SERVICE}-${STAGE}-ledger`,
        DVM_KUBECONFIG_PARAMETER: `/${SERVICE}/${STAGE}/host-kubeconfig`,
        DVM_EVENTS_SINK: "eventbridge",
        DVM_EVENTS_BUS_NAME: BUS[layout],
        DVM_EVENTS_SOURCE: `${SERVICE}/${STAGE}`,
        // The migration policy: dvm-system unless set, no extra image, the pinned default (blank).
        [POLICY_ENV.adminNamespaces]: ADMIN[layout] ?? "dvm-system",
        [POLICY_ENV.transferImages]: "",
        [POLICY_ENV.defaultTransferImage]: "",
      });
      // Every policy variable is settable by a param of its POLICY_ENV key (blank: the built-in default).
      for (const name of Object.values(POLICY_ENV)) expect(fn.Properties.Environment.Variables).toHaveProperty(name, expect.any(String));
      expect(parsePolicyEnv(fn.Properties.Environment.Variables)).toEqual({
        ...DEFAULT_MIGRATION_POLICY,
        adminNamespaces: (ADMIN[layout] ?? "dvm-system").split(","),
      });
    }
  });

  it("sends events Lambda gave up on to the dead-letter queue, with deliberate retry settings", () => {
    const { resources } = get(layout);
    expect(resources.PhaseFailureQueue?.Type).toBe("AWS::SQS::Queue");
    const configs = ofType(resources, "AWS::Lambda::EventInvokeConfig").filter(([, c]) => c.Properties.FunctionName.Ref !== TRIGGER);
    const functions = phaseFunctionsOf(resources).map(([id]) => id);
    expect(configs.map(([, c]) => c.Properties.FunctionName.Ref).sort()).toEqual([...functions].sort());
    for (const [, config] of configs) {
      expect(config.Properties).toMatchObject({
        Qualifier: "$LATEST",
        MaximumRetryAttempts: 2,
        MaximumEventAgeInSeconds: 3600,
        DestinationConfig: { OnFailure: { Destination: getAtt("PhaseFailureQueue") } },
      });
    }
  });

  it("gives every function a role with exactly the calls its bundle makes, plus its logs and failure queue", () => {
    const { resources, zip } = get(layout);
    const bundles = readZip(zip);
    const functions = ofType(resources, "AWS::Lambda::Function");
    for (const [id, fn] of functions) {
      const bundle = bundles.get(`${fn.Properties.Handler.replace(/\.handler$/, "")}.cjs`)!.toString("utf8");
      const operations = sdkOperations(bundle).filter((op) => !NOT_CALLED_IN_LAMBDA.has(op));
      for (const op of operations) expect(ACTION_OF_OPERATION[op], `${id} calls ${op}: add its IAM action to this test and the role`).toBeDefined();
      const onFailure = ofType(resources, "AWS::Lambda::EventInvokeConfig").find(([, c]) => c.Properties.FunctionName.Ref === id)?.[1].Properties
        .DestinationConfig?.OnFailure;
      const expected = [...operations.map((op) => ACTION_OF_OPERATION[op]!), ...(onFailure ? ["sqs:SendMessage"] : [])];
      const role = resources[roleOf(fn)];
      const granted = statementsOf(role)
        .flatMap((s) => [s.Action].flat() as string[])
        .filter((a) => !a.startsWith("logs:"));
      expect([...new Set(granted)].sort(), id).toEqual([...new Set(expected)].sort());
    }
    // One role per kind of function: the phase functions share the one their identical code needs.
    const roles = new Map(functions.map(([id, fn]) => [id, roleOf(fn)]));
    expect(roles.get(TRIGGER)).toBe("TriggerRole");
    for (const [id] of phaseFunctionsOf(resources)) expect(roles.get(id)).toBe("IamRoleLambdaExecution");
  });

  it("keeps the trigger away from the phase entries of the ledger and the phase functions' kubeconfig", () => {
    const { resources } = get(layout);
    const statements = statementsOf(resources.TriggerRole);
    const actions = statements.flatMap((s) => [s.Action].flat() as string[]);
    expect(actions.filter((a) => a.startsWith("events:") || a.startsWith("lambda:"))).toEqual([]);
    // Its handled-event records only: the partitions src/events/handledEvents.ts names, never a DVM's uid.
    const ledger = statements.filter((s) => [s.Action].flat().some((a: string) => a.startsWith("dynamodb:")));
    expect(ledger).toEqual([
      {
        Effect: "Allow",
        Action: ["dynamodb:GetItem", "dynamodb:UpdateItem"],
        Resource: getAtt("LedgerTable"),
        Condition: { "ForAllValues:StringLike": { "dynamodb:LeadingKeys": ["event#*"] } },
      },
    ]);
    expect(handledEventKey({ source: "s", id: "i" })).toMatch(/^event#/);
    const parameters = statements.filter((s) => [s.Action].flat().includes("ssm:GetParameter")).map((s) => JSON.stringify(s.Resource));
    expect(parameters).toHaveLength(1);
    expect(parameters[0]).toContain(`":parameter","/${SERVICE}/${STAGE}/trigger-kubeconfig"`);
    expect(statements.find((s) => [s.Action].flat().includes("sqs:SendMessage"))?.Resource).toEqual(getAtt("TriggerFailureQueue"));
    expect(statements.find((s) => [s.Action].flat().includes("logs:PutLogEvents"))?.Resource).toEqual(getAtt("TriggerLogGroup"));
  });

  it("grants the functions only the ledger table, the kubeconfig parameter, the queue, the event bus and their logs", () => {
    const { resources } = get(layout);
    const role = resources.IamRoleLambdaExecution;
    const statements = role.Properties.Policies.flatMap((p: Json) => p.PolicyDocument.Statement) as Json[];
    const byAction = new Map<string, unknown>();
    for (const s of statements) {
      expect(s.Effect).toBe("Allow");
      for (const action of [s.Action].flat() as string[]) byAction.set(action, s.Resource);
    }
    expect([...byAction.keys()].sort()).toEqual(
      [
        "dynamodb:Query",
        "dynamodb:UpdateItem",
        "events:PutEvents",
        "logs:CreateLogGroup",
        "logs:CreateLogStream",
        "logs:PutLogEvents",
        "logs:TagResource",
        "sqs:SendMessage",
        "ssm:GetParameter",
      ].sort(),
    );
    // PutEvents on the one bus, by ARN: arn:<partition>:events:<region>:<account>:event-bus/<name>.
    expect(byAction.get("events:PutEvents")).toEqual({
      "Fn::Join": ["", ["arn:", { Ref: "AWS::Partition" }, ":events:", { Ref: "AWS::Region" }, ":", { Ref: "AWS::AccountId" }, ":event-bus/", BUS[layout]]],
    });
    expect(byAction.get("dynamodb:UpdateItem")).toEqual(getAtt("LedgerTable"));
    expect(byAction.get("dynamodb:Query")).toEqual(getAtt("LedgerTable"));
    expect(byAction.get("sqs:SendMessage")).toEqual(getAtt("PhaseFailureQueue"));
    // Exactly the phase functions' kubeconfig parameter: the trigger's is its own role's.
    const parameters = byAction.get("ssm:GetParameter") as unknown[];
    expect(parameters).toHaveLength(1);
    expect(JSON.stringify(parameters[0])).toContain(`":parameter","/${SERVICE}/${STAGE}/host-kubeconfig"`);
    // Log groups are the only resources named by pattern: this service and stage's own.
    for (const action of ["logs:CreateLogStream", "logs:PutLogEvents"]) {
      expect(JSON.stringify(byAction.get(action))).toContain(`log-group:/aws/lambda/${SERVICE}-${STAGE}*:`);
    }
  });

  it("lets the relay invoke the phase functions, by ARN, and nothing else", () => {
    const { resources } = get(layout);
    const policy = resources.RelayInvokePolicy;
    expect(policy.Type).toBe("AWS::IAM::ManagedPolicy");
    const statements = policy.Properties.PolicyDocument.Statement as Json[];
    expect(statements).toHaveLength(1);
    expect(statements[0]).toMatchObject({ Effect: "Allow", Action: ["lambda:InvokeFunction"] });
    // The relay reaches the phase functions only, not the trigger.
    const targets = phaseFunctionsOf(resources).map(([id]) => getAtt(id));
    expect(statements[0]!.Resource).toEqual(expect.arrayContaining(targets));
    expect(statements[0]!.Resource).toHaveLength(targets.length);

    const relay = resources.RelayRole;
    expect(relay.Properties.Policies).toBeUndefined();
    expect(relay.Properties.ManagedPolicyArns).toEqual([{ Ref: "RelayInvokePolicy" }]);
    expect(relay.Properties.AssumeRolePolicyDocument.Statement).toEqual([expect.objectContaining({ Action: "sts:AssumeRole" })]);
  });

  it("uses no wildcard action and no wildcard resource in any IAM statement", () => {
    const { resources } = get(layout);
    const documents = [
      ...ofType(resources, "AWS::IAM::Role").flatMap(([, r]) => (r.Properties.Policies ?? []).map((p: Json) => p.PolicyDocument)),
      ...ofType(resources, "AWS::IAM::ManagedPolicy").map(([, r]) => r.Properties.PolicyDocument),
      ...ofType(resources, "AWS::IAM::Policy").map(([, r]) => r.Properties.PolicyDocument),
    ] as Json[];
    expect(
      ofType(resources, "AWS::IAM::Role")
        .map(([id]) => id)
        .sort(),
    ).toEqual(["IamRoleLambdaExecution", "RelayRole", "TriggerRole", "TriggerSchedulerRole"]);
    for (const statement of documents.flatMap((d) => d.Statement as Json[])) {
      for (const action of [statement.Action].flat() as string[]) expect(action, JSON.stringify(statement)).not.toContain("*");
      for (const resource of [statement.Resource].flat()) {
        expect(resource, JSON.stringify(statement)).not.toBe("*");
        const text = JSON.stringify(resource);
        if (text.includes("*")) expect(text, "only log groups may be matched by pattern").toMatch(/:log-group:\/aws\/lambda\/dvm-serverless-ci\*:/);
      }
    }
  });

  it("defines the ledger table exactly as infra/deploy/ledger-table.json, plus the stage's name", () => {
    const { resources } = get(layout);
    expect(resources.LedgerTable).toEqual({
      ...ledgerTable,
      Properties: { ...ledgerTable.Properties, TableName: `${SERVICE}-${STAGE}-ledger` },
    });
  });

  it("has the trigger function, with its own handler and settings", () => {
    const { resources } = get(layout);
    const trigger = resources[TRIGGER];
    expect(trigger.Properties).toMatchObject({
      FunctionName: `${SERVICE}-${STAGE}-trigger`,
      Handler: "functions/trigger.handler",
      Runtime: RUNTIME,
    });
    expect(roleOf(trigger)).toBe("TriggerRole");
    // Below the HTTP API's 30 s integration limit.
    expect(trigger.Properties.Timeout).toBeLessThanOrEqual(29);
    expect(trigger.Properties.Environment.Variables).toMatchObject({
      POWERTOOLS_SERVICE_NAME: "dvm-trigger",
      TRIGGER_ALLOWED_SOURCES: SOURCES[layout],
      // No namespace unless the operator lists it; admin namespaces refused (src/events/namespaces.ts).
      TRIGGER_ALLOWED_NAMESPACES: "",
      TRIGGER_ALLOW_ADMIN_NAMESPACES: "false",
      // The phase functions' admin namespaces, which it refuses.
      DVM_ADMIN_NAMESPACES: ADMIN[layout] ?? "dvm-system",
      // Its handled-event records (provider.environment gives every function the table).
      LEDGER_TABLE_NAME: `${SERVICE}-${STAGE}-ledger`,
      // Its own identity (infra/deploy/k8s/trigger-rbac.yaml): the phase functions' may not create DVMs.
      DVM_KUBECONFIG_PARAMETER: `/${SERVICE}/${STAGE}/trigger-kubeconfig`,
    });
    // Outgoing events are the phase functions' business.
    expect(trigger.Properties.Environment.Variables.DVM_EVENTS_SINK).toBeUndefined();
  });

  it("keeps trigger events that still fail after Lambda's retries, or that EventBridge cannot deliver, in the trigger's failure queue", () => {
    const { resources } = get(layout);
    expect(resources.TriggerFailureQueue).toMatchObject({
      Type: "AWS::SQS::Queue",
      Properties: { MessageRetentionPeriod: 1209600, SqsManagedSseEnabled: true },
    });
    const [config] = ofType(resources, "AWS::Lambda::EventInvokeConfig").filter(([, c]) => c.Properties.FunctionName.Ref === TRIGGER);
    expect(config?.[1].Properties).toMatchObject({
      Qualifier: "$LATEST",
      MaximumRetryAttempts: 2,
      MaximumEventAgeInSeconds: 3600,
      DestinationConfig: { OnFailure: { Destination: getAtt("TriggerFailureQueue") } },
    });
    const [[, rule]] = ofType(resources, "AWS::Events::Rule").filter(([, r]) => r.Properties.EventPattern) as [[string, Json]];
    expect(rule.Properties.Targets).toEqual([expect.objectContaining({ DeadLetterConfig: { Arn: getAtt("TriggerFailureQueue") } })]);
    // EventBridge may send to the queue for this rule only.
    const [statement] = resources.TriggerFailureQueuePolicy.Properties.PolicyDocument.Statement as Json[];
    expect(statement).toMatchObject({
      Effect: "Allow",
      Principal: { Service: "events.amazonaws.com" },
      Action: "sqs:SendMessage",
      Resource: getAtt("TriggerFailureQueue"),
    });
    const ruleArn = JSON.stringify(statement!.Condition.ArnEquals["aws:SourceArn"]);
    expect(ruleArn).toContain(BUS[layout] === "default" ? `:rule/${rule.Properties.Name}"` : `:rule/${BUS[layout]}/${rule.Properties.Name}"`);
  });

  it("routes POST /migrations of the HTTP API to the trigger, behind IAM authorization", () => {
    const { resources } = get(layout);
    const routes = ofType(resources, "AWS::ApiGatewayV2::Route");
    expect(routes).toHaveLength(1);
    const [, route] = routes[0]!;
    expect(route.Properties).toMatchObject({ RouteKey: "POST /migrations", AuthorizationType: "AWS_IAM" });
    const integrationId = (route.Properties.Target["Fn::Join"][1] as Json[])[1]!.Ref as string;
    expect(resources[integrationId].Properties).toMatchObject({ IntegrationType: "AWS_PROXY", PayloadFormatVersion: "2.0", IntegrationUri: getAtt(TRIGGER) });
    expect(ofType(resources, "AWS::ApiGatewayV2::Authorizer")).toEqual([]);
  });

  it("has an EventBridge rule on the configured bus for the migration request type, targeting the trigger", () => {
    const { resources } = get(layout);
    // The migration request rule (a schedule rule, if a user adds one, has a ScheduleExpression instead).
    const rules = ofType(resources, "AWS::Events::Rule").filter(([, r]) => r.Properties.EventPattern);
    expect(rules).toHaveLength(1);
    const [, rule] = rules[0]!;
    if (SOURCES[layout] === "") {
      // An empty allow-list refuses everything: the rule exists but delivers nothing.
      expect(rule.Properties.State).toBe("DISABLED");
      expect(rule.Properties.EventPattern).toEqual({ "detail-type": [MIGRATION_REQUESTED] });
    } else {
      // The allowed sources, as EventBridge's own source or the wrapped CloudEvent's.
      const sources = [{ prefix: "https://ci.example.com/" }, "com.example.ci"];
      expect(rule.Properties.State).toBe("ENABLED");
      expect(rule.Properties.EventPattern).toEqual({ "detail-type": [MIGRATION_REQUESTED], $or: [{ source: sources }, { detail: { source: sources } }] });
    }
    expect(rule.Properties.Targets).toEqual([expect.objectContaining({ Arn: getAtt(TRIGGER) })]);
    const buses = ofType(resources, "AWS::Events::EventBus");
    if (BUS[layout] === "default") {
      expect(rule.Properties.EventBusName).toBeUndefined();
      expect(buses).toEqual([]);
    } else {
      // A named bus is created by the stack, and the rule sits on it.
      expect(rule.Properties.EventBusName).toBe(BUS[layout]);
      expect(buses.map(([, b]) => b.Properties.Name)).toEqual([BUS[layout]]);
    }
    const permissions = ofType(resources, "AWS::Lambda::Permission").map(([, p]) => p.Properties);
    expect(permissions).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ Principal: "events.amazonaws.com", FunctionName: getAtt(TRIGGER) }),
        expect.objectContaining({ Principal: "apigateway.amazonaws.com", FunctionName: getAtt(TRIGGER) }),
      ]),
    );
  });
});

describe.each(LAYOUTS)("osls package, layout %s: scheduled stages", (layout) => {
  it("ships no schedule rule; the example to add (infra/deploy/serverless/example-schedule.yml) carries the rule event's time into a valid input", () => {
    const { resources } = get(layout);
    expect(ofType(resources, "AWS::Events::Rule").filter(([, r]) => r.Properties.ScheduleExpression)).toEqual([]);
    const [example] = parse(readFileSync(join(import.meta.dirname, "../../../infra/deploy/serverless/example-schedule.yml"), "utf8")) as Json[];
    expect(example!.schedule).toMatchObject({ rate: ["cron(0 2 * * ? *)"], enabled: false, inputTransformer: { inputPathsMap: { time: "$.time" } } });
    // The template is the input the function gets: with the time put in, a valid schedule input.
    const input = JSON.parse((example!.schedule.inputTransformer.inputTemplate as string).replace("<time>", JSON.stringify("2026-12-03T02:00:00Z")));
    expect(parseScheduledStage(input)).toMatchObject({ ok: true, input: { schedule: "example-stage", spec: { migrationType: "Stage" } } });
  });

  it("gives EventBridge Scheduler a role that may invoke the trigger and nothing else, assumed by Scheduler only", () => {
    const { resources } = get(layout);
    const role = resources.TriggerSchedulerRole;
    expect(role.Properties.AssumeRolePolicyDocument.Statement).toEqual([
      expect.objectContaining({ Principal: { Service: "scheduler.amazonaws.com" }, Action: "sts:AssumeRole" }),
    ]);
    const statements = statementsOf(role);
    expect(statements.flatMap((s) => [s.Action].flat())).toEqual(["lambda:InvokeFunction"]);
    expect(JSON.stringify(statements[0]!.Resource)).toContain(`:function:${SERVICE}-${STAGE}-trigger"`);
    expect(resources[TRIGGER].Properties.FunctionName).toBe(`${SERVICE}-${STAGE}-trigger`);
    expect(resources[TRIGGER].Properties.Environment.Variables.TRIGGER_SCHEDULE_HISTORY_LIMIT).toBe("3");
  });
});

describe.skipIf(missing("cfn-lint", cfnLintInstalled(), CFN_LINT_INSTALL)).each(LAYOUTS)("cfn-lint, layout %s", (layout) => {
  const templates = ["cloudformation-template-update-stack.json", "cloudformation-template-create-stack.json"];

  it.each(templates)(
    "finds no error and no warning in %s",
    async (template) => {
      expect(await cfnLint(join(get(layout).dir, template))).toEqual([]);
    },
    120_000,
  );

  it("is silenced only for the framework's own W3005 on the HTTP API route, which it would report", async () => {
    const { dir, template } = get(layout);
    // No template-wide suppression, and only the route (osls's, not ours) carries one.
    expect(template.Metadata).toBeUndefined();
    const silenced = Object.entries(template.Resources as Json).filter(([, r]) => r.Metadata?.["cfn-lint"]);
    expect(silenced.map(([id, r]) => [id, r.Metadata["cfn-lint"]])).toEqual([["HttpApiRoutePostMigrations", { config: { ignore_checks: ["W3005"] } }]]);
    // Without it, cfn-lint reports exactly that warning: the suppression hides nothing else.
    const bare = JSON.parse(readFileSync(join(dir, templates[0]!), "utf8")) as Json;
    delete bare.Resources.HttpApiRoutePostMigrations.Metadata;
    const file = join(scratch, `bare-${layout}.json`);
    writeFileSync(file, JSON.stringify(bare, null, 2));
    const findings = await cfnLint(file);
    expect(findings).toHaveLength(1);
    expect(findings[0]).toMatch(/:W3005:'HttpApiIntegrationTrigger' dependency already enforced by a 'Ref' at 'Resources\/HttpApiRoutePostMigrations\//);
  }, 120_000);
});

describe("the deployment package", () => {
  it("holds only the bundles, which load in a fresh Node process", async () => {
    const { zip } = get("shared");
    const entries = readZip(zip);
    expect([...entries.keys()].sort()).toEqual(["functions/phase.cjs", "functions/trigger.cjs"]);
    for (const name of ["phase", "trigger"]) {
      const bundle = join(scratch, `${name}.cjs`);
      writeFileSync(bundle, entries.get(`functions/${name}.cjs`)!);
      // Loading runs module scope (Powertools, middy, the SDK clients' imports): nothing may need the network or env.
      const { stdout } = await run(process.execPath, ["-e", `const m = require(${JSON.stringify(bundle)}); process.stdout.write(typeof m.handler)`], {
        env: { PATH: process.env.PATH ?? "" },
        timeout: 60_000,
      });
      expect(stdout, name).toBe("function");
    }
  }, 90_000);

  it("is the same code for both layouts", () => {
    for (const file of ["functions/phase.cjs", "functions/trigger.cjs"]) {
      const shared = readZip(get("shared").zip).get(file);
      const perPhase = readZip(get("per-phase").zip).get(file);
      expect(perPhase?.equals(shared!), file).toBe(true);
    }
  });
});

function keyOf<T extends Record<string, string>>(record: T, value: string): string {
  return Object.entries(record).find(([, v]) => v === value)![0];
}

/** The logical id of a function's role: `Fn::GetAtt [id, Arn]`, or `Fn::Sub "${id.Arn}"` (no redundant DependsOn). */
function roleOf(fn: Json): string {
  const role = fn.Properties.Role;
  if (role["Fn::GetAtt"]) return role["Fn::GetAtt"][0];
  const sub = /^\$\{(\w+)\.Arn\}$/.exec(role["Fn::Sub"] ?? "");
  if (!sub) throw new Error(`unexpected Role ${JSON.stringify(role)}`);
  return sub[1]!;
}

function statementsOf(role: Json): Json[] {
  return role.Properties.Policies.flatMap((p: Json) => p.PolicyDocument.Statement) as Json[];
}

/** The AWS API operations whose SDK command classes a minified bundle holds (`class extends f(a,b,"Op",c){}`). */
function sdkOperations(bundle: string): string[] {
  const found = bundle.matchAll(/class extends [\w$]+\([\w$]+,[\w$]+,"([A-Za-z]+)",[\w$]+\)\{\}/g);
  return [...new Set([...found].map((m) => m[1]!))].sort();
}

/** The entries of a zip file (stored or deflated), from its central directory. */
function readZip(zip: Buffer): Map<string, Buffer> {
  const end = zip.lastIndexOf(Buffer.from([0x50, 0x4b, 0x05, 0x06]));
  if (end < 0) throw new Error("not a zip file");
  const count = zip.readUInt16LE(end + 10);
  let at = zip.readUInt32LE(end + 16);
  const entries = new Map<string, Buffer>();
  for (let i = 0; i < count; i++) {
    const method = zip.readUInt16LE(at + 10);
    const compressedSize = zip.readUInt32LE(at + 20);
    const nameLength = zip.readUInt16LE(at + 28);
    const extraLength = zip.readUInt16LE(at + 30);
    const commentLength = zip.readUInt16LE(at + 32);
    const localHeader = zip.readUInt32LE(at + 42);
    const name = zip.toString("utf8", at + 46, at + 46 + nameLength);
    const dataStart = localHeader + 30 + zip.readUInt16LE(localHeader + 26) + zip.readUInt16LE(localHeader + 28);
    const data = zip.subarray(dataStart, dataStart + compressedSize);
    if (!name.endsWith("/")) entries.set(name, method === 8 ? inflateRawSync(data) : Buffer.from(data));
    at += 46 + nameLength + extraLength + commentLength;
  }
  return entries;
}
