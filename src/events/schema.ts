/**
 * The CloudEvents this controller takes in and sends out: their types and the schemas of their `data`.
 * docs/events.md describes the same; the tests hold the two together.
 *
 * In:  io.dvm-serverless.migration.requested.v1  asks for a DirectVolumeMigration (src/events/trigger.ts)
 * Out: io.dvm-serverless.phase.completed.v1       a phase of a migration completed (src/events/outgoing.ts)
 *      io.dvm-serverless.migration.succeeded.v1   a migration reached Completed on its normal itinerary
 *      io.dvm-serverless.migration.failed.v1      a migration reached Completed after failing (cleanup done)
 */
import { z } from "zod";
import { DvmSpecSchema } from "../dvm/types";

export const EVENT_TYPE_PREFIX = "io.dvm-serverless";
export const MIGRATION_REQUESTED = `${EVENT_TYPE_PREFIX}.migration.requested.v1`;
export const PHASE_COMPLETED = `${EVENT_TYPE_PREFIX}.phase.completed.v1`;
export const MIGRATION_SUCCEEDED = `${EVENT_TYPE_PREFIX}.migration.succeeded.v1`;
export const MIGRATION_FAILED = `${EVENT_TYPE_PREFIX}.migration.failed.v1`;
/** @internal exported for its tests */
export const OUTGOING_EVENT_TYPES = [PHASE_COMPLETED, MIGRATION_SUCCEEDED, MIGRATION_FAILED] as const;

/** The only CloudEvents version accepted (0.3 has other attribute names and is long superseded). */
export const SPEC_VERSION = "1.0";

/** The derived DVM name is `<namePrefix>-<10 hex>`: 52 + 11 = 63, a valid DNS label. */
export const MAX_NAME_PREFIX = 52;
export const DEFAULT_NAME_PREFIX = "migration";

const dnsLabel = z
  .string()
  .min(1)
  .max(63)
  .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, "must be a DNS-1123 label (lower-case letters, digits and '-', starting and ending with a letter or digit)");

/**
 * `data` of io.dvm-serverless.migration.requested.v1. Unknown top-level keys are refused, so a typo
 * ("namesapce") is named instead of silently ignored; the spec is the DVM's own schema.
 */
export const MigrationRequestedDataSchema = z.strictObject({
  /** Namespace of the host cluster where the DirectVolumeMigration is created. */
  namespace: dnsLabel,
  /** Start of the DVM's name; the rest is derived from the event's source and id. */
  namePrefix: dnsLabel.max(MAX_NAME_PREFIX).optional(),
  spec: DvmSpecSchema,
});

/** Who the outgoing events are about; `subject` is `<namespace>/<name>`. */
const DvmIdentityFields = {
  uid: z.string().min(1),
  namespace: z.string().min(1),
  name: z.string().min(1),
};

const isoTime = z.iso.datetime();

/** `data` of io.dvm-serverless.phase.completed.v1: the ledger entry of the phase that completed. */
export const PhaseCompletedDataSchema = z.strictObject({
  ...DvmIdentityFields,
  generation: z.number().int().min(0),
  phase: z.string().min(1),
  /** "failed": the phase failed the migration, which continues on the failure itinerary (cleanup). */
  result: z.enum(["advanced", "failed"]),
  next: z.string().min(1),
  /** Claims of the ledger entry: 1 unless the phase waited, failed transiently or was taken over. */
  attempts: z.number().int().min(1),
  startedAt: isoTime,
  finishedAt: isoTime,
  elapsedSeconds: z.number().min(0),
  errors: z.array(z.string()).optional(),
});
export type PhaseCompletedData = z.infer<typeof PhaseCompletedDataSchema>;

/** `data` of io.dvm-serverless.migration.succeeded.v1 and ...migration.failed.v1. */
export const MigrationFinishedDataSchema = z.strictObject({
  ...DvmIdentityFields,
  /** First claim of the first phase. */
  startedAt: isoTime,
  /** Completion of the last phase. */
  finishedAt: isoTime,
  elapsedSeconds: z.number().min(0),
  /** Ledger entries (phase executions) of the migration, and their claims added up. */
  phases: z.number().int().min(0),
  attempts: z.number().int().min(0),
  /** The phase that failed the migration (failed only). */
  failedPhase: z.string().optional(),
  /** Errors the phases recorded, oldest first, deduplicated; empty on success. */
  errors: z.array(z.string()),
});
export type MigrationFinishedData = z.infer<typeof MigrationFinishedDataSchema>;
