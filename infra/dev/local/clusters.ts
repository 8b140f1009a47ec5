/**
 * `npm run clusters`: the two local clusters alone (no controller), for trying things with your own
 * tools. Node mode where the machine allows it (real kubelets), else kwok; Ctrl-C stops and removes all
 * of it (processes, network namespaces, bridge, mounts).
 */
import { join } from "node:path";
import { parseArgs } from "node:util";
import { errorText } from "../../../src/lib/errorMessage";
import { startEmbeddedClusters } from "./embeddedClusters";

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { mode: { type: "string" }, "state-dir": { type: "string" }, help: { type: "boolean", short: "h" } } });
  if (values.help) {
    console.log(
      "Usage: npm run clusters [-- --mode node|kwok|auto] [--state-dir DIR]\n\nStarts the two local clusters (source, destination) and the demo's PVCs; Ctrl-C stops them.",
    );
    return;
  }
  const mode = values.mode ?? "auto";
  if (mode !== "auto" && mode !== "node" && mode !== "kwok") throw new Error(`--mode: "${mode}" is not one of node, kwok, auto`);
  const say = (line: string) => process.stderr.write(`[clusters] ${line}\n`);
  const started = Date.now();
  const clusters = await startEmbeddedClusters({ mode, stateDir: values["state-dir"] ?? join(process.cwd(), ".dvm", "clusters"), say });
  say(`ready in ${((Date.now() - started) / 1000).toFixed(1)} s (${clusters.mode} mode)`);
  process.stderr.write(
    `\n  source      KUBECONFIG=${clusters.hostKubeconfig}\n  destination KUBECONFIG=${clusters.destinationKubeconfig}\n\nCtrl-C stops them.\n`,
  );
  const stop = async (signal: string) => {
    say(`${signal}: stopping`);
    await clusters.stop();
    process.exit(0);
  };
  process.once("SIGINT", () => void stop("SIGINT"));
  process.once("SIGTERM", () => void stop("SIGTERM"));
}

main().catch((error) => {
  process.stderr.write(`[clusters] could not start: ${errorText(error)}\n`);
  process.exit(1);
});
