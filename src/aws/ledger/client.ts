import { DynamoDBClient, type DynamoDBClientConfig } from "@aws-sdk/client-dynamodb";
import { definedFields } from "../../lib/definedFields";

/** The only part of the SDK client the ledger uses; tests pass a stub. */
export type LedgerDynamoClient = Pick<DynamoDBClient, "send">;

export interface LedgerClientOptions {
  /** Defaults to the SDK's resolution (AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL, then AWS). */
  endpoint?: string;
  region?: string;
  credentials?: DynamoDBClientConfig["credentials"];
  /** A hung socket becomes a retryable timeout instead of eating the Lambda's time. */
  requestTimeoutMs?: number;
}

/**
 * A DynamoDB client for the ledger. The SDK's own retries are off (maxAttempts: 1) because the ledger
 * retries transient errors itself (retry.ts); with both on, the tries would multiply. If you build your
 * own client for DynamoPhaseLedger, set maxAttempts: 1 too.
 */
export function createLedgerClient(options: LedgerClientOptions = {}): DynamoDBClient {
  return new DynamoDBClient({
    maxAttempts: 1,
    // An empty endpoint or region is as good as none: the SDK's own chain decides.
    ...definedFields({ endpoint: options.endpoint || undefined, region: options.region || undefined, credentials: options.credentials }),
    requestHandler: { connectionTimeout: 2_000, requestTimeout: options.requestTimeoutMs ?? 5_000 },
  });
}
