/**
 * One real node of a node-mode cluster: containerd + runc, the kubelet and kube-proxy, all inside the
 * node's network namespace and a private mount namespace; node 1 of a cluster also runs the cluster's
 * controller-manager and scheduler (one of each per cluster, as leader election would leave it).
 *
 * Why a private mount namespace: every mount the node makes (pod volumes, container root file systems,
 * the pods' network-namespace handles under /run/netns, its /tmp where local-path puts volumes) stays out of the machine's mount table and disappears with the node's last process, so a
 * crashed run cannot leave mounts behind. The namespace is held by a small "holder" process; everything
 * else joins it with nsenter. Files stay visible from outside: the node's state folder is an ordinary
 * folder, and its /tmp is `<dir>/tmp`.
 */
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CoreV1Api, type KubeConfig, type V1Node } from "@kubernetes/client-node";
import { type ManagedProcess, spawnLogged, tailFile } from "../processes";
import { GiveUp, waitFor } from "../wait";
import { type NodeComponent, recordComponent } from "./components";
import { CNI_BIN_DIR, host } from "./host";
import { importBaseName, type NodeImages } from "./images";
import { cniConfig } from "./network";
import type { NodeAddresses, SlotPlan } from "./plan";

export interface NodeOptions {
  plan: SlotPlan;
  node: NodeAddresses;
  /** The node's own folder (inside the slot's state folder). */
  dir: string;
  binDir: string;
  /** A kubeconfig (admin) for the kubelet, kube-proxy and the controllers; readable inside the node. */
  kubeconfigPath: string;
  kubeConfig: KubeConfig;
  images: NodeImages;
  /** The slot's pid file, read by the teardown of a crashed run. */
  pidFile: string;
  logDir: string;
  say: (line: string) => void;
}

export interface RealNode {
  name: string;
  nodeName: string;
  nodeIp: string;
  /** The node's state folder (components.ts stops and starts its kubelet and containerd from there). */
  dir: string;
  /** Where the node's /tmp is, seen from the machine (local-path volumes are under local-path-provisioner/). */
  tmpDir: string;
  /** Pid of the mount-namespace holder: /proc/<pid>/root is the node's view of the file system. */
  holderPid: number;
  containerdSocket: string;
  processes(): ManagedProcess[];
}

export async function startNode(options: NodeOptions): Promise<RealNode> {
  const { node, dir, plan } = options;
  const paths = {
    tmp: join(dir, "tmp"),
    cni: join(dir, "cni"),
    ipam: join(dir, "cni-ipam"),
    runc: join(dir, "runc"),
    containerdRoot: join(dir, "containerd", "root"),
    containerdState: join(dir, "containerd", "state"),
    socket: join(dir, "containerd.sock"),
    kubelet: join(dir, "kubelet"),
    podLogs: join(dir, "pod-logs"),
  };
  for (const folder of Object.values(paths)) if (folder !== paths.socket) mkdirSync(folder, { recursive: true });
  const children: ManagedProcess[] = [];
  const spawn = (name: string, command: string, args: string[]) => {
    const child = spawnLogged({ name: `${node.nodeName}-${name}`, command, args, logFile: join(options.logDir, `${name}.log`), pidFile: options.pidFile });
    children.push(child);
    return child;
  };

  // The holder: enters the node's network namespace, makes a private mount namespace, gives it its own
  // /run/netns and /tmp, and sleeps. Its argument names the node folder, so the teardown finds it.
  const ready = join(dir, "holder.ready");
  const holder = spawn("holder", "nsenter", [
    `--net=/run/netns/${node.netns}`,
    "--",
    "unshare",
    "--mount",
    "--propagation",
    "private",
    "--",
    "sh",
    "-c",
    'mount -t tmpfs -o mode=0755 dvm-netns /run/netns && mount --bind "$1/tmp" /tmp && touch "$1/holder.ready" && exec sleep infinity',
    "dvm-node-holder",
    dir,
  ]);
  await waitFor(
    `${node.nodeName}: mount namespace`,
    async () => {
      if (!holder.isRunning()) throw new GiveUp(`the node's namespace holder exited:\n${tailFile(holder.logFile)}`);
      return existsSync(ready);
    },
    10_000,
  );
  const inNode = (name: string, command: string, args: string[]) =>
    spawn(name, "nsenter", [`--target=${holder.pid}`, "--mount", "--net", "--", command, ...args]);
  // The kubelet and containerd, recorded so a fault test can stop and start them again (components.ts).
  const restartable = (name: NodeComponent, command: string, args: string[]) => {
    const child = inNode(name, command, args);
    const nsenterArgs = [`--target=${holder.pid}`, "--mount", "--net", "--", command, ...args];
    recordComponent(dir, name, { command: "nsenter", args: nsenterArgs, logFile: child.logFile, slotPidFile: options.pidFile }, child.pid);
    return child;
  };

  // containerd: its own root, state, socket and runc root; the pods' network from the CNI config below.
  writeFileSync(join(paths.cni, "10-dvm.conflist"), cniConfig(plan, node.index, paths.ipam));
  const containerdConfig = join(dir, "containerd.toml");
  writeFileSync(containerdConfig, containerdToml({ ...paths, pauseImage: options.images.pauseImage }));
  options.say(`${node.nodeName}: starting containerd`);
  const containerd = restartable("containerd", "containerd", ["--config", containerdConfig]);
  await waitFor(
    `${node.nodeName}: containerd`,
    async () => {
      if (!containerd.isRunning()) throw new GiveUp(`containerd exited:\n${tailFile(containerd.logFile)}`);
      return existsSync(paths.socket);
    },
    30_000,
    () => tailFile(containerd.logFile),
  );

  // Images come from files: nothing is ever pulled (there is no route to a registry anyway).
  options.say(`${node.nodeName}: importing the pause, transfer and local-path images`);
  for (const [tar, reference] of [
    [options.images.pauseTar, options.images.pauseImage],
    [options.images.transferTar, options.images.transferImage],
    [options.images.localPathTar, options.images.localPathImage],
  ] as const) {
    await host("ctr", ["--address", paths.socket, "--namespace", "k8s.io", "images", "import", "--base-name", importBaseName(reference), tar], {
      timeoutMs: 300_000,
    });
    const listed = await host("ctr", ["--address", paths.socket, "--namespace", "k8s.io", "images", "list", "--quiet"]);
    if (!listed.split("\n").includes(reference))
      throw new Error(`${node.nodeName}: importing ${tar} did not give ${reference} (have: ${listed.trim().replace(/\n/g, ", ")})`);
  }

  const runsControllers = node.indexInCluster === 0;
  options.say(`${node.nodeName}: starting the kubelet and kube-proxy${runsControllers ? ", the controller-manager and the scheduler" : ""}`);
  const kubeletConfig = join(dir, "kubelet.yaml");
  const resolvConf = join(dir, "resolv.conf");
  // Pods have no DNS server: nothing they could resolve is reachable, and no query should leave.
  writeFileSync(resolvConf, "options ndots:1\n");
  writeFileSync(kubeletConfig, JSON.stringify(kubeletConfiguration({ node, socket: paths.socket, podLogs: paths.podLogs, resolvConf }), null, 2));
  const bin = (name: string) => join(options.binDir, name);
  restartable("kubelet", bin("kubelet"), [
    `--config=${kubeletConfig}`,
    `--kubeconfig=${options.kubeconfigPath}`,
    `--hostname-override=${node.nodeName}`,
    `--node-ip=${node.nodeIp}`,
    `--root-dir=${paths.kubelet}`,
    `--cert-dir=${join(paths.kubelet, "pki")}`,
    "--v=1",
  ]);
  inNode("kube-proxy", bin("kube-proxy"), [
    `--kubeconfig=${options.kubeconfigPath}`,
    `--hostname-override=${node.nodeName}`,
    "--proxy-mode=iptables",
    `--cluster-cidr=${node.podCidr}`,
    // NodePorts answer on the node's fabric address only.
    `--nodeport-addresses=${plan.fabricCidr}`,
    // Conntrack limits are the machine's: a namespace may not change them.
    "--conntrack-max-per-core=0",
    "--conntrack-tcp-timeout-close-wait=0s",
    "--conntrack-tcp-timeout-established=0s",
    "--metrics-bind-address=127.0.0.1:10249",
    "--healthz-bind-address=127.0.0.1:10256",
    "--v=1",
  ]);
  if (runsControllers) {
    inNode("kube-controller-manager", bin("kube-controller-manager"), [
      `--kubeconfig=${options.kubeconfigPath}`,
      "--leader-elect=false",
      "--bind-address=127.0.0.1",
      `--service-cluster-ip-range=${node.serviceCidr}`,
      "--allocate-node-cidrs=false",
      "--use-service-account-credentials=false",
      "--v=1",
    ]);
    inNode("kube-scheduler", bin("kube-scheduler"), [`--kubeconfig=${options.kubeconfigPath}`, "--leader-elect=false", "--bind-address=127.0.0.1", "--v=1"]);
  }

  await waitForNodeReady(options.kubeConfig, node.nodeName, children);
  return {
    name: node.name,
    nodeName: node.nodeName,
    nodeIp: node.nodeIp,
    dir,
    tmpDir: paths.tmp,
    holderPid: holder.pid,
    containerdSocket: paths.socket,
    processes: () => [...children],
  };
}

function containerdToml(paths: { containerdRoot: string; containerdState: string; socket: string; runc: string; cni: string; pauseImage: string }): string {
  const q = (value: string) => JSON.stringify(value);
  return `version = 2
root = ${q(paths.containerdRoot)}
state = ${q(paths.containerdState)}
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp"]

[grpc]
  address = ${q(paths.socket)}

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = ${q(paths.pauseImage)}
  # Without it every sandbox fails: runc may not lower oom_score_adj here.
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        # The node's own runc root: the teardown finds exactly this node's containers there.
        Root = ${q(paths.runc)}
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = ${q(CNI_BIN_DIR)}
    conf_dir = ${q(paths.cni)}
`;
}

function kubeletConfiguration(options: { node: NodeAddresses; socket: string; podLogs: string; resolvConf: string }): Record<string, unknown> {
  return {
    apiVersion: "kubelet.config.k8s.io/v1beta1",
    kind: "KubeletConfiguration",
    containerRuntimeEndpoint: `unix://${options.socket}`,
    // This machine has cgroup v1, which kubelet 1.36 refuses unless told otherwise; no QoS hierarchy
    // and no node-allocatable enforcement (both need cgroup layouts a shared machine does not have).
    failCgroupV1: false,
    cgroupDriver: "cgroupfs",
    cgroupsPerQOS: false,
    enforceNodeAllocatable: [],
    failSwapOn: false,
    address: options.node.nodeIp,
    port: 10250,
    readOnlyPort: 0,
    healthzBindAddress: "127.0.0.1",
    healthzPort: 10248,
    // Reached only from this machine, through the fabric (kubectl logs, exec): no client certificates.
    authentication: { anonymous: { enabled: true }, webhook: { enabled: false } },
    authorization: { mode: "AlwaysAllow" },
    podLogsDir: options.podLogs,
    resolvConf: options.resolvConf,
    // The images were imported from files and cannot be pulled again: never collect them.
    imageGCHighThresholdPercent: 100,
    imageGCLowThresholdPercent: 99,
    evictionHard: { "memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%", "nodefs.inodesFree": "1%" },
    serializeImagePulls: false,
    protectKernelDefaults: false,
    shutdownGracePeriod: "0s",
    registerNode: true,
  };
}

async function waitForNodeReady(kc: KubeConfig, nodeName: string, children: ManagedProcess[]): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  await waitFor(
    `node ${nodeName} Ready`,
    async () => {
      const dead = children.find((c) => !c.isRunning());
      if (dead) throw new GiveUp(`${dead.name} exited:\n${tailFile(dead.logFile)}`);
      const node: V1Node = await core.readNode({ name: nodeName });
      return node.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") === true;
    },
    120_000,
    () => children.map((c) => `--- ${c.name}\n${tailFile(c.logFile, 8)}`).join("\n"),
    500,
  );
}
