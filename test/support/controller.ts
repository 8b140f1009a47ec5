/** The whole local controller (relay, phase function behind serverless-offline) on the test clusters. */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type LocalController, startLocalController } from "../../infra/dev/local/controller";
import type { Environment } from "../../src/config/environment";
import type { MigrationPolicy } from "../../src/dvm/policy";
import type { Logger } from "../../src/lib/log";
import type { TestClusters } from "./clusters";
import { dynamoEndpoint, testAwsAccess } from "./dynamo";
import { type MigrationFixture, TEST_MIGRATION_POLICY } from "./migration";

export interface TestControllerOptions {
  /** The operator's migration policy for the phase function; default TEST_MIGRATION_POLICY. */
  policy?: MigrationPolicy;
  /** More of the phase function's settings (infra/dev/local/controller.ts functionSettings). */
  functionSettings?: Environment;
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
  return startLocalController({
    kubeconfig: clusters.info.source.kubeconfigPath,
    dynamoEndpoint: dynamo.endpoint,
    aws: testAwsAccess(dynamo.endpoint, dynamo.region),
    podClusters: fixture.sameCluster ? [] : [{ name: "destination", kubeconfigPath: clusters.info.destination.kubeconfigPath }],
    ledgerTableName: `dvm-${name}-${fixture.run}`,
    stateDir: mkdtempSync(join(tmpdir(), `dvm-${name}-`)),
    log,
    policy: options.policy ?? TEST_MIGRATION_POLICY,
    ...(options.functionSettings ? { functionSettings: options.functionSettings } : {}),
  });
}
