/**
 * The local controller's configuration (`npm start`, infra/dev/local/start.ts) and the development tools' settings
 * (the local clusters, DynamoDB Local, serverless-offline under infra/dev/local/): every variable they read,
 * checked here, once. The controller gets its settings as a typed object (LocalControllerOptions) and
 * hands each part on the same way (the relay a RelayConfig, the SDK clients their endpoint, region and
 * credentials, the phase function behind serverless-offline its own environment): it never writes
 * process.env.
 *
 * `npm start`:
 *   KUBECONFIG                   the cluster to watch (--kubeconfig wins); unset: two embedded clusters
 *   AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL
 *                                the ledger's DynamoDB; unset: DynamoDB Local, started for the run
 *   AWS_REGION                   default us-east-1
 *   AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY
 *                                for that DynamoDB; unset: the SDK's own chain for an existing DynamoDB,
 *                                dummy ones for DynamoDB Local (local endpoints check none)
 *   LOG_LEVEL                    the relay's log level: debug, info (default), warn, error
 * Development tools:
 *   DVM_CACHE_DIR                cache root (default ~/.cache/dvm-controlplane for binaries,
 *                                ~/.cache/dvm-dynamodb-local for DynamoDB Local)
 *   DVM_CONTROLPLANE_BIN         the control-plane binaries' folder (default <cache>/bin)
 *   DVM_DYNAMODB_SIMULATOR_VERSION  the amplify-dynamodb-simulator release DynamoDB Local comes from (2.9.30)
 *   DVM_KEEP_LOGS                set: keep serverless-offline's log after it stops
 *   DVM_LAMBDA_RUNTIME_DIR       where infra/dev/lambda/build.sh put AWS's Lambda runtime (Node 24,
 *                                aws-lambda-rie, aws-lambda-ric; default ~/.cache/dvm-lambda-runtime)
 *   PATH                         where node mode looks for its tools
 */

import { homedir } from "node:os";
import { join } from "node:path";
import { z } from "zod";
import { ENV, type Environment, logLevel, optional, optionalText, parseEnvironment } from "../../../src/config/environment";
import { definedFields } from "../../../src/lib/definedFields";
import type { LogLevel } from "../../../src/lib/log";

/** This process's environment: the one read of process.env for `npm start` and infra/dev/local/. */
export function localEnvironment(): Environment {
  return process.env;
}

/** A child process's environment: this process's, with `settings` on top (children inherit, as a shell's do). */
export function childEnvironment(settings: Environment = {}): NodeJS.ProcessEnv {
  return { ...process.env, ...settings };
}

const url = z
  .string()
  .trim()
  .pipe(z.url({ protocol: /^https?$/, error: "must be an http(s) URL" }));

const LocalControllerEnvSchema = z.object({
  [ENV.kubeconfig]: optionalText(),
  [ENV.awsDynamoEndpoint]: optionalText().pipe(url.optional()),
  [ENV.awsEndpoint]: optionalText().pipe(url.optional()),
  [ENV.awsRegion]: optionalText(),
  [ENV.awsAccessKeyId]: optionalText(),
  [ENV.awsSecretAccessKey]: optionalText(),
  [ENV.logLevel]: logLevel(),
});

export interface AwsAccess {
  region: string;
  /** Unset: dummy ones for a local DynamoDB, the SDK's own chain (profile, SSO...) for an existing one. */
  credentials?: { accessKeyId: string; secretAccessKey: string };
}

export interface LocalControllerEnv {
  kubeconfig?: string;
  /** An existing DynamoDB for the ledger; unset: DynamoDB Local. */
  dynamoEndpoint?: string;
  aws: AwsAccess;
  logLevel: LogLevel;
}

/** The local endpoints need credentials the SDK accepts; nothing checks them. */
export const LOCAL_CREDENTIALS = { accessKeyId: "dvmlocal", secretAccessKey: "dvmlocal" };
export const LOCAL_REGION = "us-east-1";

/** `npm start`'s settings; throws ConfigurationError naming every bad variable. */
export function parseLocalControllerEnv(env: Environment): LocalControllerEnv {
  const e = parseEnvironment(LocalControllerEnvSchema, env, "local controller configuration");
  const accessKeyId = e[ENV.awsAccessKeyId];
  const secretAccessKey = e[ENV.awsSecretAccessKey];
  const dynamoEndpoint = e[ENV.awsDynamoEndpoint] ?? e[ENV.awsEndpoint];
  // optionalText() makes a blank variable undefined: dropping undefined drops every unset one.
  return definedFields({
    kubeconfig: e[ENV.kubeconfig],
    dynamoEndpoint,
    aws: {
      region: e[ENV.awsRegion] ?? LOCAL_REGION,
      ...(accessKeyId && secretAccessKey ? { credentials: { accessKeyId, secretAccessKey } } : {}),
    },
    logLevel: e[ENV.logLevel],
  });
}

const ToolsEnvSchema = z.object({
  [ENV.cacheDir]: optionalText(),
  [ENV.controlPlaneBin]: optionalText(),
  [ENV.dynamoSimulatorVersion]: optional(
    z
      .string()
      .trim()
      .regex(/^\d+\.\d+\.\d+$/, "must be a version such as 2.9.30"),
  ).default("2.9.30"),
  [ENV.keepLogs]: optionalText(),
  [ENV.path]: z.string().default(""),
});

export interface LocalToolsConfig {
  /** The control-plane binaries. */
  controlPlaneBin: string;
  /** Where DynamoDB Local's releases are cached, one folder per version. */
  dynamoLocalCache: string;
  dynamoSimulatorVersion: string;
  keepLogs: boolean;
  /** PATH's folders. */
  path: string[];
}

let tools: LocalToolsConfig | undefined;

/** The development tools' settings, read once per process; throws ConfigurationError naming a bad variable. */
export function localTools(): LocalToolsConfig {
  if (tools) return tools;
  const e = parseEnvironment(ToolsEnvSchema, process.env, "development tools configuration");
  const cacheDir = e[ENV.cacheDir];
  tools = {
    controlPlaneBin: e[ENV.controlPlaneBin] ?? join(cacheDir ?? join(homedir(), ".cache/dvm-controlplane"), "bin"),
    dynamoLocalCache: cacheDir ?? join(homedir(), ".cache", "dvm-dynamodb-local"),
    dynamoSimulatorVersion: e[ENV.dynamoSimulatorVersion],
    keepLogs: e[ENV.keepLogs] !== undefined,
    path: e[ENV.path].split(":").filter(Boolean),
  };
  return tools;
}
