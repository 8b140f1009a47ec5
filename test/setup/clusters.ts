/**
 * vitest globalSetup for "clusters": two Kubernetes API servers for the integration tests, "source"
 * and "destination", started once per run (infra/dev/local/controlPlane.ts) unless the environment names
 * existing clusters:
 *   DVM_SOURCE_KUBECONFIG / DVM_DESTINATION_KUBECONFIG   a kubeconfig file per side (its current context), or
 *   KUBECONFIG (+ DVM_SOURCE_CONTEXT / DVM_DESTINATION_CONTEXT, default: the current context).
 * Either way this project's CRDs (infra/deploy/crds) are installed. Tests read the clusters with
 * testClusters() from test/support/clusters.ts.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { KubeConfig } from "@kubernetes/client-node";
import type { TestProject } from "vitest/node";
import { type ControlPlane, DEFAULT_CRD_DIR, startControlPlane } from "../../infra/dev/local/controlPlane";
import { installCrds } from "../../infra/dev/local/crds";
import { wantsService } from "./services";

export interface ProvidedCluster {
  name: string;
  kubeconfigPath: string;
  /** Set when the cluster was started here: etcd's client URL, for compaction. */
  etcdUrl?: string;
  /** The kwok node pods get bound to, when started here. */
  nodeName?: string;
}

export interface ProvidedClusters {
  /** true: started by this run (etcd reachable, kwok node present); false: existing clusters. */
  local: boolean;
  source: ProvidedCluster;
  destination: ProvidedCluster;
}

declare module "vitest" {
  export interface ProvidedContext {
    clusters: ProvidedClusters | null;
  }
}

export default async function setup({ provide }: TestProject): Promise<() => Promise<void>> {
  if (!wantsService("clusters")) {
    provide("clusters", null);
    return async () => {};
  }

  const external = externalClusters();
  if (external) {
    // The tests need this project's CRDs, as they are in infra/deploy/crds (create or replace).
    for (const side of [external.clusters.source, external.clusters.destination]) {
      const kc = new KubeConfig();
      kc.loadFromFile(side.kubeconfigPath);
      await installCrds(kc, DEFAULT_CRD_DIR);
    }
    provide("clusters", external.clusters);
    return async () => external.cleanup();
  }

  const logRoot = mkdtempSync(join(tmpdir(), "dvm-test-logs-"));
  if (process.env.DVM_KEEP_LOGS) console.error(`[clusters] control plane logs: ${logRoot}`);
  const started = await Promise.allSettled((["source", "destination"] as const).map((name) => startControlPlane({ name, logDir: join(logRoot, name) })));
  const planes = started.flatMap((r) => (r.status === "fulfilled" ? [r.value] : []));
  const failed = started.find((r): r is PromiseRejectedResult => r.status === "rejected");
  if (failed) {
    await Promise.all(planes.map((p) => p.stop()));
    throw failed.reason;
  }
  const [source, destination] = planes as [ControlPlane, ControlPlane];
  const describe = (p: ControlPlane): ProvidedCluster => ({
    name: p.name,
    kubeconfigPath: p.kubeconfigPath,
    etcdUrl: p.etcdUrl,
    ...(p.nodeName ? { nodeName: p.nodeName } : {}),
  });
  provide("clusters", { local: true, source: describe(source), destination: describe(destination) });

  return async () => {
    await Promise.all([source.stop(), destination.stop()]);
    // Logs are only worth keeping when something went wrong; vitest does not tell us, so keep them
    // only on request.
    if (!process.env.DVM_KEEP_LOGS) rmSync(logRoot, { recursive: true, force: true });
  };
}

/** Existing clusters named by the environment, as one kubeconfig file per side; undefined if none. */
function externalClusters(): { clusters: ProvidedClusters; cleanup: () => void } | undefined {
  const sourceFile = process.env.DVM_SOURCE_KUBECONFIG;
  const destinationFile = process.env.DVM_DESTINATION_KUBECONFIG;
  if (!sourceFile && !destinationFile && !process.env.KUBECONFIG) return undefined;

  // Each side becomes a kubeconfig file whose current context is the chosen one, so consumers need
  // only a path. KUBECONFIG may list several files; client-node merges them as kubectl does.
  const dir = mkdtempSync(join(tmpdir(), "dvm-test-kubeconfig-"));
  const side = (name: "source" | "destination", file: string | undefined, context: string | undefined): ProvidedCluster => {
    const kc = new KubeConfig();
    if (file) kc.loadFromFile(file);
    else kc.loadFromDefault();
    if (context) {
      if (!kc.getContextObject(context)) throw new Error(`clusters: context "${context}" not found for ${name}`);
      kc.setCurrentContext(context);
    }
    if (!kc.getCurrentCluster()) throw new Error(`clusters: no current cluster for ${name} (check KUBECONFIG)`);
    const kubeconfigPath = join(dir, `${name}.kubeconfig`);
    writeFileSync(kubeconfigPath, kc.exportConfig(), { mode: 0o600 });
    return { name, kubeconfigPath };
  };
  return {
    clusters: {
      local: false,
      source: side("source", sourceFile, process.env.DVM_SOURCE_CONTEXT),
      destination: side("destination", destinationFile, process.env.DVM_DESTINATION_CONTEXT),
    },
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}
