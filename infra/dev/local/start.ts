/**
 * `npm start`: the whole controller on this machine (see infra/dev/local/controller.ts), with a banner that says
 * where everything is and how to start a migration. Ctrl-C stops all of it.
 */
import { join } from "node:path";
import { parseArgs } from "node:util";
import { ConfigurationError } from "../../../src/config/error";
import { definedFields } from "../../../src/lib/definedFields";
import { errorText } from "../../../src/lib/errorMessage";
import { jsonLogger } from "../../../src/lib/log";
import { localEnvironment, parseLocalControllerEnv } from "./config";
import { startLocalController } from "./controller";
import { DEMO_DVM_NAMESPACE } from "./embeddedClusters";

const HELP = `Usage: npm start [-- options]

Runs the controller locally: DynamoDB Local, the phase function behind serverless-offline's Lambda
endpoint, and the watch relay. Without KUBECONFIG it also starts two embedded clusters with a demo.

Options:
  --kubeconfig PATH   the cluster to watch (default: $KUBECONFIG; none: embedded clusters)
  --table NAME        ledger table name (default: dvm-local-ledger)
  --state-dir DIR     kubeconfigs, demo files and logs (default: .dvm/ in this folder)
  --health-port PORT  relay health endpoint (default: a free port)
  --clusters MODE     embedded clusters: node (real kubelets, data really moves; needs root), kwok
                      (fake pods, nothing moves) or auto (default: node where this machine allows it)
  -h, --help          this text

Environment (infra/dev/local/config.ts): KUBECONFIG the cluster to watch; AWS_ENDPOINT_URL_DYNAMODB /
AWS_ENDPOINT_URL use that DynamoDB instead of DynamoDB Local (with AWS_REGION, AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY); LOG_LEVEL (debug, info, warn, error) sets the relay's log level.`;

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      kubeconfig: { type: "string" },
      table: { type: "string" },
      "state-dir": { type: "string" },
      "health-port": { type: "string" },
      clusters: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) {
    console.log(HELP);
    return;
  }
  const stateDir = values["state-dir"] ?? join(process.cwd(), ".dvm");
  const say = (line: string) => process.stderr.write(`[dvm] ${line}\n`);
  let env: ReturnType<typeof parseLocalControllerEnv>;
  try {
    env = parseLocalControllerEnv(localEnvironment());
  } catch (error) {
    if (!(error instanceof ConfigurationError)) throw error;
    say(error.message);
    process.exit(2);
  }
  const log = jsonLogger({ component: "relay" }, env.logLevel, (line) => process.stdout.write(`${line}\n`));
  const healthPort = values["health-port"] ? Number(values["health-port"]) : undefined;
  if (healthPort !== undefined && !(Number.isInteger(healthPort) && healthPort > 0 && healthPort < 65_536)) {
    say(`--health-port: "${values["health-port"]}" is not a port number`);
    process.exit(2);
  }

  const clusterMode = values.clusters ?? "auto";
  if (clusterMode !== "auto" && clusterMode !== "node" && clusterMode !== "kwok") {
    say(`--clusters: "${clusterMode}" is not one of node, kwok, auto`);
    process.exit(2);
  }

  const controller = await startLocalController({
    clusterMode,
    stateDir,
    log,
    say,
    aws: env.aws,
    logLevel: env.logLevel,
    ...definedFields({
      kubeconfig: values.kubeconfig || env.kubeconfig || undefined,
      dynamoEndpoint: env.dynamoEndpoint,
      ledgerTableName: values.table || undefined,
      healthPort,
    }),
  });

  const lines = [
    "",
    "dvm controller ready",
    `  cluster (DVMs)      KUBECONFIG=${controller.hostKubeconfig}`,
    ...(controller.embedded
      ? [
          `  destination cluster KUBECONFIG=${controller.embedded.destinationKubeconfig}`,
          `  clusters            ${controller.embedded.mode === "node" ? "node mode: real kubelets, the data really moves" : "kwok mode: pods do not run, no data moves"}`,
        ]
      : []),
    `  ledger              ${controller.dynamoEndpoint}  table ${controller.ledgerTableName}`,
    `  Lambda Invoke API   ${controller.lambdaEndpoint}`,
    `    phase function    ${controller.functionNames.phase}`,
    `    trigger function  ${controller.functionNames.trigger}`,
    `  trigger (HTTP)      POST ${controller.triggerUrl}  (CloudEvents, docs/events.md)`,
    `  relay health        ${controller.healthUrl}`,
    `  phase function log  ${controller.functionLogFile}`,
    "",
    "Drive it with your own tools:",
    `  aws lambda invoke --endpoint-url ${controller.lambdaEndpoint} --function-name ${controller.functionNames.phase} \\`,
    "    --cli-binary-format raw-in-base64-out --payload file://reconcile-request.json out.json   (any credentials)",
    `  curl -X POST ${controller.triggerUrl} -H 'content-type: application/cloudevents+json' -d @event.json`,
    "",
    "Start a migration:",
    ...(controller.embedded
      ? [
          `  export KUBECONFIG=${controller.hostKubeconfig} LEDGER_TABLE_NAME=${controller.ledgerTableName} AWS_ENDPOINT_URL_DYNAMODB=${controller.dynamoEndpoint}`,
          `  npm run dvm -- migrate -f ${controller.embedded.demoManifest}`,
          `  npm run dvm -- watch demo -n ${DEMO_DVM_NAMESPACE}        # live progress, then: npm run dvm -- report demo -n ${DEMO_DVM_NAMESPACE}`,
          ...(controller.embedded.arrivalsCommand ? ["", "Watch the files arrive on the destination:", `  ${controller.embedded.arrivalsCommand}`] : []),
        ]
      : ["  npm run dvm -- migrate -f your-dvm.yaml   (or kubectl apply; see README.md for the fields)"]),
    "",
    "Ctrl-C stops everything.",
    "",
  ];
  process.stderr.write(lines.join("\n"));

  // One Ctrl-C reaches this process twice (the terminal signals the whole group, and npm forwards it
  // too): only a second signal a moment later means "stop now, without cleaning up".
  let stoppingSince: number | undefined;
  const stop = async (signal: string) => {
    if (stoppingSince !== undefined) {
      if (Date.now() - stoppingSince > 1_000) process.exit(1);
      return;
    }
    stoppingSince = Date.now();
    say(`${signal}: stopping`);
    await controller.stop();
    say("stopped");
    process.exit(0);
  };
  process.on("SIGINT", () => void stop("SIGINT"));
  process.on("SIGTERM", () => void stop("SIGTERM"));
}

main().catch((error) => {
  process.stderr.write(`[dvm] could not start: ${errorText(error)}\n`);
  process.exit(1);
});
