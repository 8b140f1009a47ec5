/**
 * The CloudEvents a migration sends, built from what the ledger recorded (never from the DVM object,
 * whose spec names Secrets and whose status carries pod details):
 *   phase.completed      after each phase completes (also one that failed the migration: result "failed");
 *   migration.succeeded  when the last phase of the normal (or rollback) itinerary completes;
 *   migration.failed     when the last phase of the failure itinerary completes, cleanup included.
 *
 * Every `data` is built field by field and checked against its strict schema (schema.ts), so nothing
 * else can slip in. The only free text is the phases' recorded errors, which are capped and scrubbed
 * of anything that looks like a credential (redactSecrets) in case a phase ever quotes one.
 *
 * Ids are deterministic (uid, generation, phase), so when the same completion is reported twice (an
 * invocation that repaired a lagging status, see eventsWanted) consumers can drop the duplicate by id.
 */

import { CloudEvent } from "cloudevents";
import type { RunResult } from "../contracts/request";
import type { LedgerEntry } from "../ledger";
import { truncateUtf8 } from "../lib/textBounds";
import {
  MIGRATION_FAILED,
  MIGRATION_SUCCEEDED,
  type MigrationFinishedData,
  MigrationFinishedDataSchema,
  PHASE_COMPLETED,
  type PhaseCompletedData,
  PhaseCompletedDataSchema,
  SPEC_VERSION,
} from "./schema";

export interface DvmRef {
  namespace: string;
  name: string;
  uid: string;
}

/** Default `source` of the events this controller sends. */
export const DEFAULT_EVENT_SOURCE = "dvm-serverless";

const MAX_ERRORS = 20;
const MAX_ERROR_BYTES = 1_000;

/**
 * Whether an invocation's result means a phase completed: "advanced", or "duplicate" when that
 * invocation also wrote the status (the one that completed the phase died before it could, so it
 * never reported the completion either).
 */
export function eventsWanted(result: RunResult): result is Extract<RunResult, { kind: "advanced" | "duplicate" }> {
  return result.kind === "advanced" || (result.kind === "duplicate" && result.statusRepaired);
}

/**
 * The events for a completed `phase`, from the DVM's ledger history (one read, see runnerEvents.ts).
 * Empty when the ledger has no completed entry for the phase (it cannot happen after "advanced").
 */
export function completionEvents(phase: string, dvm: DvmRef, history: readonly LedgerEntry[], source: string = DEFAULT_EVENT_SOURCE): CloudEvent<unknown>[] {
  const entry = latestCompleted(history, phase);
  if (!entry?.outcome) return [];
  const events = [phaseCompleted(dvm, entry, source)];
  if (entry.outcome.nextPhase === "Completed") events.push(migrationFinished(dvm, history, entry, source));
  return events;
}

function phaseCompleted(dvm: DvmRef, entry: LedgerEntry & { outcome: NonNullable<LedgerEntry["outcome"]> }, source: string): CloudEvent<unknown> {
  const { outcome, key } = entry;
  const errors = cleanErrors(outcome.errors ?? []);
  const data: PhaseCompletedData = PhaseCompletedDataSchema.parse({
    uid: dvm.uid,
    namespace: dvm.namespace,
    name: dvm.name,
    generation: key.generation,
    phase: key.phase,
    result: outcome.result,
    next: outcome.nextPhase,
    attempts: Math.max(1, entry.attempts),
    startedAt: iso(entry.startedAt),
    finishedAt: iso(outcome.finishedAt),
    elapsedSeconds: seconds(outcome.finishedAt - entry.startedAt),
    ...(errors.length > 0 ? { errors } : {}),
  });
  return cloudEvent(PHASE_COMPLETED, `${PHASE_COMPLETED}:${dvm.uid}:${key.generation}:${key.phase}`, dvm, outcome.finishedAt, data, source);
}

function migrationFinished(
  dvm: DvmRef,
  history: readonly LedgerEntry[],
  last: LedgerEntry & { outcome: NonNullable<LedgerEntry["outcome"]> },
  source: string,
): CloudEvent<unknown> {
  const startedAt = Math.min(...history.map((e) => e.startedAt));
  const finishedAt = last.outcome.finishedAt;
  const failed = history.find((e) => e.outcome?.result === "failed");
  const data: MigrationFinishedData = MigrationFinishedDataSchema.parse({
    uid: dvm.uid,
    namespace: dvm.namespace,
    name: dvm.name,
    startedAt: iso(startedAt),
    finishedAt: iso(finishedAt),
    elapsedSeconds: seconds(finishedAt - startedAt),
    phases: history.length,
    attempts: history.reduce((sum, e) => sum + e.attempts, 0),
    ...(failed ? { failedPhase: failed.key.phase } : {}),
    errors: cleanErrors(history.flatMap((e) => e.outcome?.errors ?? [])),
  });
  const type = failed ? MIGRATION_FAILED : MIGRATION_SUCCEEDED;
  return cloudEvent(type, `${type}:${dvm.uid}`, dvm, finishedAt, data, source);
}

function cloudEvent(type: string, id: string, dvm: DvmRef, at: number, data: object, source: string): CloudEvent<unknown> {
  return new CloudEvent<unknown>({
    specversion: SPEC_VERSION,
    id,
    source,
    type,
    subject: `${dvm.namespace}/${dvm.name}`,
    time: iso(at),
    datacontenttype: "application/json",
    data,
  });
}

function latestCompleted(history: readonly LedgerEntry[], phase: string): (LedgerEntry & { outcome: NonNullable<LedgerEntry["outcome"]> }) | undefined {
  let latest: (LedgerEntry & { outcome: NonNullable<LedgerEntry["outcome"]> }) | undefined;
  for (const entry of history) {
    if (entry.key.phase !== phase || entry.state !== "COMPLETED" || !entry.outcome) continue;
    if (!latest || entry.outcome.finishedAt >= latest.outcome.finishedAt) latest = entry as typeof latest;
  }
  return latest;
}

function cleanErrors(errors: readonly string[]): string[] {
  const unique = [...new Set(errors.map((e) => truncate(redactSecrets(e))))];
  return unique.slice(0, MAX_ERRORS);
}

function truncate(text: string): string {
  return truncateUtf8(text, MAX_ERROR_BYTES);
}

const PEM_BLOCK = /-----BEGIN [A-Z0-9 ]+-----[\s\S]*?(-----END [A-Z0-9 ]+-----|$)/g;
// A key that names a credential, then its value (quoted or up to whitespace/comma).
const CREDENTIAL_VALUE =
  /\b(password|passwd|pwd|token|bearer|authorization|secret[-_]?key|access[-_]?key|client-key-data|client-certificate-data|certificate-authority-data|kubeconfig)(["']?\s*[:=]\s*|\s+)("[^"]*"|'[^']*'|[^\s,;]+)/gi;
// A URL with a password in it: https://user:secret@host
const URL_CREDENTIALS = /\b([a-z][a-z0-9+.-]*:\/\/[^\s/:@]+):[^\s/@]+@/gi;
// Long base64 runs (certificates, keys, tokens encoded into a kubeconfig).
const LONG_BASE64 = /[A-Za-z0-9+/]{120,}={0,2}/g;

/** Replaces what looks like a credential in free text; the rest of the message stays readable. */
export function redactSecrets(text: string): string {
  return text
    .replace(PEM_BLOCK, "[redacted PEM block]")
    .replace(CREDENTIAL_VALUE, (_m, key: string, sep: string) => `${key}${sep}[redacted]`)
    .replace(URL_CREDENTIALS, "$1:[redacted]@")
    .replace(LONG_BASE64, "[redacted]");
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

function seconds(ms: number): number {
  return Math.max(0, Math.round(ms) / 1000);
}
