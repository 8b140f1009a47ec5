#!/usr/bin/env node
/**
 * The two AWS calls infra/dev/kind/e2e.sh makes, with the project's own SDK clients (no AWS CLI needed).
 * The endpoint is the SDK's: AWS_ENDPOINT_URL (LocalStack), credentials and region from the environment.
 *
 *   node infra/dev/localstack/aws.mjs put-parameter NAME FILE   SecureString NAME := contents of FILE
 *   node infra/dev/localstack/aws.mjs invoke FUNCTION JSON      RequestResponse invoke; prints the payload,
 *                                                           exits 1 when the function failed
 */
import { readFileSync } from "node:fs";
import { InvokeCommand, LambdaClient } from "@aws-sdk/client-lambda";
import { PutParameterCommand, SSMClient } from "@aws-sdk/client-ssm";

const [command, name, arg] = process.argv.slice(2);

async function main() {
  if (!process.env.AWS_ENDPOINT_URL) throw new Error("AWS_ENDPOINT_URL is not set: refusing to talk to AWS itself");
  switch (command) {
    case "put-parameter": {
      if (!name || !arg) throw new Error("usage: put-parameter NAME FILE");
      await new SSMClient({}).send(new PutParameterCommand({ Name: name, Value: readFileSync(arg, "utf8"), Type: "SecureString", Overwrite: true }));
      process.stdout.write(`parameter ${name} written\n`);
      return;
    }
    case "invoke": {
      if (!name || !arg) throw new Error("usage: invoke FUNCTION JSON");
      const response = await new LambdaClient({}).send(
        new InvokeCommand({ FunctionName: name, InvocationType: "RequestResponse", Payload: new TextEncoder().encode(arg) }),
      );
      const payload = response.Payload ? new TextDecoder().decode(response.Payload) : "";
      process.stdout.write(`${payload}\n`);
      if (response.FunctionError) {
        process.stderr.write(`${name} failed (${response.FunctionError})\n`);
        process.exit(1);
      }
      return;
    }
    default:
      throw new Error(`unknown command ${JSON.stringify(command)} (put-parameter, invoke)`);
  }
}

main().catch((error) => {
  process.stderr.write(`aws.mjs: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
