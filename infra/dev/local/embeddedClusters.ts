/**
 * The two clusters `npm start` brings up when no KUBECONFIG is given, and the demo on them.
 *
 * - node mode (default where the machine allows it: root, runc, containerd, the node binaries): real
 *   kubelets run the transfer pods, the demo's source PVCs hold a few hundred MiB of real files, and the
 *   data really moves across the two nodes' network namespaces (infra/dev/local/nodes).
 * - kwok mode (elsewhere, or when asked): kube-apiserver + etcd with kwok as a fake kubelet; pods
 *   "succeed" without running, nothing moves. Fast, and enough to watch the phases go by.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CoreV1Api, type KubeConfig, StorageV1Api } from "@kubernetes/client-node";
import { type ControlPlane, defaultBinDir, startControlPlane } from "./controlPlane";
import { writeDataset } from "./demoData";
import { startNodeClusters } from "./nodes/clusters";
import { nodeModeSupport } from "./nodes/host";
import { ensureNodeImages, type NodeImages, NodeImagesUnavailableError } from "./nodes/images";
import { provisionedOn } from "./nodes/localPath";
import { volumeFolder } from "./nodes/volumes";

export type ClusterMode = "node" | "kwok";

export interface EmbeddedClusters {
  mode: ClusterMode;
  hostKubeconfig: string;
  destinationKubeconfig: string;
  /** A DVM manifest ready to apply. */
  demoManifest: string;
  /** Node mode: a shell command that lists the demo's files as they arrive on the destination. */
  arrivalsCommand?: string;
  /** Node mode: the transfer image built here (the controller makes it the default). */
  transferImage?: string;
  stop(): Promise<void>;
}

export interface EmbeddedClustersOptions {
  /** "auto" (default): node mode where the machine allows it, else kwok with the reason said once. */
  mode?: ClusterMode | "auto";
  stateDir: string;
  say: (line: string) => void;
}

/** Where the demo DVM lives: an admin namespace, since it moves PVCs of another namespace. */
export const DEMO_DVM_NAMESPACE = "dvm-system";
const DEMO_NAMESPACE = "demo";
const MiB = 1024 * 1024;
const DEMO_VOLUMES = [
  { name: "data", size: "1Gi", bytes: 160 * MiB, files: 2_500 },
  { name: "uploads", size: "2Gi", bytes: 140 * MiB, files: 1_500 },
] as const;

export async function startEmbeddedClusters(options: EmbeddedClustersOptions): Promise<EmbeddedClusters> {
  const mode = await chooseMode(options);
  return mode === "node" ? startNodeMode(options) : startKwokMode(options);
}

async function chooseMode(options: EmbeddedClustersOptions): Promise<ClusterMode> {
  const wanted = options.mode ?? "auto";
  if (wanted !== "auto") return wanted;
  const support = nodeModeSupport(defaultBinDir());
  if (support.ok) return "node";
  options.say(`kwok mode (pods do not run, no data moves): ${support.reason}`);
  return "kwok";
}

async function startKwokMode(options: EmbeddedClustersOptions): Promise<EmbeddedClusters> {
  options.say("starting two embedded control planes (kube-apiserver + etcd + kwok)");
  const planes: ControlPlane[] = [];
  const stop = async () => {
    for (const plane of planes.reverse()) await plane.stop();
  };
  try {
    for (const name of ["source", "destination"]) planes.push(await startControlPlane({ name, logDir: join(options.stateDir, "logs", name) }));
    const [source, destination] = planes as [ControlPlane, ControlPlane];
    await seedDemo(source.kubeConfig(), destination.kubeConfig());
    // kwok has no storage: a class for the destination PVCs to name.
    await destination
      .kubeConfig()
      .makeApiClient(StorageV1Api)
      .createStorageClass({ body: { metadata: { name: "standard" }, provisioner: "kubernetes.io/no-provisioner" } })
      .catch(exists);
    return { mode: "kwok", ...writeFiles(options.stateDir, source.kubeConfig(), destination.kubeConfig(), {}), stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

async function startNodeMode(options: EmbeddedClustersOptions): Promise<EmbeddedClusters> {
  const say = options.say;
  let images: NodeImages;
  try {
    images = await ensureNodeImages({ onProgress: (line) => say(line) });
  } catch (error) {
    if (!(error instanceof NodeImagesUnavailableError) || options.mode === "node") throw error;
    say(`kwok mode (pods do not run, no data moves): ${error.message}`);
    return startKwokMode(options);
  }
  say("starting two node-mode clusters (a real kubelet, containerd and runc each, in their own network namespaces)");
  const nodes = await startNodeClusters({ names: ["source", "destination"], images, logDir: join(options.stateDir, "logs", "nodes"), say });
  try {
    const [source, destination] = nodes.clusters as [(typeof nodes.clusters)[0], (typeof nodes.clusters)[0]];
    // One volume on each source node: local-path binds a volume to its node.
    await seedDemo(source.kubeConfig(), destination.kubeConfig(), { storageClass: "standard", nodes: source.nodes.map((n) => n.nodeName) });
    say(`writing the demo's files (${DEMO_VOLUMES.map((v) => `${v.bytes / MiB} MiB in ${v.files} files`).join(", ")})`);
    for (const [i, volume] of DEMO_VOLUMES.entries()) {
      writeDataset(await volumeFolder(source.kubeConfig(), source.nodes, DEMO_NAMESPACE, volume.name), {
        bytes: volume.bytes,
        files: volume.files,
        seed: i + 1,
      });
    }
    // A destination node's /tmp is an ordinary folder of the machine: its local-path volumes are there.
    const arrivals = destination.nodes.map((n) => `${join(n.tmpDir, "local-path-provisioner")}/*/`).join(" ");
    const arrivalsCommand = `watch -n1 'for v in ${arrivals}; do [ -d "$v" ] || continue; printf "%s  %s files\\n" "$(du -sh "$v" | cut -f1)" "$(find "$v" -type f | wc -l)"; done'`;
    return {
      mode: "node",
      ...writeFiles(options.stateDir, source.kubeConfig(), destination.kubeConfig(), { endpointType: "NodePort", runAsRoot: true }),
      arrivalsCommand,
      transferImage: images.transferImage,
      stop: nodes.stop,
    };
  } catch (error) {
    await nodes.stop();
    throw error;
  }
}

function exists(error: unknown): void {
  if ((error as { code?: number }).code !== 409) throw error;
}

/**
 * A sandbox to try a migration on: namespace "demo" with two PVCs on the source, the destination's
 * kubeconfig as a Secret in the DVMs' admin namespace.
 */
async function seedDemo(source: KubeConfig, destination: KubeConfig, options: { storageClass?: string; nodes?: readonly string[] } = {}): Promise<void> {
  const core = source.makeApiClient(CoreV1Api);
  for (const name of [DEMO_NAMESPACE, DEMO_DVM_NAMESPACE]) await core.createNamespace({ body: { metadata: { name } } }).catch(exists);
  for (const [i, volume] of DEMO_VOLUMES.entries()) {
    // Node-mode storage waits for a first consumer: name the node, so the demo's files can be written now.
    const node = options.nodes?.[i % options.nodes.length];
    await core
      .createNamespacedPersistentVolumeClaim({
        namespace: DEMO_NAMESPACE,
        body: {
          metadata: { name: volume.name, ...(node ? { annotations: provisionedOn(node) } : {}) },
          spec: {
            accessModes: ["ReadWriteOnce"],
            resources: { requests: { storage: volume.size } },
            ...(options.storageClass ? { storageClassName: options.storageClass } : {}),
          },
        },
      })
      .catch(exists);
  }
  await core
    .createNamespacedSecret({
      namespace: DEMO_DVM_NAMESPACE,
      body: { metadata: { name: "destination-kubeconfig" }, stringData: { kubeconfig: destination.exportConfig() } },
    })
    .catch(exists);
}

function writeFiles(stateDir: string, source: KubeConfig, destination: KubeConfig, extra: { endpointType?: string; runAsRoot?: boolean }) {
  mkdirSync(stateDir, { recursive: true });
  const hostKubeconfig = join(stateDir, "source.kubeconfig");
  const destinationKubeconfig = join(stateDir, "destination.kubeconfig");
  writeFileSync(hostKubeconfig, source.exportConfig(), { mode: 0o600 });
  writeFileSync(destinationKubeconfig, destination.exportConfig(), { mode: 0o600 });
  const demoManifest = join(stateDir, "demo-dvm.yaml");
  const claims = DEMO_VOLUMES.map(
    (v) => `    - name: ${v.name}\n      namespace: ${DEMO_NAMESPACE}\n      targetStorageClass: standard\n      targetAccessModes: [ReadWriteOnce]\n`,
  ).join("");
  writeFileSync(
    demoManifest,
    `apiVersion: migration.openshift.io/v1alpha1
kind: DirectVolumeMigration
metadata:
  name: demo
  namespace: ${DEMO_DVM_NAMESPACE}
spec:
  destinationCluster:
    kubeconfigSecretRef:
      name: destination-kubeconfig
${extra.endpointType ? `  endpointType: ${extra.endpointType}\n` : ""}${extra.runAsRoot ? "  runAsRoot: true            # keeps owners; allowed here because dvm-system is an admin namespace\n" : ""}  persistentVolumeClaims:
${claims}`,
  );
  return { hostKubeconfig, destinationKubeconfig, demoManifest };
}
