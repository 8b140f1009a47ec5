/** The ledger in DynamoDB: the PhaseLedger and HandledEvents implementations and their client (the table itself comes from CloudFormation; local set-ups create it with infra/dev/local/ledgerTable.ts). */
export { createLedgerClient, type LedgerDynamoClient } from "./client";
export { DynamoPhaseLedger } from "./dynamoLedger";
export { DynamoHandledEvents, HANDLED_EVENT_RETENTION_SECONDS } from "./handledEventRecords";
