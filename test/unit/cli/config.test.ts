/** The `dvm` command's configuration module (src/cli/config.ts). */
import { delimiter } from "node:path";
import { describe, expect, it } from "vitest";
import { parseCliEnv } from "../../../src/cli/config";
import { ENV } from "../../../src/config/environment";

describe("the CLI's configuration", () => {
  it("reads nothing from an empty environment", () => {
    expect(parseCliEnv({})).toEqual({ kubeconfigFiles: [], inCluster: false, hasAwsCredentials: false, debug: false });
  });

  it("splits KUBECONFIG, prefers the DynamoDB-specific endpoint and AWS_REGION, and sees the SDK's own credentials", () => {
    expect(
      parseCliEnv({
        [ENV.kubeconfig]: `/a${delimiter}${delimiter}/b`,
        [ENV.home]: "/home/me",
        [ENV.kubernetesServiceHost]: "10.0.0.1",
        [ENV.ledgerTable]: "t",
        [ENV.awsEndpoint]: "http://x",
        [ENV.awsDynamoEndpoint]: "http://y",
        [ENV.awsDefaultRegion]: "eu-west-1",
        [ENV.awsRegion]: "us-east-2",
        [ENV.awsProfile]: "dev",
        [ENV.cliDebug]: "1",
      }),
    ).toEqual({
      kubeconfigFiles: ["/a", "/b"],
      home: "/home/me",
      inCluster: true,
      ledgerTable: "t",
      dynamoEndpoint: "http://y",
      region: "us-east-2",
      hasAwsCredentials: true,
      debug: true,
    });
  });
});
