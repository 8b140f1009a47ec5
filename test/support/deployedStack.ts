/**
 * The stack as a user deploys it (docs/operations.md, "Deploy" and "Dry run against moto"): the kubeconfig
 * SecureStrings first, then `osls deploy --stage <stage>` from a private copy of the service folder (its
 * .serverless stays in the caller's scratch directory), against the AWS API at `endpoint` (moto's server).
 * `removeStack` is `osls remove`. Other suites (e.g. running the deployed zip under Lambda's runtime
 * emulator) reuse both: the deployed functions' configuration and code come from the emulator, not the tree.
 */
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { CloudFormationClient, DescribeStacksCommand, ListStackResourcesCommand } from "@aws-sdk/client-cloudformation";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { EventBridgeClient } from "@aws-sdk/client-eventbridge";
import { IAMClient } from "@aws-sdk/client-iam";
import { type FunctionConfiguration, GetFunctionCommand, LambdaClient } from "@aws-sdk/client-lambda";
import { GetObjectCommand, S3Client } from "@aws-sdk/client-s3";
import { PutParameterCommand, SSMClient } from "@aws-sdk/client-ssm";
import { STSClient } from "@aws-sdk/client-sts";
import { MOTO_CREDENTIALS } from "./moto";
import { ROOT, serviceCopy } from "./osls";
import { type AwsCredentials, SqsJsonClient } from "./sqsJson";

const run = promisify(execFile);
export const SERVICE = "dvm-serverless";
export const TRIGGER_LOGICAL_ID = "TriggerLambdaFunction";

// biome-ignore lint/suspicious/noExplicitAny: CloudFormation JSON, read by path
type Json = Record<string, any>;

export interface DeployOptions {
  /** The AWS API (moto's server); the SDK and osls reach every service through AWS_ENDPOINT_URL. */
  endpoint: string;
  region: string;
  /** A stage of the test's own (Lambda names are <service>-<stage>-<function>). */
  stage: string;
  /** `--param=name=value` items, as docs/operations.md lists them. */
  params?: string[];
  /** Scratch directory for the service copy and osls's output. */
  scratch: string;
  /** SecureStrings written before deploying, as the docs' step 3 does: the functions read them at run time. */
  kubeconfigs?: { host?: string; trigger?: string };
  timeoutMs?: number;
}

export interface AwsClients {
  lambda: LambdaClient;
  iam: IAMClient;
  sts: STSClient;
  dynamodb: DynamoDBClient;
  ssm: SSMClient;
  events: EventBridgeClient;
  s3: S3Client;
  cloudformation: CloudFormationClient;
  sqs: SqsJsonClient;
  destroy(): void;
}

export function awsClients(endpoint: string, region: string, credentials: AwsCredentials = MOTO_CREDENTIALS): AwsClients {
  const config = { endpoint, region, credentials, maxAttempts: 1 };
  const clients = {
    lambda: new LambdaClient(config),
    iam: new IAMClient(config),
    sts: new STSClient(config),
    dynamodb: new DynamoDBClient(config),
    ssm: new SSMClient(config),
    events: new EventBridgeClient(config),
    s3: new S3Client({ ...config, forcePathStyle: true }),
    cloudformation: new CloudFormationClient(config),
  };
  return {
    ...clients,
    sqs: new SqsJsonClient({ endpoint, region, credentials }),
    destroy: () => {
      for (const client of Object.values(clients)) client.destroy();
    },
  };
}

export interface DeployedStack {
  stage: string;
  stackName: string;
  endpoint: string;
  region: string;
  /** The service copy osls ran in (its .serverless holds what was deployed). */
  serviceDir: string;
  /** The template osls deployed (.serverless/cloudformation-template-update-stack.json). */
  template: Json;
  /** CloudFormation's outputs of the stack, read back from the emulator. */
  outputs: Record<string, string>;
  /** Physical ids by logical id, as CloudFormation lists the stack's resources (only those it created). */
  physicalIds: Map<string, string>;
  /** The deployed Lambda function names: the phase function(s), then the trigger. */
  phaseFunctionNames: string[];
  triggerFunctionName: string;
  /** How long `osls deploy` took, as measured here. */
  deployMs: number;
  /** params passed to osls, for a later remove with the same settings. */
  params: string[];
  /** The function's configuration as the emulator holds it (GetFunction). */
  functionConfiguration(name: string): Promise<FunctionConfiguration>;
  /** The function's code zip as the emulator holds it: the object osls uploaded, that Code.Location names. */
  codeZip(name: string): Promise<Buffer>;
}

function oslsEnv(options: { endpoint: string; region: string }): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  // Only the one endpoint: a per-service one left in the environment (CI's DynamoDB Local) would win.
  for (const [name, value] of Object.entries(process.env)) if (!name.startsWith("AWS_")) env[name] = value;
  return {
    ...env,
    AWS_ENDPOINT_URL: options.endpoint,
    AWS_ACCESS_KEY_ID: MOTO_CREDENTIALS.accessKeyId,
    AWS_SECRET_ACCESS_KEY: MOTO_CREDENTIALS.secretAccessKey,
    AWS_REGION: options.region,
    DVM_ESBUILD_WORK_FOLDER: "",
  };
}

async function osls(command: "deploy" | "remove", serviceDir: string, options: DeployOptions, params: string[]): Promise<number> {
  const started = Date.now();
  try {
    await run(join(ROOT, "node_modules", ".bin", "osls"), [command, "--stage", options.stage, ...params], {
      cwd: serviceDir,
      timeout: options.timeoutMs ?? 480_000,
      maxBuffer: 16 << 20,
      env: oslsEnv(options),
    });
  } catch (error) {
    const e = error as { stdout?: string; stderr?: string; message: string };
    throw new Error(`osls ${command} --stage ${options.stage} failed: ${e.message}\n${e.stdout ?? ""}\n${e.stderr ?? ""}`);
  }
  return Date.now() - started;
}

export async function deployStack(options: DeployOptions): Promise<DeployedStack> {
  const params = (options.params ?? []).map((p) => `--param=${p}`);
  const aws = awsClients(options.endpoint, options.region);
  try {
    for (const [which, value] of Object.entries(options.kubeconfigs ?? {})) {
      if (value === undefined) continue;
      await aws.ssm.send(
        new PutParameterCommand({ Name: `/${SERVICE}/${options.stage}/${which}-kubeconfig`, Type: "SecureString", Value: value, Overwrite: true }),
      );
    }
    const serviceDir = serviceCopy(options.scratch, options.stage);
    const deployMs = await osls("deploy", serviceDir, options, params);
    const template = JSON.parse(readFileSync(join(serviceDir, ".serverless", "cloudformation-template-update-stack.json"), "utf8")) as Json;
    const stackName = `${SERVICE}-${options.stage}`;
    const { Stacks } = await aws.cloudformation.send(new DescribeStacksCommand({ StackName: stackName }));
    const outputs = Object.fromEntries((Stacks?.[0]?.Outputs ?? []).map((o) => [o.OutputKey!, o.OutputValue!]));
    const listed = await aws.cloudformation.send(new ListStackResourcesCommand({ StackName: stackName }));
    const physicalIds = new Map(
      (listed.StackResourceSummaries ?? []).flatMap((r) =>
        r.LogicalResourceId && r.PhysicalResourceId ? [[r.LogicalResourceId, r.PhysicalResourceId] as const] : [],
      ),
    );
    const bucket = physicalIds.get("ServerlessDeploymentBucket");
    const functions = Object.entries(template.Resources as Json).filter(([, r]) => r.Type === "AWS::Lambda::Function");
    const nameOf = (id: string): string => (template.Resources as Json)[id].Properties.FunctionName;
    const { endpoint, region, stage } = options;
    return {
      stage,
      stackName,
      endpoint,
      region,
      serviceDir,
      template,
      outputs,
      physicalIds,
      phaseFunctionNames: functions.filter(([id]) => id !== TRIGGER_LOGICAL_ID).map(([id]) => nameOf(id)),
      triggerFunctionName: nameOf(TRIGGER_LOGICAL_ID),
      deployMs,
      params: options.params ?? [],
      functionConfiguration: async (name) => {
        const clients = awsClients(endpoint, region);
        try {
          const { Configuration } = await clients.lambda.send(new GetFunctionCommand({ FunctionName: name }));
          return Configuration!;
        } finally {
          clients.destroy();
        }
      },
      codeZip: async (name) => {
        const clients = awsClients(endpoint, region);
        try {
          const { Code } = await clients.lambda.send(new GetFunctionCommand({ FunctionName: name }));
          // https://<bucket-of-Lambda>/<key>: the key is the deployment bucket's object osls uploaded.
          const key = decodeURIComponent(new URL(Code!.Location!).pathname.slice(1));
          const object = await clients.s3.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
          return Buffer.from(await object.Body!.transformToByteArray());
        } finally {
          clients.destroy();
        }
      },
    };
  } finally {
    aws.destroy();
  }
}

/** `osls remove` of the stack, with the settings it was deployed with; returns how long it took. */
export async function removeStack(stack: DeployedStack, options: { scratch?: string; timeoutMs?: number } = {}): Promise<number> {
  const deployOptions: DeployOptions = { endpoint: stack.endpoint, region: stack.region, stage: stack.stage, scratch: options.scratch ?? "" };
  if (options.timeoutMs !== undefined) deployOptions.timeoutMs = options.timeoutMs;
  return osls(
    "remove",
    stack.serviceDir,
    deployOptions,
    stack.params.map((p) => `--param=${p}`),
  );
}
