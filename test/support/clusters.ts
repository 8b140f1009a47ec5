/**
 * The two clusters of an integration run (see test/setup/clusters.ts), for tests:
 *   const { source, destination } = testClusters();
 */
import { KubeConfig } from "@kubernetes/client-node";
import { inject } from "vitest";
import type { ProvidedCluster, ProvidedClusters } from "../setup/clusters";

export interface TestClusters {
  source: KubeConfig;
  destination: KubeConfig;
  /** What the global setup provided: paths, etcd URLs (local only), whether it started them. */
  info: ProvidedClusters;
}

export function testClusters(): TestClusters {
  const info = inject("clusters");
  if (!info) {
    throw new Error('no clusters in this run: the "clusters" service is off (DVM_TEST_SERVICES) or this is not the integration project');
  }
  return { source: load(info.source), destination: load(info.destination), info };
}

function load(cluster: ProvidedCluster): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(cluster.kubeconfigPath);
  return kc;
}
