export { createLedgerClient, type LedgerDynamoClient } from "./client";
export { checkOutcomeSize, MAX_OUTCOME_BYTES } from "./codec";
export { DynamoPhaseLedger, MAX_CLAIM_RECORDS } from "./dynamoLedger";
export { InvalidLedgerKeyError, LedgerError, LedgerUnavailableError, LostClaimError, OutcomeTooLargeError } from "./errors";
export { DynamoHandledEvents, HANDLED_EVENT_RETENTION_SECONDS } from "./handledEventRecords";
export { MAX_GENERATION, parsePhaseKey, phaseKeyOf, validateLedgerKey } from "./key";
export { backoffDelayMs, DEFAULT_RETRY_POLICY, isTransientDynamoError, type RetryPolicy, withTransientRetry } from "./retry";
export { ensureLedgerTable } from "./table";
export type {
  Claim,
  ClaimOptions,
  ClaimRecord,
  ClaimResult,
  LedgerEntry,
  LedgerKey,
  PhaseLedger,
  PhaseOutcome,
  PhaseOutcomeRecord,
} from "./types";
