/**
 * No secret ever reaches a log line, a status, a progress record, a Kubernetes Event, an outgoing
 * CloudEvent or the ledger: a full migration runs on the real stack (relay, phase function under
 * serverless-offline sending its CloudEvents to an HTTP sink in this test, DynamoDB Local) with debug
 * logging, then everything it produced is scanned for the rsync password, every private key and the
 * clusters' credentials.
 */

import { readFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { CoreV1Api, CustomObjectsApi } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import type { LocalController } from "../../infra/dev/local/controller";
import { DynamoPhaseLedger } from "../../src/aws/ledger";
import { ENV } from "../../src/config/environment";
import { LABEL } from "../../src/contracts/labels";
import { DVM_GROUP, DVM_VERSION, DVMP_PLURAL } from "../../src/dvm/types";
import { jsonLogger } from "../../src/lib/log";
import { transferNames } from "../../src/phases/names";
import { testClusters } from "../support/clusters";
import { startTestController } from "../support/controller";
import { testDynamoClient } from "../support/dynamo";
import { createDvm, createMigrationFixture, type MigrationFixture, readDvm } from "../support/migration";

const clusters = testClusters();
const run = `sec${Date.now().toString(36)}`;
const relayLines: string[] = [];
/** Every CloudEvent the phase function sent (headers and body of each request). */
const cloudEvents: string[] = [];
let sink: Server;
let fixture: MigrationFixture;
let controller: LocalController;

/** The credential material of a kubeconfig file: tokens, client keys, passwords. */
function kubeconfigSecrets(path: string): string[] {
  const config = parse(readFileSync(path, "utf8")) as { users?: { user?: Record<string, unknown> }[] };
  return (config.users ?? []).flatMap(({ user }) =>
    ["token", "client-key-data", "password"].flatMap((key) => (typeof user?.[key] === "string" ? [user[key] as string] : [])),
  );
}

function decoded(secret: { data?: Record<string, string> }): string[] {
  return Object.values(secret.data ?? {}).map((v) => Buffer.from(v, "base64").toString("utf8"));
}

beforeAll(async () => {
  fixture = await createMigrationFixture(clusters, run);
  sink = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      cloudEvents.push(`${JSON.stringify(req.headers)}\n${Buffer.concat(chunks).toString("utf8")}`);
      res.writeHead(202).end();
    });
  });
  await new Promise<void>((resolve) => sink.listen(0, "127.0.0.1", resolve));
  // Debug logging everywhere: the more is printed, the more a leak would show. The function sends its
  // CloudEvents to the sink (serverless-offline passes these on as serverless.yml params).
  controller = await startTestController(
    clusters,
    fixture,
    "secrets",
    jsonLogger({ component: "relay" }, "debug", (line) => relayLines.push(line)),
    {
      functionSettings: {
        [ENV.powertoolsLogLevel]: "DEBUG",
        [ENV.logLevel]: "debug",
        [ENV.eventsSink]: "http",
        [ENV.eventsHttpUrl]: `http://127.0.0.1:${(sink.address() as AddressInfo).port}/events`,
      },
    },
  );
});

afterAll(async () => {
  await controller?.stop();
  await new Promise((resolve) => sink?.close(resolve));
});

/** Every core/v1 Event on one cluster, whoever wrote it (the API server, kwok, the controller). */
async function kubernetesEvents(kc: typeof clusters.source): Promise<unknown[]> {
  return (await kc.makeApiClient(CoreV1Api).listEventForAllNamespaces({})).items;
}

describe("secrets", () => {
  it("appear in no log line, status, progress record, Kubernetes Event, CloudEvent or ledger entry of a whole migration", async () => {
    const core = clusters.source.makeApiClient(CoreV1Api);
    const created = await createDvm(clusters.source, fixture.dvmNamespace, "secret-scan", fixture.spec);
    const names = transferNames(created.metadata);
    // Capture the transfer credentials while they exist (cleanup deletes them at the end).
    const secrets = new Set<string>();
    for (let i = 0; i < 600; i++) {
      const found = await core.listNamespacedSecret({ namespace: fixture.dvmNamespace, labelSelector: `${LABEL.dvmUid}=${created.metadata.uid}` });
      for (const secret of found.items) for (const value of decoded(secret)) secrets.add(value);
      const dvm = await readDvm(clusters.source, fixture.dvmNamespace, "secret-scan");
      if (dvm.status.phase === "Completed") break;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    const done = await readDvm(clusters.source, fixture.dvmNamespace, "secret-scan");
    expect(done.status.phase).toBe("Completed");

    // What must never be printed: the password, every private key, every cluster credential.
    const needles = [...secrets]
      .flatMap((value) => (value.includes("PRIVATE KEY") ? [value.split("\n").slice(1, -2).join("")] : [value]))
      .concat(kubeconfigSecrets(clusters.info.source.kubeconfigPath), kubeconfigSecrets(clusters.info.destination.kubeconfigPath))
      .filter((needle) => needle.length >= 16);
    expect(secrets.size).toBeGreaterThanOrEqual(6); // password + CA, server and client certificates and keys
    expect(needles.some((n) => /^[A-Za-z0-9]{48}$/.test(n))).toBe(true); // the rsync password is among them

    const functionLog = readFileSync(controller.functionLogFile, "utf8");
    expect(functionLog).toMatch(/"phase":"RunRsyncOperations"/); // the function's own structured lines are there
    const records = await clusters.source
      .makeApiClient(CustomObjectsApi)
      .listNamespacedCustomObject({ group: DVM_GROUP, version: DVM_VERSION, namespace: fixture.dvmNamespace, plural: DVMP_PLURAL });
    const events = [...(await kubernetesEvents(clusters.source)), ...(await kubernetesEvents(clusters.destination))];
    // The ledger: every entry of the DVM, lastError included.
    const ledger = await new DynamoPhaseLedger({ client: testDynamoClient(), tableName: controller.ledgerTableName }).history(created.metadata.uid);
    const haystacks: Record<string, string> = {
      "relay log": relayLines.join("\n"),
      "function log": functionLog,
      "DVM status": JSON.stringify(done.status),
      "progress records": JSON.stringify(records),
      "Kubernetes Events": JSON.stringify(events),
      CloudEvents: cloudEvents.join("\n"),
      ledger: JSON.stringify(ledger),
    };
    expect(relayLines.length).toBeGreaterThan(10);
    // Each source was really collected: a scan of nothing proves nothing.
    // Events are scanned as listed: the controller writes none, and with kwok as the kubelet neither
    // does anything else; a cluster with real kubelets (node mode) adds theirs to the scan unchanged.
    expect(Array.isArray(events)).toBe(true);
    expect(cloudEvents.some((e) => e.includes("io.dvm-serverless.migration.succeeded.v1"))).toBe(true);
    expect(ledger.filter((e) => e.state === "COMPLETED").length).toBeGreaterThanOrEqual(15);
    for (const [where, text] of Object.entries(haystacks)) {
      for (const needle of needles) {
        // Short excerpts too: a truncated key is still a leak.
        const excerpt = needle.length > 40 ? needle.slice(8, 40) : needle;
        expect(text.includes(excerpt), `${where} contains a secret (${needle.slice(0, 4)}…)`).toBe(false);
      }
    }
    expect(names.credentialsSecret).toMatch(/rsync-credentials$/);
  });
});
