/** DynamoDB for integration tests: a client for the endpoint the global setup provides, fresh tables. */

import { randomUUID } from "node:crypto";
import { DeleteTableCommand, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { inject } from "vitest";
import { ensureLedgerTable } from "../../infra/dev/local/ledgerTable";
import { createLedgerClient } from "../../src/aws/ledger";
import { ENV } from "../../src/config/environment";

/** The endpoint from test/setup/dynamo.ts, or undefined when the run was narrowed to other services. */
export function dynamoEndpoint(): { endpoint: string; region: string } | undefined {
  return inject("dynamo");
}

function isLoopback(endpoint: string): boolean {
  const host = new URL(endpoint).hostname;
  return host === "localhost" || host === "127.0.0.1" || host === "::1" || host === "[::1]";
}

/**
 * A ledger client (SDK retries off) for the test endpoint; local endpoints get dummy credentials
 * (letters and digits only: DynamoDB Local 1.25 rejects other access key IDs as invalid).
 */
export function testDynamoClient(): DynamoDBClient {
  const dynamo = dynamoEndpoint();
  if (!dynamo) throw new Error("DynamoDB is not part of this run (DVM_TEST_SERVICES excludes dynamo)");
  return createLedgerClient({ endpoint: dynamo.endpoint, ...testAwsAccess(dynamo.endpoint, dynamo.region) });
}

/** Region and credentials for the test endpoint: dummy ones for a local endpoint, else the SDK's own chain. */
export function testAwsAccess(endpoint: string, region: string): { region: string; credentials?: { accessKeyId: string; secretAccessKey: string } } {
  const local = isLoopback(endpoint) && !process.env[ENV.awsAccessKeyId];
  return { region, ...(local ? { credentials: { accessKeyId: "dvmlocal", secretAccessKey: "dvmlocal" } } : {}) };
}

export interface FreshTable {
  client: DynamoDBClient;
  tableName: string;
  /** Deletes the table; DynamoDB Local forgets it anyway, a shared endpoint would not. */
  drop(): Promise<void>;
}

/** A new, uniquely named ledger table, so tests never see each other's entries. */
export async function freshLedgerTable(client: DynamoDBClient = testDynamoClient()): Promise<FreshTable> {
  const tableName = `dvm-ledger-test-${randomUUID().slice(0, 8)}`;
  await ensureLedgerTable(client, tableName);
  return {
    client,
    tableName,
    drop: async () => {
      await client.send(new DeleteTableCommand({ TableName: tableName })).catch(() => undefined);
    },
  };
}
