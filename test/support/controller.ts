/** The whole local controller (relay, phase function behind serverless-offline) on the test clusters. */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { MigrationPolicy } from "../../src/dvm/policy";
import { type LocalController, startLocalController } from "../../src/local/controller";
import type { Logger } from "../../src/log";
import type { TestClusters } from "./clusters";
import { dynamoEndpoint } from "./dynamo";
import { type MigrationFixture, TEST_MIGRATION_POLICY } from "./migration";

export interface TestControllerOptions {
  /** The operator's migration policy for the phase function; default TEST_MIGRATION_POLICY. */
  policy?: MigrationPolicy;
}

export async function startTestController(
  clusters: TestClusters,
  fixture: MigrationFixture,
  name: string,
  log: Logger,
  options: TestControllerOptions = {},
): Promise<LocalController> {
  const dynamo = dynamoEndpoint();
  if (!dynamo) throw new Error("DynamoDB is not part of this run");
  // The controller and the function it starts read the ledger's endpoint from the environment.
  Object.assign(process.env, { AWS_ENDPOINT_URL_DYNAMODB: dynamo.endpoint, AWS_REGION: dynamo.region });
  if (!process.env.AWS_ACCESS_KEY_ID) Object.assign(process.env, { AWS_ACCESS_KEY_ID: "dvmlocal", AWS_SECRET_ACCESS_KEY: "dvmlocal" });
  return startLocalController({
    kubeconfig: clusters.info.source.kubeconfigPath,
    podClusters: fixture.sameCluster ? [] : [{ name: "destination", kubeconfigPath: clusters.info.destination.kubeconfigPath }],
    ledgerTableName: `dvm-${name}-${fixture.run}`,
    stateDir: mkdtempSync(join(tmpdir(), `dvm-${name}-`)),
    log,
    policy: options.policy ?? TEST_MIGRATION_POLICY,
  });
}
