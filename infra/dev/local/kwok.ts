/**
 * kwok, a fake kubelet, run out of cluster against a local (or any) API server. It manages only nodes
 * annotated kwok.x-k8s.io/node=fake and walks the pods bound to them through the stages in
 * infra/dev/kwok/stages.yaml (Running, then Succeeded or Failed; deleted pods disappear).
 */
import { join } from "node:path";
import { CoreV1Api, type KubeConfig, type V1Node } from "@kubernetes/client-node";
import { childEnvironment } from "./config";
import { statusCode } from "./crds";
import { type ManagedProcess, spawnLogged, tailFile } from "./processes";
import { GiveUp, waitFor } from "./wait";

export const KWOK_NODE_NAME = "kwok-node";
export const KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node";

export async function startKwok(opts: {
  binDir: string;
  kubeconfigPath: string;
  stagesFile: string;
  workDir: string;
  logDir: string;
  pidFile: string;
}): Promise<ManagedProcess> {
  const logFile = join(opts.logDir, "kwok.log");
  return spawnLogged({
    name: "kwok",
    command: join(opts.binDir, "kwok"),
    args: [
      `--kubeconfig=${opts.kubeconfigPath}`,
      `--config=${opts.stagesFile}`,
      "--manage-all-nodes=false",
      `--manage-nodes-with-annotation-selector=${KWOK_NODE_ANNOTATION}=fake`,
      // Room for many short-lived test pods (the default /24 pool is small); never routed, but kept inside
      // 198.18.0.0/15 like every local address.
      "--cidr=198.19.128.0/17",
    ],
    logFile,
    pidFile: opts.pidFile,
    // kwok also reads ~/.kwok/kwok.yaml when it exists; a private HOME keeps a developer's file out.
    env: childEnvironment({ HOME: opts.workDir }),
  });
}

/** Creates (or keeps) the fake node and waits until kwok has marked it Ready. */
export async function ensureKwokNode(kc: KubeConfig, kwok: ManagedProcess, nodeName = KWOK_NODE_NAME): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  const capacity = { cpu: "1k", memory: "1Ti", pods: "1k" };
  const node: V1Node = {
    apiVersion: "v1",
    kind: "Node",
    metadata: {
      name: nodeName,
      annotations: { [KWOK_NODE_ANNOTATION]: "fake", "node.alpha.kubernetes.io/ttl": "0" },
      labels: { "kubernetes.io/hostname": nodeName, "kubernetes.io/os": "linux", type: "kwok" },
    },
    status: { allocatable: capacity, capacity },
  };
  try {
    await core.createNode({ body: node });
  } catch (err) {
    if (statusCode(err) !== 409) throw err;
  }
  await waitFor(
    `kwok to mark node ${nodeName} Ready`,
    async () => {
      if (!kwok.isRunning()) throw new GiveUp(`kwok exited early:\n${tailFile(kwok.logFile)}`);
      const n = await core.readNode({ name: nodeName });
      return n.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") ?? false;
    },
    30_000,
    () => tailFile(kwok.logFile),
  );
}
