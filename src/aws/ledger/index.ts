/** The ledger in DynamoDB: the PhaseLedger and HandledEvents implementations, the table and its client. */
export { createLedgerClient, type LedgerDynamoClient } from "./client";
export { checkOutcomeSize, MAX_OUTCOME_BYTES } from "./codec";
export { DynamoPhaseLedger, MAX_CLAIM_RECORDS } from "./dynamoLedger";
export { DynamoHandledEvents, HANDLED_EVENT_RETENTION_SECONDS } from "./handledEventRecords";
export { ensureLedgerTable } from "./table";
