/**
 * vitest globalSetup for the `nodes` project: two node-mode clusters (src/local/nodes), "source" and
 * "destination", each a real kubelet + containerd + runc in its own network namespace, with the transfer
 * image built from Debian's packages. A machine that cannot run them fails the project with the reason:
 * these tests are the only proof that bytes move, so they never skip quietly.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestProject } from "vitest/node";
import { defaultBinDir } from "../../src/local/controlPlane";
import { startNodeClusters } from "../../src/local/nodes/clusters";
import { nodeModeSupport } from "../../src/local/nodes/host";
import { ensureNodeImages } from "../../src/local/nodes/images";
import type { SlotPlan } from "../../src/local/nodes/plan";
import type { ProvidedCluster } from "./clusters";

export interface ProvidedNode {
  /** Pid of the node's mount-namespace holder: /proc/<pid>/root is the node's file system. */
  holderPid: number;
  nodeName: string;
  nodeIp: string;
  netns: string;
  containerdSocket: string;
}

export interface ProvidedNodes {
  source: ProvidedNode;
  destination: ProvidedNode;
  transferImage: string;
  pauseImage: string;
  storageClass: string;
  /** The plan's only routable range. */
  supernet: string;
  /** The slot's addresses. */
  plan: SlotPlan;
  /**
   * The slot's state folder: what a test adds is registered or kept there, so the slot's teardown removes
   * it (network namespaces listed in plan.env, loop devices over files in it).
   */
  stateDir: string;
}

declare module "vitest" {
  export interface ProvidedContext {
    nodes: ProvidedNodes;
  }
}

export default async function setup({ provide }: TestProject): Promise<() => Promise<void>> {
  const support = nodeModeSupport(defaultBinDir());
  if (!support.ok) throw new Error(`the nodes project runs real pods and cannot here: ${support.reason}`);
  const say = (line: string) => console.error(`[nodes] ${line}`);
  const images = await ensureNodeImages({ onProgress: say });
  const logDir = mkdtempSync(join(tmpdir(), "dvm-nodes-logs-"));
  if (process.env.DVM_KEEP_LOGS) say(`logs: ${logDir}`);
  const started = Date.now();
  const nodes = await startNodeClusters({ names: ["source", "destination"], images, logDir, say });
  say(`two node clusters ready in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  const [source, destination] = nodes.clusters;
  if (!source || !destination) throw new Error("node mode started fewer than two clusters");
  const cluster = (c: typeof source): ProvidedCluster => ({ name: c.name, kubeconfigPath: c.kubeconfigPath, etcdUrl: c.etcdUrl, nodeName: c.node.nodeName });
  const node = (c: typeof source, netns: string): ProvidedNode => ({
    holderPid: c.node.holderPid,
    nodeName: c.node.nodeName,
    nodeIp: c.node.nodeIp,
    netns,
    containerdSocket: c.node.containerdSocket,
  });
  provide("clusters", { local: true, source: cluster(source), destination: cluster(destination) });
  provide("nodes", {
    source: node(source, nodes.plan.nodes[0]!.netns),
    destination: node(destination, nodes.plan.nodes[1]!.netns),
    transferImage: images.transferImage,
    pauseImage: images.pauseImage,
    storageClass: "standard",
    supernet: nodes.plan.supernet,
    plan: nodes.plan,
    stateDir: nodes.stateDir,
  });
  return async () => {
    await nodes.stop();
    if (!process.env.DVM_KEEP_LOGS) rmSync(logDir, { recursive: true, force: true });
  };
}
