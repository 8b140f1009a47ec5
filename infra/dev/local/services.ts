/**
 * Starts the services the integration suite needs OUTSIDE a test run — two control planes and DynamoDB
 * Local — and writes the environment that points the suite at them (KUBECONFIG-style and
 * AWS_ENDPOINT_URL variables), then runs until SIGTERM/SIGINT. It proves the suite's external-endpoint
 * path here, where kind and LocalStack cannot run:
 *
 *   npx tsx infra/dev/local/services.ts /tmp/dvm-services.env &
 *   set -a; . /tmp/dvm-services.env; set +a; npx vitest run --project integration
 */
import { writeFileSync } from "node:fs";
import { startControlPlane } from "./controlPlane";
import { startDynamoLocal } from "./dynamoLocal";

const envFile = process.argv[2];
if (!envFile) {
  process.stderr.write("usage: tsx infra/dev/local/services.ts ENV_FILE\n");
  process.exit(2);
}

const source = await startControlPlane({ name: "external-source" });
const destination = await startControlPlane({ name: "external-destination" });
const dynamo = await startDynamoLocal();
const stop = async () => {
  await Promise.allSettled([source.stop(), destination.stop(), dynamo.stop()]);
  process.exit(0);
};
process.on("SIGTERM", () => void stop());
process.on("SIGINT", () => void stop());

writeFileSync(
  envFile,
  [
    `DVM_SOURCE_KUBECONFIG=${source.kubeconfigPath}`,
    `DVM_DESTINATION_KUBECONFIG=${destination.kubeconfigPath}`,
    `AWS_ENDPOINT_URL=${dynamo.endpoint}`,
    "AWS_REGION=us-east-1",
    // DynamoDB Local accepts only letters and digits in access key IDs.
    "AWS_ACCESS_KEY_ID=dvmexternal",
    "AWS_SECRET_ACCESS_KEY=dvmexternal",
    "",
  ].join("\n"),
);
process.stderr.write(`services up; environment in ${envFile}\n`);
