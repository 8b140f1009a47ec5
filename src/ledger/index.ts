export { InvalidLedgerKeyError, LedgerError, LedgerUnavailableError, LostClaimError, OutcomeTooLargeError } from "./errors";
export { MAX_GENERATION, parsePhaseKey, phaseKeyOf, validateLedgerKey } from "./key";
export { backoffDelayMs, DEFAULT_RETRY_POLICY, isTransientDynamoError, type RetryPolicy, withTransientRetry } from "./retry";
export type {
  Claim,
  ClaimOptions,
  ClaimRecord,
  ClaimResult,
  LedgerEntry,
  LedgerKey,
  PhaseLedger,
  RecordedOutcome,
  RecordedOutcomeRecord,
} from "./types";
