/**
 * The chaos suites' environment from the global setup (test/setup/dynamo.ts, test/setup/clusters.ts):
 * the shared control planes and DynamoDB Local, or, for scenarios that restart the host API server, a
 * host control plane of the suite's own (the shared ones cannot be restarted from a test worker).
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { inject } from "vitest";
import { defaultBinDir } from "../../infra/dev/local/controlPlane";
import { type ChaosEnvironment, Observatory, startEnvironment } from "./harness";

export const HAVE_CONTROL_PLANE_BINARIES = ["etcd", "kube-apiserver", "kwok"].every((b) => existsSync(join(defaultBinDir(), b)));

export interface ChaosSuite {
  env: ChaosEnvironment;
  observatory: Observatory;
  stop(): Promise<void>;
}

export async function chaosSuite(options: { ownHost?: boolean } = {}): Promise<ChaosSuite> {
  const clusters = inject("clusters");
  const dynamo = inject("dynamo");
  if (!clusters || !dynamo) throw new Error("the chaos suites need the clusters and dynamo services (DVM_TEST_SERVICES)");
  const env = await startEnvironment({
    host: options.ownHost ? "start" : { kubeconfigPath: clusters.source.kubeconfigPath },
    destination: { kubeconfigPath: clusters.destination.kubeconfigPath },
    dynamo,
  });
  const observatory = await new Observatory({ host: env.host.kubeConfig, destination: env.destination.kubeConfig }).start();
  return {
    env,
    observatory,
    stop: async () => {
      await observatory.stop();
      await env.stop();
    },
  };
}
