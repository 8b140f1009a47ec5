/**
 * The phase function's runner, built from its environment once per container:
 *   LEDGER_TABLE_NAME          the ledger table (set by serverless.yml)
 *   DVM_KUBECONFIG_PARAMETER   SSM SecureString with the host kubeconfig; unset: the KUBECONFIG file
 *   DVM_EVENTS_*               outgoing CloudEvents (src/aws/eventPublisherFromEnv.ts); unset: none
 *   DVM_ADMIN_NAMESPACES, DVM_TRANSFER_IMAGES, DVM_DEFAULT_TRANSFER_IMAGE
 *                              the migration policy (src/dvm/policyConfig.ts)
 * DynamoDB and SSM endpoints follow the SDK's own settings (AWS_ENDPOINT_URL, AWS_ENDPOINT_URL_DYNAMODB, ...).
 *
 * With events on, every completed phase queues its events (runner onResult, one ledger read) and every
 * invocation ends by waiting for them at most DVM_EVENTS_FLUSH_MS; sending never fails an invocation.
 */
import type { MigrationPolicy } from "../dvm/policy";
import { parsePolicyEnv } from "../dvm/policyConfig";
import { type FlushingRunner, phaseEventsHook, withEventFlush } from "../events/runnerEvents";
import { createLedgerClient, DynamoPhaseLedger } from "../ledger";
import type { Logger } from "../log";
import { createPhaseRunner, type PhaseRunnerConfig } from "../runner/phaseRunner";
import { ConfigurationError } from "./errors";
import { type PhaseEvents, type PhaseEventsFromEnvOptions, phaseEventsFromEnv } from "./eventPublisherFromEnv";
import { kubeconfigSourceFromEnv } from "./kubeconfigSource";
import { onceAsync } from "./once";

export const LEDGER_TABLE_ENV = "LEDGER_TABLE_NAME";

/** The operator's migration policy; a bad setting is a configuration error naming the variable. */
function migrationPolicyFromEnv(env: NodeJS.ProcessEnv): MigrationPolicy {
  try {
    return parsePolicyEnv(env);
  } catch (error) {
    throw new ConfigurationError(error instanceof Error ? error.message : String(error));
  }
}

export function runnerFromEnv(env: NodeJS.ProcessEnv, log: Logger, options: PhaseEventsFromEnvOptions = {}): () => Promise<FlushingRunner> {
  const hostKubeConfig = kubeconfigSourceFromEnv(env);
  const events = phaseEventsFromEnv(env, log, options);
  return onceAsync(async () => {
    const ledgerTableName = env[LEDGER_TABLE_ENV]?.trim();
    if (!ledgerTableName) throw new ConfigurationError(`${LEDGER_TABLE_ENV} is not set`);
    const policy = migrationPolicyFromEnv(env);
    if (!events) return createPhaseRunner({ hostKubeConfig: await hostKubeConfig(), ledgerTableName, log, policy });
    // One DynamoDB client for the runner's ledger and the events' history reads.
    return createPhaseRunnerWithEvents({ hostKubeConfig: await hostKubeConfig(), ledgerTableName, log, policy, dynamo: createLedgerClient() }, events);
  });
}

/**
 * A runner whose completed phases send events and whose every invocation ends with a bounded flush.
 * The composition runnerFromEnv uses; tests call it with their own clients.
 */
export function createPhaseRunnerWithEvents(config: PhaseRunnerConfig & Required<Pick<PhaseRunnerConfig, "dynamo">>, events: PhaseEvents): FlushingRunner {
  const ledger = new DynamoPhaseLedger({ client: config.dynamo, tableName: config.ledgerTableName });
  const hook = phaseEventsHook({
    publisher: events.publisher,
    history: (uid) => ledger.history(uid),
    source: events.source,
    ...(config.log ? { log: config.log } : {}),
  });
  const runner = createPhaseRunner({
    ...config,
    onResult: (result, stats, dvm) => {
      config.onResult?.(result, stats, dvm);
      hook(result, stats, dvm);
    },
  });
  return withEventFlush(runner, {
    publisher: events.publisher,
    deadlineMs: events.flushDeadlineMs,
    afterFlush: events.recordFlush,
    ...(config.log ? { log: config.log } : {}),
  });
}
