export { createLedgerClient, type LedgerClientOptions, type LedgerDynamoClient } from "./client";
export { DEFAULT_RETENTION_DAYS, type DynamoLedgerOptions, DynamoPhaseLedger, MAX_CLAIM_RECORDS } from "./dynamoLedger";
export { InvalidLedgerKeyError, LedgerError, LedgerUnavailableError, LostClaimError } from "./errors";
export { MAX_GENERATION, parsePhaseKey, phaseKeyOf, validateLedgerKey } from "./key";
export { backoffDelayMs, DEFAULT_RETRY_POLICY, isTransientDynamoError, type RetryPolicy, withTransientRetry } from "./retry";
export {
  type EnsureTableOptions,
  ensureLedgerTable,
  LEDGER_TABLE_RESOURCE,
  LEDGER_TTL_ATTRIBUTE,
  ledgerCreateTableInput,
  ledgerTimeToLiveInput,
} from "./table";
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
