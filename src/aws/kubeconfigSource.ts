/**
 * The host cluster's kubeconfig for the phase function. On AWS it is a SecureString in SSM Parameter
 * Store (DVM_KUBECONFIG_PARAMETER, see phaseConfig.ts and triggerConfig.ts); without that setting (local runs, serverless-offline) it is the
 * KUBECONFIG file, as kubectl reads it. Loaded once per source; the phase function makes a new source
 * when an API server refuses the credential (401), see reloadingRunner.ts.
 *
 * The kubeconfig holds credentials: its text is never logged, and parse errors are replaced by a
 * message that cannot quote it (YAML errors echo the offending line).
 */
import { GetParameterCommand, SSMClient } from "@aws-sdk/client-ssm";
import { ENV } from "../config/environment";
import { ConfigurationError } from "../config/error";
import { KubeConfig } from "../kube/kubeConfig";
import { onceAsync } from "./once";

export interface KubeconfigSourceOptions {
  /** SSM parameter name (SecureString). Unset or empty: the KUBECONFIG file. */
  parameterName?: string | undefined;
  /** Default: an SSM client for AWS_ENDPOINT_URL_SSM / AWS_ENDPOINT_URL or AWS, created on first use. */
  ssm?: Pick<SSMClient, "send">;
  /** Default: KubeConfig.loadFromDefault (KUBECONFIG, then ~/.kube/config, then in-cluster). */
  loadLocal?: () => KubeConfig;
}

export type KubeconfigSource = () => Promise<KubeConfig>;

export function createKubeconfigSource(options: KubeconfigSourceOptions = {}): KubeconfigSource {
  const parameterName = options.parameterName?.trim();
  if (!parameterName) return onceAsync(async () => (options.loadLocal ?? loadDefaultKubeConfig)());
  return onceAsync(async () => {
    const ssm = options.ssm ?? new SSMClient({});
    const { Parameter } = await ssm.send(new GetParameterCommand({ Name: parameterName, WithDecryption: true }));
    if (!Parameter?.Value) throw new ConfigurationError(`SSM parameter ${parameterName} has no value`, parameterName);
    return parseKubeConfig(Parameter.Value, `SSM parameter ${parameterName}`);
  });
}

/** Parses kubeconfig text; the error names where it came from, never what it contains. */
export function parseKubeConfig(text: string, origin: string): KubeConfig {
  const kc = new KubeConfig();
  try {
    kc.loadFromString(text);
  } catch {
    throw new ConfigurationError(`${origin} does not hold a valid kubeconfig (content not shown)`);
  }
  if (!kc.getCurrentCluster()) throw new ConfigurationError(`${origin}: kubeconfig has no current context with a cluster`);
  return kc;
}

function loadDefaultKubeConfig(): KubeConfig {
  const kc = new KubeConfig();
  try {
    kc.loadFromDefault();
  } catch {
    throw new ConfigurationError(`the ${ENV.kubeconfig} file could not be read as a kubeconfig (content not shown)`, ENV.kubeconfig);
  }
  if (!kc.getCurrentCluster()) throw new ConfigurationError(`no host cluster: set ${ENV.kubeconfig} or ${ENV.kubeconfigParameter}`, ENV.kubeconfig);
  return kc;
}
