/**
 * The phase function's runner, built from its configuration (src/aws/phaseConfig.ts) once per container,
 * and again when an API server refuses the host kubeconfig (reloadingRunner.ts).
 * The settings are read at the first invocation, so a bad one fails that invocation with a
 * ConfigurationError naming the variable (kept in the dead-letter queue) rather than the container's start.
 *
 * With events on, every completed phase queues its events (runner onResult, one ledger read) and every
 * invocation ends by waiting for them at most DVM_EVENTS_FLUSH_MS; sending never fails an invocation.
 */

import type { Environment } from "../config/environment";
import { type FlushingRunner, phaseEventsHook, withEventFlush } from "../events/runnerEvents";
import type { Logger } from "../lib/log";
import { type PhaseEvents, type PhaseEventsFromEnvOptions, phaseEventsFromEnv } from "./eventPublisherFromEnv";
import { createKubeconfigSource } from "./kubeconfigSource";
import { createLedgerClient, DynamoPhaseLedger } from "./ledger";
import { parsePhaseFunctionEnv } from "./phaseConfig";
import { createPhaseRunner, type PhaseRunnerConfig } from "./phaseRunner";
import { rebuiltOnUnauthorized } from "./reloadingRunner";

export function runnerFromEnv(env: Environment, log: Logger, options: PhaseEventsFromEnvOptions = {}): () => Promise<FlushingRunner> {
  const events = phaseEventsFromEnv(env, log, options);
  // Built once per container, and again when an API server refuses the host kubeconfig (rotated).
  return rebuiltOnUnauthorized(async () => {
    const { ledgerTableName, kubeconfigParameter, policy, credentialGraceMs } = parsePhaseFunctionEnv(env);
    const hostKubeConfig = await createKubeconfigSource({ parameterName: kubeconfigParameter })();
    const grace = credentialGraceMs !== undefined ? { credentialGraceMs } : {};
    if (!events) return createPhaseRunner({ hostKubeConfig, ledgerTableName, log, policy, ...grace });
    // One DynamoDB client for the runner's ledger and the events' history reads.
    return createPhaseRunnerWithEvents({ hostKubeConfig, ledgerTableName, log, policy, ...grace, dynamo: createLedgerClient() }, events);
  }, log);
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
