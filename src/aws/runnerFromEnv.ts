/**
 * The phase function's runner, built from its environment once per container:
 *   LEDGER_TABLE_NAME          the ledger table (set by serverless.yml)
 *   DVM_KUBECONFIG_PARAMETER   SSM SecureString with the host kubeconfig; unset: the KUBECONFIG file
 * DynamoDB and SSM endpoints follow the SDK's own settings (AWS_ENDPOINT_URL, AWS_ENDPOINT_URL_DYNAMODB, ...).
 */
import type { Logger } from "../log";
import type { PhaseRunner } from "../runner/runner";
import { createPhaseRunner } from "../runtime/phaseRunner";
import { ConfigurationError } from "./errors";
import { kubeconfigSourceFromEnv } from "./kubeconfigSource";
import { onceAsync } from "./once";

export const LEDGER_TABLE_ENV = "LEDGER_TABLE_NAME";

export function runnerFromEnv(env: NodeJS.ProcessEnv, log: Logger): () => Promise<PhaseRunner> {
  const hostKubeConfig = kubeconfigSourceFromEnv(env);
  return onceAsync(async () => {
    const ledgerTableName = env[LEDGER_TABLE_ENV]?.trim();
    if (!ledgerTableName) throw new ConfigurationError(`${LEDGER_TABLE_ENV} is not set`);
    return createPhaseRunner({ hostKubeConfig: await hostKubeConfig(), ledgerTableName, log });
  });
}
