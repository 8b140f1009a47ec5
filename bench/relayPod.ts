/**
 * The relay as a pod on real nodes (run by bench/nodes.ts on its clusters): the relay image built here
 * (infra/dev/local/relayImage.ts), `kubectl apply -k` of the overlay the kind run and test/nodes/relayPod.test.ts
 * apply (infra/dev/local/relayPod.ts), the phase function under serverless-offline. One migration; once it is in
 * its data phase the leader pod is force-deleted (`--force --grace-period=0`), and the takeover is timed
 * from the delete to the first Invoke call of another replica (the pass-through in front of
 * serverless-offline notes which pod called). Then the migration must complete; repeated phases are
 * counted in the function's log.
 */
import { readFileSync } from "node:fs";
import { CoreV1Api, CustomObjectsApi, type KubeConfig } from "@kubernetes/client-node";
import { writeDataset } from "../infra/dev/local/demoData";
import type { NodeClusters } from "../infra/dev/local/nodes/clusters";
import { provisionedOn } from "../infra/dev/local/nodes/localPath";
import { volumeFolder } from "../infra/dev/local/nodes/volumes";
import { ensureRelayImage, importRelayImage } from "../infra/dev/local/relayImage";
import { deployRelay, InvokeRecorder, repeatedPhases } from "../infra/dev/local/relayPod";
import { startServerlessOffline } from "../infra/dev/local/serverlessOffline";
import { waitFor } from "../infra/dev/local/wait";
import { ENV } from "../src/config/environment";
import { DEFAULT_ADMIN_NAMESPACES, DEFAULT_MIGRATION_POLICY } from "../src/dvm/policy";
import { policyEnv } from "../src/dvm/policyConfig";
import { DVM_API_VERSION, DVM_GROUP, DVM_KIND, DVM_PLURAL, DVM_VERSION } from "../src/dvm/types";

export interface RelayPodBenchResult {
  imageMiB: number;
  imageSeconds: number;
  podsReadySeconds: number;
  takeoverSeconds: number;
  leaseSeconds: number;
  repeatedPhases: string[];
}

const MiB = 1024 * 1024;

async function phaseOf(kc: KubeConfig, namespace: string, name: string): Promise<string | undefined> {
  const dvm = (await kc
    .makeApiClient(CustomObjectsApi)
    .getNamespacedCustomObject({ group: DVM_GROUP, version: DVM_VERSION, namespace, plural: DVM_PLURAL, name })) as { status?: { phase?: string } };
  return dvm.status?.phase;
}

export async function runRelayPodBench(options: { nodes: NodeClusters; dynamoEndpoint: string; log: (line: string) => void }): Promise<RelayPodBenchResult> {
  const { nodes, log } = options;
  const [source, destination] = nodes.clusters as [(typeof nodes.clusters)[0], (typeof nodes.clusters)[0]];
  const image = await ensureRelayImage(nodes.images);
  // Every source node: the scheduler may put either replica on either node.
  for (const node of source.nodes) await importRelayImage(node.containerdSocket, image);
  const offline = await startServerlessOffline({
    env: {
      [ENV.ledgerTable]: "bench-nodes",
      [ENV.kubeconfig]: source.kubeconfigPath,
      [ENV.awsDynamoEndpoint]: options.dynamoEndpoint,
      [ENV.awsRegion]: "us-east-1",
      [ENV.awsAccessKeyId]: "dvmlocal",
      [ENV.awsSecretAccessKey]: "dvmlocal",
      ...policyEnv({
        ...DEFAULT_MIGRATION_POLICY,
        adminNamespaces: [...DEFAULT_ADMIN_NAMESPACES, "dvm-e2e"],
        defaultTransferImage: nodes.images.transferImage,
      }),
    },
  });
  const recorder = await InvokeRecorder.start(nodes.plan.bridgeIp, offline.lambdaEndpoint);
  try {
    const relay = await deployRelay({
      kubeconfigPath: source.kubeconfigPath,
      kubeConfig: source.kubeConfig(),
      destination: { kubeconfigPath: destination.kubeconfigPath, kubeConfig: destination.kubeConfig() },
      image: image.image,
      functionName: offline.functionName(),
      lambdaEndpoint: recorder.endpoint,
    });
    const applied = Date.now();
    await relay.ready();
    const podsReadySeconds = (Date.now() - applied) / 1000;

    const kc = source.kubeConfig();
    const core = kc.makeApiClient(CoreV1Api);
    const namespace = "bench-relay";
    for (const name of [namespace, relay.dvmNamespace]) await core.createNamespace({ body: { metadata: { name } } });
    await core.createNamespacedSecret({
      namespace: relay.dvmNamespace,
      body: { metadata: { name: "destination" }, stringData: { kubeconfig: readFileSync(destination.kubeconfigPath, "utf8") } },
    });
    await core.createNamespacedPersistentVolumeClaim({
      namespace,
      body: {
        metadata: { name: "data", annotations: provisionedOn(source.node.nodeName) },
        spec: { accessModes: ["ReadWriteOnce"], storageClassName: "standard", resources: { requests: { storage: "1Gi" } } },
      },
    });
    writeDataset(await volumeFolder(kc, source.nodes, namespace, "data"), { bytes: 300 * MiB, files: 400 });
    const dvm = (await kc.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
      group: DVM_GROUP,
      version: DVM_VERSION,
      namespace: relay.dvmNamespace,
      plural: DVM_PLURAL,
      body: {
        apiVersion: DVM_API_VERSION,
        kind: DVM_KIND,
        metadata: { name: "failover" },
        spec: {
          destinationCluster: { kubeconfigSecretRef: { name: "destination" } },
          persistentVolumeClaims: [{ name: "data", namespace, targetStorageClass: "standard", targetAccessModes: ["ReadWriteOnce"] }],
          endpointType: "NodePort",
          runAsRoot: true,
        },
      },
    })) as { metadata: { uid: string } };
    await waitFor(
      "the migration in its data phase",
      async () => ["WaitForRsyncTransferPodsRunning", "RunRsyncOperations"].includes((await phaseOf(kc, relay.dvmNamespace, "failover")) ?? ""),
      300_000,
    );
    const pods = await relay.pods();
    const leader = await relay.leader();
    const leaderIp = pods.find((p) => p.metadata?.name === leader)?.status?.podIP;
    if (!leader || !leaderIp) throw new Error("no leading relay pod");
    const gone = Date.now();
    await relay.forceDelete(leader);
    await waitFor("the migration Completed after the failover", async () => (await phaseOf(kc, relay.dvmNamespace, "failover")) === "Completed", 600_000);
    const first = recorder.invocations.find((i) => i.at >= gone && i.from !== leaderIp);
    if (!first) throw new Error("no replica forwarded after the leader was deleted");
    const result: RelayPodBenchResult = {
      imageMiB: image.bytes / MiB,
      imageSeconds: image.seconds,
      podsReadySeconds,
      takeoverSeconds: (first.at - gone) / 1000,
      leaseSeconds: relay.leaseDurationMs / 1000,
      repeatedPhases: repeatedPhases(readFileSync(offline.logFile, "utf8"), dvm.metadata.uid),
    };
    await relay.remove();
    log(`relay image ${image.image}: ${result.imageMiB.toFixed(1)} MiB, bundled and built (or found cached) in ${result.imageSeconds.toFixed(1)} s`);
    log(`relay Deployment (infra/deploy/k8s through infra/dev/kind/host): 2 replicas Ready ${result.podsReadySeconds.toFixed(1)} s after kubectl apply`);
    log(
      `relay failover, leader pod force-deleted mid-migration: first forward by the other replica after ${result.takeoverSeconds.toFixed(2)} s (Lease duration ${result.leaseSeconds} s; within lease + 1 s: ${result.takeoverSeconds <= result.leaseSeconds + 1 ? "yes" : "NO"}); migration Completed; repeated phases: ${result.repeatedPhases.length ? result.repeatedPhases.join(", ") : 0}`,
    );
    return result;
  } finally {
    await recorder.close();
    await offline.stop();
  }
}
