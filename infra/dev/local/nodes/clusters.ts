/**
 * Node mode: two (or one) Kubernetes clusters of two nodes each whose pods really run. Each cluster is a
 * local control plane (etcd + kube-apiserver, infra/dev/local/controlPlane.ts) listening on the fabric bridge,
 * plus two real nodes (infra/dev/local/nodes/node.ts), each in its own network namespace, and kind's storage:
 * local-path-provisioner as the default StorageClass (infra/dev/local/nodes/localPath.ts). Used by the `nodes` test project, the
 * data-phase benchmark and `npm start` where the machine allows it.
 *
 * A run owns a "slot" (infra/dev/local/nodes/plan.ts): its state folder, bridge, namespaces and addresses. Stop
 * (or, if this process dies, a watchdog) runs infra/dev/nodes/teardown.sh, which removes all of it; a slot left
 * by a crashed owner is torn down before reuse.
 */
import { closeSync, mkdirSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync, writeSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { KubeConfig } from "@kubernetes/client-node";
import { type ControlPlane, defaultBinDir, startControlPlane } from "../controlPlane";
import { spawnLogged, stopProcess } from "../processes";
import { host, nodeModeSupport } from "./host";
import type { NodeImages } from "./images";
import { installLocalPath } from "./localPath";
import { createNetwork } from "./network";
import { type RealNode, startNode } from "./node";
import { MAX_SLOTS, type SlotPlan, slotPlan } from "./plan";

const TEARDOWN = fileURLToPath(new URL("../../nodes/teardown.sh", import.meta.url));
/**
 * How long a slot's teardown may take: it stops every node's pods, containerd and kubelet and removes
 * their namespaces, which took 80 s on a machine at load 20; cut short, it left the slot half built.
 */
const TEARDOWN_TIMEOUT_MS = 300_000;
export const NODES_STATE_ROOT = "/var/tmp/dvm-nodes";

/** The default StorageClass every node-mode cluster has, as in kind: local-path, WaitForFirstConsumer. */
export const NODE_STORAGE_CLASS = "standard";

export interface NodeCluster {
  name: string;
  kubeconfigPath: string;
  server: string;
  etcdUrl: string;
  controlPlane: ControlPlane;
  /** Node 1 (it also runs the controller-manager and the scheduler). */
  node: RealNode;
  /** Every node, node 1 first. */
  nodes: RealNode[];
  kubeConfig(): KubeConfig;
}

export interface NodeClusters {
  plan: SlotPlan;
  stateDir: string;
  clusters: NodeCluster[];
  images: NodeImages;
  stop(): Promise<void>;
}

export interface NodeClustersOptions {
  /** Cluster names, e.g. ["source", "destination"]. */
  names: readonly string[];
  images: NodeImages;
  binDir?: string;
  /** Where logs go (kept after stop); default inside the state folder (removed on stop). */
  logDir?: string;
  say?: (line: string) => void;
}

export async function startNodeClusters(options: NodeClustersOptions): Promise<NodeClusters> {
  const say = options.say ?? (() => {});
  const binDir = options.binDir ?? defaultBinDir();
  const support = nodeModeSupport(binDir);
  if (!support.ok) throw new Error(support.reason);

  const { slot, stateDir } = await acquireSlot();
  const plan = slotPlan(slot, options.names);
  const pidFile = join(stateDir, "pids");
  writeFileSync(join(stateDir, "plan.env"), `BRIDGE=${plan.bridge}\nNETNS="${plan.nodes.map((n) => n.netns).join(" ")}"\n`);
  const logRoot = options.logDir ?? join(stateDir, "logs");
  mkdirSync(logRoot, { recursive: true });
  // Outlives a SIGKILLed owner: then it tears the slot down (as a child, not exec'd, so its command line
  // still names the owner while it runs: watchdogRunning).
  const watchdog = spawnLogged({
    name: `dvm-nodes-slot${slot}-watchdog`,
    command: "sh",
    args: ["-c", 'while kill -0 "$1" 2>/dev/null; do sleep 1; done; bash "$2" "$3"', "watchdog", String(process.pid), TEARDOWN, stateDir],
    logFile: join(logRoot, "watchdog.log"),
    outlivesParent: true,
  });
  const planes: ControlPlane[] = [];
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    say("stopping the node clusters");
    try {
      await host("bash", [TEARDOWN, stateDir], { timeoutMs: TEARDOWN_TIMEOUT_MS });
    } finally {
      // Even after a failed teardown: a watchdog left behind would tear the slot down later, under the
      // next owner (the next owner's own teardown, before it builds, removes what this one left).
      await Promise.all(planes.map((p) => p.stop()));
      await stopProcess(watchdog, 1_000);
      rmSync(lockFile(slot), { force: true });
    }
  };

  try {
    say(`slot ${slot}: network ${plan.fabricCidr} on bridge ${plan.bridge}, namespaces ${plan.nodes.map((n) => n.netns).join(", ")}`);
    await createNetwork(plan);
    say("starting etcd and kube-apiserver for each cluster");
    const started = await Promise.allSettled(
      plan.clusters.map((cluster) =>
        startControlPlane({
          name: cluster.name,
          binDir,
          withKwok: false,
          serviceAccounts: true,
          bindAddress: plan.bridgeIp,
          serviceCidr: cluster.serviceCidr,
          logDir: join(logRoot, cluster.name),
        }),
      ),
    );
    for (const result of started) if (result.status === "fulfilled") planes.push(result.value);
    const failed = started.find((r): r is PromiseRejectedResult => r.status === "rejected");
    if (failed) throw failed.reason;

    // Every node at once: most of a node's start is importing the images into its containerd.
    const clusters = await Promise.all(
      plan.clusters.map(async (cluster, i): Promise<NodeCluster> => {
        const plane = planes[i]!;
        const nodes = await Promise.all(
          cluster.nodes.map(async (node) => {
            const dir = join(stateDir, "nodes", node.nodeName);
            mkdirSync(dir, { recursive: true });
            // The kubelet and friends read it inside the node's namespaces, where the control plane's own
            // temp folder is not visible.
            const kubeconfigPath = join(dir, "admin.kubeconfig");
            writeFileSync(kubeconfigPath, readFileSync(plane.kubeconfigPath), { mode: 0o600 });
            const logDir = join(logRoot, cluster.name, node.nodeName);
            mkdirSync(logDir, { recursive: true });
            return startNode({
              plan,
              node,
              dir,
              binDir,
              kubeconfigPath,
              kubeConfig: plane.kubeConfig(),
              images: options.images,
              pidFile,
              logDir,
              say,
            });
          }),
        );
        say(`${cluster.name}: installing local-path-provisioner (StorageClass ${NODE_STORAGE_CLASS})`);
        await installLocalPath({
          kubeConfig: plane.kubeConfig(),
          server: plane.server,
          image: options.images.localPathImage,
          helperImage: options.images.transferImage,
          storageClass: NODE_STORAGE_CLASS,
        });
        return {
          name: cluster.name,
          kubeconfigPath: plane.kubeconfigPath,
          server: plane.server,
          etcdUrl: plane.etcdUrl,
          controlPlane: plane,
          node: nodes[0]!,
          nodes,
          kubeConfig: plane.kubeConfig,
        };
      }),
    );
    return { plan, stateDir, clusters, images: options.images, stop };
  } catch (error) {
    await stop().catch(() => undefined);
    throw error;
  }
}

function lockFile(slot: number): string {
  return join(NODES_STATE_ROOT, `slot${slot}.lock`);
}

/**
 * Whether the watchdog of a dead owner is still tearing its slot down: taking the slot meanwhile would let
 * that teardown remove the new owner's network. Its command line names the owner's pid after "watchdog".
 */
function watchdogRunning(owner: number): boolean {
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const args = readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0");
      const at = args.indexOf("watchdog");
      if (at >= 0 && args[at + 1] === String(owner) && args.includes(TEARDOWN)) return true;
    } catch {
      // gone meanwhile
    }
  }
  return false;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The first free slot; a slot whose owner is gone is torn down and taken. */
async function acquireSlot(): Promise<{ slot: number; stateDir: string }> {
  mkdirSync(NODES_STATE_ROOT, { recursive: true });
  for (let slot = 0; slot < MAX_SLOTS; slot++) {
    const lock = lockFile(slot);
    const stateDir = join(NODES_STATE_ROOT, `slot${slot}`);
    let fd: number;
    try {
      fd = openSync(lock, "wx");
    } catch {
      const owner = Number(readFileSync(lock, "utf8").trim());
      if (Number.isInteger(owner) && owner > 0 && (alive(owner) || watchdogRunning(owner))) continue;
      // Stale: its owner died. Remove what it left, then take the slot.
      await host("bash", [TEARDOWN, stateDir], { timeoutMs: TEARDOWN_TIMEOUT_MS });
      rmSync(lock, { force: true });
      try {
        fd = openSync(lock, "wx");
      } catch {
        continue; // someone else took it meanwhile
      }
    }
    writeSync(fd, `${process.pid}\n`);
    closeSync(fd);
    await host("bash", [TEARDOWN, stateDir], { timeoutMs: TEARDOWN_TIMEOUT_MS });
    mkdirSync(stateDir, { recursive: true });
    return { slot, stateDir };
  }
  throw new Error(`node mode: all ${MAX_SLOTS} slots are in use (${NODES_STATE_ROOT}/slot*.lock)`);
}
