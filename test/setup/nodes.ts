/**
 * vitest globalSetup for the `nodes` project: two node-mode clusters (infra/dev/local/nodes), "source" and
 * "destination", of two nodes each (a real kubelet + containerd + runc in its own network namespace), with
 * kind's storage (local-path, WaitForFirstConsumer) and the transfer image built from Debian's packages. A machine that cannot run them fails the project with the reason:
 * these tests are the only proof that bytes move, so they never skip quietly.
 *
 * The `deployed` project's migration on real pods uses the same clusters (test/setup/deployedNodes.ts).
 * vitest runs every project's global setup in one process before any file and their teardowns at the
 * end, and runs the files of these projects one at a time; so the clusters are started once per process
 * and shared: a second project's setup gets the same ones, and the last teardown stops them. One
 * `npm test` thus never holds two node-cluster sets (two slots, twice the kubelets on the same cores).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestProject } from "vitest/node";
import { defaultBinDir } from "../../infra/dev/local/controlPlane";
import { startNodeClusters } from "../../infra/dev/local/nodes/clusters";
import { nodeModeSupport } from "../../infra/dev/local/nodes/host";
import { ensureNodeImages } from "../../infra/dev/local/nodes/images";
import type { SlotPlan } from "../../infra/dev/local/nodes/plan";
import type { ProvidedCluster, ProvidedClusters } from "./clusters";

export interface ProvidedNode {
  /** Pid of the node's mount-namespace holder: /proc/<pid>/root is the node's file system. */
  holderPid: number;
  nodeName: string;
  nodeIp: string;
  netns: string;
  containerdSocket: string;
  /** The node's state folder: infra/dev/local/nodes/components.ts stops and starts its kubelet and containerd. */
  dir: string;
}

export interface ProvidedNodes {
  /** Node 1 of each cluster. */
  source: ProvidedNode;
  destination: ProvidedNode;
  /** Every node of each cluster, node 1 first. */
  sourceNodes: ProvidedNode[];
  destinationNodes: ProvidedNode[];
  /** Each cluster's API server URL: tells which cluster a KubeConfig is for. */
  servers: { source: string; destination: string };
  transferImage: string;
  pauseImage: string;
  localPathImage: string;
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

interface StartedNodes {
  clusters: ProvidedClusters;
  nodes: ProvidedNodes;
  stop(): Promise<void>;
}

/** This process's node clusters: started by the first setup that asks, stopped when the last lets go. */
interface SharedNodes {
  started: Promise<StartedNodes>;
  users: number;
}
const SHARED = Symbol.for("dvm.test.nodeClusters");
const shared = globalThis as { [SHARED]?: SharedNodes };

/** Why node mode cannot run here, or undefined when it can. */
export function nodeModeUnsupported(): string | undefined {
  const support = nodeModeSupport(defaultBinDir());
  return support.ok ? undefined : support.reason;
}

/** Provides "clusters" and "nodes" to `project` from this process's node clusters; returns its teardown. */
export async function provideNodeClusters(project: TestProject): Promise<() => Promise<void>> {
  let entry = shared[SHARED];
  if (entry) entry.users++;
  else {
    entry = { started: startNodes(), users: 1 };
    shared[SHARED] = entry;
  }
  const own = entry;
  const release = async () => {
    own.users--;
    if (own.users > 0) return;
    delete shared[SHARED];
    await (await own.started.catch(() => undefined))?.stop();
  };
  let started: StartedNodes;
  try {
    started = await own.started;
  } catch (error) {
    await release();
    throw error;
  }
  project.provide("clusters", started.clusters);
  project.provide("nodes", started.nodes);
  return release;
}

async function startNodes(): Promise<StartedNodes> {
  const say = (line: string) => console.error(`[nodes] ${line}`);
  const images = await ensureNodeImages({ onProgress: say });
  const logDir = mkdtempSync(join(tmpdir(), "dvm-nodes-logs-"));
  if (process.env.DVM_KEEP_LOGS) say(`logs: ${logDir}`);
  const started = Date.now();
  const nodes = await startNodeClusters({ names: ["source", "destination"], images, logDir, say });
  say(`two node clusters of ${nodes.plan.clusters[0]?.nodes.length} nodes each ready in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  const [source, destination] = nodes.clusters;
  if (!source || !destination) throw new Error("node mode started fewer than two clusters");
  const cluster = (c: typeof source): ProvidedCluster => ({ name: c.name, kubeconfigPath: c.kubeconfigPath, etcdUrl: c.etcdUrl, nodeName: c.node.nodeName });
  const netnsOf = (nodeName: string) => nodes.plan.nodes.find((n) => n.nodeName === nodeName)?.netns ?? "";
  const node = (n: typeof source.node): ProvidedNode => ({
    holderPid: n.holderPid,
    nodeName: n.nodeName,
    nodeIp: n.nodeIp,
    netns: netnsOf(n.nodeName),
    containerdSocket: n.containerdSocket,
    dir: n.dir,
  });
  return {
    clusters: { local: true, source: cluster(source), destination: cluster(destination) },
    nodes: {
      source: node(source.node),
      destination: node(destination.node),
      sourceNodes: source.nodes.map(node),
      destinationNodes: destination.nodes.map(node),
      servers: { source: source.server, destination: destination.server },
      transferImage: images.transferImage,
      pauseImage: images.pauseImage,
      localPathImage: images.localPathImage,
      storageClass: "standard",
      supernet: nodes.plan.supernet,
      plan: nodes.plan,
      stateDir: nodes.stateDir,
    },
    stop: async () => {
      await nodes.stop();
      if (!process.env.DVM_KEEP_LOGS) rmSync(logDir, { recursive: true, force: true });
    },
  };
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const unsupported = nodeModeUnsupported();
  if (unsupported) throw new Error(`the nodes project runs real pods and cannot here: ${unsupported}`);
  return provideNodeClusters(project);
}
