export { LostClaimError, OutcomeTooLargeError } from "./errors";
export { isTransientDynamoError } from "./retry";
export type { Claim, ClaimResult, LedgerEntry, PhaseLedger, RecordedOutcome } from "./types";
