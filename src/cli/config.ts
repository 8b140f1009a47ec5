/**
 * The `dvm` command's configuration: every variable it reads, checked here, once (flags win over them).
 *   KUBECONFIG                 the host cluster's kubeconfig file(s), joined by the path delimiter
 *   HOME                       where ~/.kube/config is looked for
 *   KUBERNETES_SERVICE_HOST    set inside a pod: the pod's service account when nothing else is configured
 *   LEDGER_TABLE_NAME          the ledger table (--table)
 *   AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL
 *                              the ledger's DynamoDB (--dynamodb-endpoint); unset: AWS
 *   AWS_REGION, AWS_DEFAULT_REGION
 *   AWS_ACCESS_KEY_ID, AWS_PROFILE, AWS_WEB_IDENTITY_TOKEN_FILE
 *                              whether the SDK has credentials of its own; without any, a local endpoint
 *                              gets the dummy ones DynamoDB Local needs
 *   DVM_CLI_DEBUG              set: print the stack of an unexpected error
 * Commands get the environment through CliIo (io.ts), so tests pass their own.
 */
import { delimiter } from "node:path";
import { z } from "zod";
import { ENV, type Environment, optionalText, parseEnvironment } from "../config/environment";
import { definedFields } from "../lib/definedFields";

/** The `dvm` process's environment: the one read of process.env for the CLI. */
export function cliEnvironment(): Environment {
  // The SDK's notice about future Node versions is for the project's maintainers, not for each command
  // run; the SDK reads this switch from the environment only.
  process.env[ENV.awsSdkNodeVersionWarningDisabled] ??= "true";
  return process.env;
}

const CliEnvSchema = z.object({
  [ENV.kubeconfig]: optionalText(),
  [ENV.home]: optionalText(),
  [ENV.kubernetesServiceHost]: optionalText(),
  [ENV.ledgerTable]: optionalText(),
  [ENV.awsDynamoEndpoint]: optionalText(),
  [ENV.awsEndpoint]: optionalText(),
  [ENV.awsRegion]: optionalText(),
  [ENV.awsDefaultRegion]: optionalText(),
  [ENV.awsAccessKeyId]: optionalText(),
  [ENV.awsProfile]: optionalText(),
  [ENV.awsWebIdentityTokenFile]: optionalText(),
  [ENV.cliDebug]: optionalText(),
});

export interface CliEnv {
  kubeconfigFiles: string[];
  home?: string;
  inCluster: boolean;
  ledgerTable?: string;
  dynamoEndpoint?: string;
  region?: string;
  /** The SDK will find credentials of its own (keys, a profile, a web identity). */
  hasAwsCredentials: boolean;
  debug: boolean;
}

/** The CLI's settings; throws ConfigurationError naming a bad variable. */
export function parseCliEnv(env: Environment): CliEnv {
  const e = parseEnvironment(CliEnvSchema, env, "dvm configuration");
  const home = e[ENV.home];
  const ledgerTable = e[ENV.ledgerTable];
  const dynamoEndpoint = e[ENV.awsDynamoEndpoint] ?? e[ENV.awsEndpoint];
  const region = e[ENV.awsRegion] ?? e[ENV.awsDefaultRegion];
  // optionalText() makes a blank variable undefined: dropping undefined drops every unset one.
  return definedFields({
    kubeconfigFiles: (e[ENV.kubeconfig] ?? "").split(delimiter).filter(Boolean),
    home,
    inCluster: e[ENV.kubernetesServiceHost] !== undefined,
    ledgerTable,
    dynamoEndpoint,
    region,
    hasAwsCredentials: Boolean(e[ENV.awsAccessKeyId] || e[ENV.awsProfile] || e[ENV.awsWebIdentityTokenFile]),
    debug: e[ENV.cliDebug] !== undefined,
  });
}
