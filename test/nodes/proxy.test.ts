/**
 * Clusters that reach each other only through an HTTP CONNECT proxy (the operator's DVM_STUNNEL_TCP_PROXY,
 * upstream's STUNNEL_TCP_PROXY), on two node-mode clusters with the real phase bodies. A real tinyproxy
 * runs in a network namespace of its own on the slot's fabric (infra/dev/local/nodes/proxy.ts), serving the
 * source's pods only and CONNECTing to the destination's NodePort only; an iptables rule in the source
 * node rejects anything its pods send straight to the destination's node or pods. Without the setting the
 * transfer cannot connect (the DVM fails, stunnel saw "Connection refused"); with it the migration
 * completes, the destination's files match the source's manifest, and tinyproxy's log has the CONNECT to
 * the destination's endpoint. The proxy's password reaches the client Secrets only: not the DVM, its
 * events, or the controller's log.
 */

import { randomBytes } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { CoreV1Api, type V1Pod } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createProxyNamespace,
  deleteProxyNamespace,
  type ProxyNamespace,
  rejectDirect,
  startTinyproxy,
  type Tinyproxy,
} from "../../infra/dev/local/nodes/proxy";
import { createPhaseRunner } from "../../src/aws/phaseRunner";
import { LABEL } from "../../src/contracts/labels";
import { DEFAULT_MIGRATION_POLICY, type MigrationPolicy } from "../../src/dvm/policy";
import { parsePolicyEnv } from "../../src/dvm/policyConfig";
import type { DirectVolumeMigration } from "../../src/dvm/types";
import { jsonLogger } from "../../src/lib/log";
import { testClusters } from "../support/clusters";
import { manifest, manifestDiff, writeDataset } from "../support/dataset";
import { type FreshTable, freshLedgerTable } from "../support/dynamo";
import { createDvm, driveToCompletion, readDvm, requestFor } from "../support/migration";
import { createBoundPvc, ensureNamespace, testNodes, volumeFolder } from "../support/nodes";
import { missing } from "../support/requirements";

const TINYPROXY = "/usr/bin/tinyproxy";
const clusters = testClusters();
const nodes = testNodes();
const run = `p${Date.now().toString(36)}`;
const ADMIN_NAMESPACE = "dvm-system";
const MiB = 1024 * 1024;
const PROXY_PORT = 3128;
const PROXY_USER = "dvm";
// tinyproxy's BasicAuth takes letters and digits; a fresh one per run, looked for wherever it must not be.
const PROXY_PASSWORD = `pw${randomBytes(12).toString("hex")}`;
const CLIENT_SELECTOR = `${LABEL.transfer}=true,dvm.migration.openshift.io/role=rsync-client`;
const TO_DESTINATION = { destinationCluster: { kubeconfigSecretRef: { name: `destination-${run}` } }, endpointType: "NodePort", runAsRoot: true };

// The source volumes are on source node 1 (createBoundPvc), so the client pods run there; the endpoint is
// destination node 1's address (the first node listed), and the server pod may be on either node.
const [sourcePlan, destinationPlan] = nodes.plan.clusters.map((cluster) => cluster.nodes[0]);
const destinationNodes = nodes.plan.clusters[1]?.nodes ?? [];
let table: FreshTable;
let proxyNamespace: ProxyNamespace | undefined;
let tinyproxy: Tinyproxy | undefined;
const undoReject: (() => Promise<void>)[] = [];
const logLines: string[] = [];

const basePolicy: MigrationPolicy = { ...DEFAULT_MIGRATION_POLICY, defaultTransferImage: nodes.transferImage };
const runnerWith = (policy: MigrationPolicy) =>
  createPhaseRunner({
    hostKubeConfig: clusters.source,
    ledgerTableName: table.tableName,
    dynamo: table.client,
    leaseMs: 120_000,
    policy,
    log: jsonLogger({}, "debug", (line) => logLines.push(line)),
  });

describe.skipIf(missing("tinyproxy", existsSync(TINYPROXY), "apt-get install -y tinyproxy (infra/dev/bootstrap.mjs installs it)"))(
  "clusters that reach each other only through an HTTP CONNECT proxy",
  () => {
    beforeAll(async () => {
      if (!sourcePlan || !destinationPlan) throw new Error("the node clusters' plan has fewer than two nodes");
      table = await freshLedgerTable();
      await ensureNamespace(clusters.source, ADMIN_NAMESPACE);
      await clusters.source.makeApiClient(CoreV1Api).createNamespacedSecret({
        namespace: ADMIN_NAMESPACE,
        body: { metadata: { name: `destination-${run}` }, stringData: { kubeconfig: readFileSync(clusters.info.destination.kubeconfigPath, "utf8") } },
      });
      proxyNamespace = await createProxyNamespace(nodes.plan, nodes.stateDir);
      for (const destination of destinationNodes) undoReject.push(await rejectDirect(sourcePlan, destination));
    });

    afterAll(async () => {
      // Each step on its own: one that fails must not leave the others undone.
      const steps = [
        () => tinyproxy?.stop(),
        async () => {
          for (const undo of undoReject.splice(0)) await undo();
        },
        () => (proxyNamespace ? deleteProxyNamespace(proxyNamespace) : undefined),
        () => table?.drop(),
      ];
      const errors: unknown[] = [];
      for (const step of steps) await Promise.resolve(step()).catch((error: unknown) => errors.push(error));
      if (errors.length > 0) throw new AggregateError(errors, "the proxy test's cleanup failed");
    });

    /** A source PVC in its own namespace, filled with a seeded dataset; its spec entry and folder. */
    async function sourceVolume(namespace: string, seed: number) {
      await ensureNamespace(clusters.source, namespace);
      await createBoundPvc(clusters.source, namespace, "data", { storageClass: nodes.storageClass });
      const folder = await volumeFolder(clusters.source, nodes.source, namespace, "data");
      writeDataset(folder, { bytes: 24 * MiB, files: 300, seed });
      return { claim: { name: "data", namespace, targetStorageClass: nodes.storageClass, targetAccessModes: ["ReadWriteOnce"] }, folder };
    }

    /** The last log of every client pod's stunnel container, while the pods exist. */
    async function stunnelLogs(namespace: string, into: Map<string, string>): Promise<void> {
      const core = clusters.source.makeApiClient(CoreV1Api);
      const pods: V1Pod[] = (await core.listNamespacedPod({ namespace, labelSelector: CLIENT_SELECTOR })).items;
      for (const pod of pods) {
        const name = pod.metadata?.name ?? "";
        const text = await core.readNamespacedPodLog({ namespace, name, container: "stunnel" }).catch(() => undefined);
        if (typeof text === "string" && text.length > 0) into.set(name, text);
      }
    }

    it("without the proxy setting the source's pods cannot reach the destination: the transfer is refused and the DVM fails", async () => {
      const namespace = `direct-${run}`;
      const volume = await sourceVolume(namespace, 31);
      const name = `direct-${run}`;
      const created = await createDvm(clusters.source, ADMIN_NAMESPACE, name, { ...TO_DESTINATION, persistentVolumeClaims: [volume.claim], backOffLimit: 1 });
      const logs = new Map<string, string>();
      const started = Date.now();
      await driveToCompletion(runnerWith(basePolicy), requestFor(created), { maxSteps: 3_000, maxDelayMs: 1_000, each: () => stunnelLogs(namespace, logs) });
      const dvm = await readDvm(clusters.source, ADMIN_NAMESPACE, name);
      expect(dvm.status.itinerary).toBe("VolumeMigrationFailed");
      expect(JSON.stringify(dvm.status.errors)).toMatch(/rsync of .*data.* failed after 1 attempt\b/);
      // stunnel dialled the destination's node directly, and the source node refused it.
      const stunnel = [...logs.values()].join("\n");
      expect(stunnel).toMatch(new RegExp(`s_connect: connect ${destinationPlan!.nodeIp.replace(/\./g, "\\.")}:\\d+: Connection refused`));
      console.info(
        `[figures] direct (no proxy): failed in ${((Date.now() - started) / 1000).toFixed(1)} s; stunnel: ${stunnel.match(/s_connect: connect .*Connection refused.*/)?.[0]}; ` +
          `errors: ${JSON.stringify(dvm.status.errors)}`,
      );
    });

    it("with DVM_STUNNEL_TCP_PROXY_TENANT the migration completes through tinyproxy, the data matches, and the password stays in the client Secret", async () => {
      const ns = proxyNamespace!;
      const proxyUrl = `http://${PROXY_USER}:${PROXY_PASSWORD}@${ns.address}:${PROXY_PORT}`;
      // The operator's setting, read the way the phase function reads it. The volume's namespace is not an
      // admin namespace, so its client Secret gets the tenant proxy (a credential tenants may read).
      const policy: MigrationPolicy = { ...basePolicy, transfer: parsePolicyEnv({ DVM_STUNNEL_TCP_PROXY_TENANT: proxyUrl }).transfer };
      expect(policy.transfer.tenantTcpProxy).toMatchObject({ host: ns.address, port: PROXY_PORT, credentials: { username: PROXY_USER } });

      const namespace = `proxied-${run}`;
      const volume = await sourceVolume(namespace, 32);
      const name = `proxied-${run}`;
      const created = await createDvm(clusters.source, ADMIN_NAMESPACE, name, { ...TO_DESTINATION, persistentVolumeClaims: [volume.claim] });
      const uid = created.metadata.uid;
      const destinationCore = clusters.destination.makeApiClient(CoreV1Api);
      const sourceCore = clusters.source.makeApiClient(CoreV1Api);
      let nodePort: number | undefined;
      let clientConfig: string | undefined;
      const logs = new Map<string, string>();

      const each = async () => {
        // tinyproxy CONNECTs to one port only: the NodePort, known once CreateRsyncEndpoint made the
        // Service. Steps run one after another and the client pods come phases later, so the proxy
        // is up before anything dials it.
        if (!tinyproxy) {
          const services = await destinationCore.listNamespacedService({ namespace, labelSelector: `${LABEL.dvmUid}=${uid}` });
          nodePort = services.items[0]?.spec?.ports?.[0]?.nodePort;
          if (nodePort)
            tinyproxy = await startTinyproxy(ns, {
              dir: join(nodes.stateDir, "proxy"),
              port: PROXY_PORT,
              allow: [sourcePlan!.podCidr],
              connectPorts: [nodePort],
              basicAuth: { user: PROXY_USER, password: PROXY_PASSWORD },
              pidFile: join(nodes.stateDir, "pids"),
            });
        }
        if (!clientConfig) {
          const secrets = await sourceCore.listNamespacedSecret({ namespace, labelSelector: `${LABEL.dvmUid}=${uid}` });
          const data = secrets.items.find((s) => s.data?.["stunnel.conf"])?.data?.["stunnel.conf"];
          if (data) clientConfig = Buffer.from(data, "base64").toString("utf8");
        }
        await stunnelLogs(namespace, logs);
      };

      const started = Date.now();
      await driveToCompletion(runnerWith(policy), requestFor(created), { maxSteps: 3_000, maxDelayMs: 1_000, each });
      const seconds = (Date.now() - started) / 1000;
      const dvm: DirectVolumeMigration = await readDvm(clusters.source, ADMIN_NAMESPACE, name);
      expect(dvm.status.errors ?? []).toEqual([]);
      expect(dvm.status.phase).toBe("Completed");
      expect(dvm.status.itinerary).toBe("VolumeMigration");

      // The destination holds what the source holds.
      const source = await manifest(volume.folder, { owners: true });
      const copy = await manifest(await volumeFolder(clusters.destination, nodes.destination, namespace, "data"), {
        owners: true,
        exclude: (p) => p === "lost+found",
      });
      expect(manifestDiff(source, copy)).toEqual([]);

      // The client dialled the proxy and asked it for the destination's endpoint; TLS still checks the server.
      const endpoint = `${destinationPlan!.nodeIp}:${nodePort}`;
      expect(clientConfig).toContain(`connect = ${ns.address}:${PROXY_PORT}\nprotocol = connect\nprotocolHost = ${endpoint}\n`);
      expect(clientConfig).toContain("checkHost = rsync-server.dvm.local\n");
      expect(clientConfig).toContain(`protocolPassword = ${PROXY_PASSWORD}\n`);
      const proxyLog = tinyproxy!.log();
      const connectLine = proxyLog.split("\n").find((line) => line.includes(`CONNECT ${endpoint} HTTP/1.1`));
      expect(connectLine).toBeDefined();
      // From a source pod, which the proxy let through (Allow), authenticated (BasicAuth).
      expect(proxyLog).toMatch(new RegExp(`Connect \\(file descriptor \\d+\\): ${sourcePlan!.podCidr.split(".").slice(0, 3).join("\\.")}\\.\\d+`));
      expect(proxyLog).not.toMatch(/Unauthorized|Refused|denied/i);
      expect([...logs.values()].join("\n")).toMatch(new RegExp(`s_connect: connected ${ns.address.replace(/\./g, "\\.")}:${PROXY_PORT}`));

      // The password: in the client Secret only. Not in the DVM, the events of its namespaces, the log.
      expect(JSON.stringify(dvm)).not.toContain(PROXY_PASSWORD);
      for (const events of [
        await sourceCore.listNamespacedEvent({ namespace }),
        await sourceCore.listNamespacedEvent({ namespace: ADMIN_NAMESPACE }),
        await destinationCore.listNamespacedEvent({ namespace }),
      ])
        expect(JSON.stringify(events.items)).not.toContain(PROXY_PASSWORD);
      expect(logLines.length).toBeGreaterThan(0);
      expect(logLines.filter((line) => line.includes(PROXY_PASSWORD))).toEqual([]);

      const report = dvm.status.rsyncOperations?.[0]?.verification;
      expect(report?.filesFailed).toBe(0);
      console.info(
        `[figures] through tinyproxy: migration ${seconds.toFixed(1)} s, rsync ${dvm.status.rsyncOperations?.[0]?.elapsedSeconds} s, ` +
          `${report?.bytesTransferred} bytes sent (${report?.transferredFileSize} bytes of files, ${report?.filesTransferred} files); tinyproxy: ${connectLine?.trim()}`,
      );
    });
  },
);
