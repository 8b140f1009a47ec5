export type {
  Claim,
  ClaimEnd,
  ClaimOptions,
  ClaimRecord,
  ClaimResult,
  DvmRef,
  LedgerEntry,
  LedgerKey,
  LedgerState,
  PhaseLedger,
  PhaseOutcome,
  PhaseOutcomeRecord,
  PhaseResult,
} from "./types";
export { InvalidLedgerKeyError, LedgerError, LedgerUnavailableError, LostClaimError } from "./errors";
export { MAX_GENERATION, parsePhaseKey, phaseKeyOf, validateLedgerKey } from "./key";
export { DEFAULT_RETRY_POLICY, backoffDelayMs, isTransientDynamoError, withTransientRetry, type RetryPolicy } from "./retry";
export { createLedgerClient, type LedgerClientOptions, type LedgerDynamoClient } from "./client";
export { DEFAULT_RETENTION_DAYS, DynamoPhaseLedger, MAX_CLAIM_RECORDS, type DynamoLedgerOptions } from "./dynamoLedger";
export {
  LEDGER_TABLE_RESOURCE,
  LEDGER_TTL_ATTRIBUTE,
  ensureLedgerTable,
  ledgerCreateTableInput,
  ledgerTimeToLiveInput,
  type EnsureTableOptions,
} from "./table";
