/**
 * Where chaos runs happen: a host cluster (holds the DVMs, and is the source), a destination cluster,
 * DynamoDB with a fresh ledger table. Each part is either given (the test run's shared control planes
 * and DynamoDB Local) or started here (bench runs, and the scenarios that restart an API server, which
 * need a control plane of their own).
 */

import { randomUUID } from "node:crypto";
import { DeleteTableCommand, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { KubeConfig } from "@kubernetes/client-node";
import { type ControlPlane, startControlPlane } from "../../../infra/dev/local/controlPlane";
import { type DynamoLocal, startDynamoLocal } from "../../../infra/dev/local/dynamoLocal";
import { ensureLedgerTable } from "../../../infra/dev/local/ledgerTable";
import { createLedgerClient } from "../../../src/aws/ledger";

export interface ChaosCluster {
  name: string;
  kubeConfig: KubeConfig;
  kubeconfigPath: string;
  /** Present when the harness started it: it can be restarted and its etcd compacted. */
  plane?: ControlPlane;
}

export interface DynamoEndpoint {
  endpoint: string;
  region: string;
  credentials?: { accessKeyId: string; secretAccessKey: string };
}

export interface ChaosEnvironment {
  host: ChaosCluster;
  destination: ChaosCluster;
  dynamo: DynamoEndpoint;
  /** A ledger table of this environment's own. */
  tableName: string;
  /** A new DynamoDB client for the ledger (SDK retries off, as the ledger wants). */
  dynamoClient(): DynamoDBClient;
  stop(): Promise<void>;
}

export type ClusterSource = { kubeconfigPath: string } | "start";

export interface EnvironmentOptions {
  host: ClusterSource;
  destination: ClusterSource;
  dynamo: { endpoint: string; region: string } | "start";
  /** Keeps the started control planes' logs here. */
  logDir?: string;
  /** JVM flags of a DynamoDB Local started here; default the fast-start ones, benchmarks pass []. */
  dynamoJvmArgs?: string[];
}

function isLoopback(endpoint: string): boolean {
  const host = new URL(endpoint).hostname;
  return host === "localhost" || host === "127.0.0.1" || host === "::1" || host === "[::1]";
}

export async function startEnvironment(options: EnvironmentOptions): Promise<ChaosEnvironment> {
  const stops: Array<() => Promise<void>> = [];
  const stopAll = async () => {
    for (const stop of stops.splice(0).reverse()) await stop().catch(() => undefined);
  };
  try {
    const cluster = async (name: string, source: ClusterSource): Promise<ChaosCluster> => {
      if (source !== "start") {
        const kubeConfig = new KubeConfig();
        kubeConfig.loadFromFile(source.kubeconfigPath);
        return { name, kubeConfig, kubeconfigPath: source.kubeconfigPath };
      }
      const plane = await startControlPlane({ name: `chaos-${name}`, ...(options.logDir ? { logDir: `${options.logDir}/${name}` } : {}) });
      stops.push(() => plane.stop());
      return { name, kubeConfig: plane.kubeConfig(), kubeconfigPath: plane.kubeconfigPath, plane };
    };
    const startDynamo = async (): Promise<DynamoEndpoint> => {
      if (options.dynamo !== "start") return options.dynamo;
      const local: DynamoLocal = await startDynamoLocal(options.dynamoJvmArgs ? { jvmArgs: options.dynamoJvmArgs } : {});
      stops.push(() => local.stop());
      return { endpoint: local.endpoint, region: process.env.AWS_REGION ?? "us-east-1" };
    };
    const [host, destination, dynamoBase] = await Promise.all([cluster("host", options.host), cluster("destination", options.destination), startDynamo()]);
    const dynamo: DynamoEndpoint =
      isLoopback(dynamoBase.endpoint) && !process.env.AWS_ACCESS_KEY_ID
        ? { ...dynamoBase, credentials: { accessKeyId: "dvmchaos", secretAccessKey: "dvmchaos" } }
        : dynamoBase;
    const dynamoClient = () =>
      createLedgerClient({ endpoint: dynamo.endpoint, region: dynamo.region, ...(dynamo.credentials ? { credentials: dynamo.credentials } : {}) });
    const tableName = `dvm-ledger-chaos-${randomUUID().slice(0, 8)}`;
    const admin = dynamoClient();
    await ensureLedgerTable(admin, tableName);
    stops.push(async () => {
      await admin.send(new DeleteTableCommand({ TableName: tableName })).catch(() => undefined);
      admin.destroy();
    });
    return { host, destination, dynamo, tableName, dynamoClient, stop: stopAll };
  } catch (error) {
    await stopAll();
    throw error;
  }
}
