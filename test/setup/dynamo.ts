/**
 * Global setup "dynamo": one DynamoDB for the whole integration run. An endpoint from the environment
 * (AWS_ENDPOINT_URL_DYNAMODB or AWS_ENDPOINT_URL: LocalStack, a DynamoDB Local you started) is used as
 * is; otherwise DynamoDB Local is started here and stopped at teardown.
 */
import type { TestProject } from "vitest/node";
import { startDynamoLocal } from "../../infra/dev/local/dynamoLocal";
import { wantsService } from "./services";

declare module "vitest" {
  export interface ProvidedContext {
    dynamo: { endpoint: string; region: string };
  }
}

export default async function setup({ provide }: TestProject): Promise<(() => Promise<void>) | void> {
  if (!wantsService("dynamo")) return;
  const region = process.env.AWS_REGION ?? process.env.AWS_DEFAULT_REGION ?? "us-east-1";
  const external = process.env.AWS_ENDPOINT_URL_DYNAMODB ?? process.env.AWS_ENDPOINT_URL;
  if (external) {
    provide("dynamo", { endpoint: external, region });
    return;
  }
  const local = await startDynamoLocal();
  provide("dynamo", { endpoint: local.endpoint, region });
  return () => local.stop();
}
