/** `npm start`'s configuration module (infra/dev/local/config.ts). */
import { describe, expect, it } from "vitest";
import { LOCAL_REGION, parseLocalControllerEnv } from "../../../infra/dev/local/config";
import { ENV } from "../../../src/config/environment";
import { ConfigurationError } from "../../../src/config/error";

describe("the local controller's configuration", () => {
  it("defaults to embedded clusters, DynamoDB Local, us-east-1 and info", () => {
    expect(parseLocalControllerEnv({})).toEqual({ aws: { region: LOCAL_REGION }, logLevel: "info" });
  });

  it("reads the cluster, an existing DynamoDB (the DynamoDB-specific endpoint first) and its credentials", () => {
    expect(
      parseLocalControllerEnv({
        [ENV.kubeconfig]: "/k",
        [ENV.awsEndpoint]: "http://localstack:4566",
        [ENV.awsDynamoEndpoint]: "http://127.0.0.1:8000",
        [ENV.awsRegion]: "eu-west-1",
        [ENV.awsAccessKeyId]: "a",
        [ENV.awsSecretAccessKey]: "b",
        [ENV.logLevel]: "warn",
      }),
    ).toEqual({
      kubeconfig: "/k",
      dynamoEndpoint: "http://127.0.0.1:8000",
      aws: { region: "eu-west-1", credentials: { accessKeyId: "a", secretAccessKey: "b" } },
      logLevel: "warn",
    });
    expect(parseLocalControllerEnv({ [ENV.awsEndpoint]: "http://localstack:4566" }).dynamoEndpoint).toBe("http://localstack:4566");
  });

  it.each([
    [{ [ENV.awsDynamoEndpoint]: "localhost:8000" }, ENV.awsDynamoEndpoint],
    [{ [ENV.logLevel]: "verbose" }, ENV.logLevel],
  ])("names a bad setting (%o)", (env, variable) => {
    expect(() => parseLocalControllerEnv(env)).toThrow(ConfigurationError);
    expect(() => parseLocalControllerEnv(env)).toThrow(`${variable}: `);
  });
});
