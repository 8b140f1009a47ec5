/**
 * The ledger table's one definition is infra/deploy/ledger-table.json (a CloudFormation resource that
 * serverless.yml includes, so CloudFormation creates the deployed table). This module derives the
 * DynamoDB API calls that create it in local set-ups (DynamoDB Local, LocalStack) from the same file, so
 * they get the same keys and TTL; nothing deployed calls it.
 */
import {
  CreateTableCommand,
  type CreateTableCommandInput,
  DescribeTableCommand,
  DescribeTimeToLiveCommand,
  UpdateTimeToLiveCommand,
  type UpdateTimeToLiveCommandInput,
} from "@aws-sdk/client-dynamodb";
import { z } from "zod";
import type { LedgerDynamoClient } from "../../../src/aws/ledger/client";
import { LedgerError } from "../../../src/ledger/errors";
import { errorMessage } from "../../../src/lib/errorMessage";
import definition from "../../deploy/ledger-table.json" with { type: "json" };

const TableResource = z.object({
  Type: z.literal("AWS::DynamoDB::Table"),
  Properties: z.object({
    TableName: z.string().optional(),
    AttributeDefinitions: z.array(z.object({ AttributeName: z.string(), AttributeType: z.enum(["S", "N", "B"]) })).min(1),
    KeySchema: z.array(z.object({ AttributeName: z.string(), KeyType: z.enum(["HASH", "RANGE"]) })).min(1),
    BillingMode: z.literal("PAY_PER_REQUEST"),
    TimeToLiveSpecification: z.object({ AttributeName: z.string(), Enabled: z.boolean() }),
    PointInTimeRecoverySpecification: z.object({ PointInTimeRecoveryEnabled: z.boolean() }).optional(),
    SSESpecification: z.object({ SSEEnabled: z.boolean() }).optional(),
  }),
});

export type LedgerTableResource = z.infer<typeof TableResource>;

/** The parsed CloudFormation resource; a broken file fails at import, not at the first write. */
export const LEDGER_TABLE_RESOURCE: LedgerTableResource = TableResource.parse(definition);

export function ledgerCreateTableInput(tableName: string): CreateTableCommandInput {
  const p = LEDGER_TABLE_RESOURCE.Properties;
  return {
    TableName: tableName,
    AttributeDefinitions: p.AttributeDefinitions,
    KeySchema: p.KeySchema,
    BillingMode: p.BillingMode,
    // Point-in-time recovery is a separate API (UpdateContinuousBackups) that local emulators lack;
    // it only matters on AWS, where CloudFormation applies it from the same file.
    ...(p.SSESpecification ? { SSESpecification: { Enabled: p.SSESpecification.SSEEnabled } } : {}),
  };
}

export function ledgerTimeToLiveInput(tableName: string): UpdateTimeToLiveCommandInput {
  const ttl = LEDGER_TABLE_RESOURCE.Properties.TimeToLiveSpecification;
  return { TableName: tableName, TimeToLiveSpecification: { AttributeName: ttl.AttributeName, Enabled: ttl.Enabled } };
}

export interface EnsureTableOptions {
  /** How long to wait for the table to become ACTIVE. Default 60 s. */
  timeoutMs?: number;
  pollMs?: number;
}

/**
 * Creates the ledger table if it is missing, waits until it is ACTIVE and turns TTL on. Safe to call
 * any number of times, also concurrently (ResourceInUseException means someone else created it).
 */
export async function ensureLedgerTable(client: LedgerDynamoClient, tableName: string, options: EnsureTableOptions = {}): Promise<void> {
  const timeoutMs = options.timeoutMs ?? 60_000;
  const pollMs = options.pollMs ?? 100;
  try {
    await client.send(new CreateTableCommand(ledgerCreateTableInput(tableName)));
  } catch (error) {
    if (!hasName(error, "ResourceInUseException")) {
      throw new LedgerError(`creating ledger table ${tableName} failed: ${errorMessage(error)}`, { cause: error });
    }
  }
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { Table } = await client.send(new DescribeTableCommand({ TableName: tableName }));
    if (Table?.TableStatus === "ACTIVE") break;
    if (Date.now() > deadline) {
      throw new LedgerError(`ledger table ${tableName} is still ${Table?.TableStatus} after ${timeoutMs} ms`);
    }
    await new Promise((resolve) => setTimeout(resolve, pollMs));
  }
  const wanted = ledgerTimeToLiveInput(tableName).TimeToLiveSpecification!;
  const { TimeToLiveDescription } = await client.send(new DescribeTimeToLiveCommand({ TableName: tableName }));
  const status = TimeToLiveDescription?.TimeToLiveStatus;
  const enabled = status === "ENABLED" || status === "ENABLING";
  if (wanted.Enabled !== enabled) {
    await client.send(new UpdateTimeToLiveCommand(ledgerTimeToLiveInput(tableName)));
  }
}

function hasName(error: unknown, name: string): boolean {
  return typeof error === "object" && error !== null && (error as { name?: unknown }).name === name;
}
