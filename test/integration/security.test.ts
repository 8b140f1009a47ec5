/**
 * The security model on the real stack (docs/security.md): a DVM's creator can do no more through the
 * controller than they could do themselves. Each attack is a DVM created in a tenant namespace (not an
 * admin one) and driven by the runner as the relay would; each must end Failed with its field named,
 * before anything was run, read or created: no marker file from a command, and no object of the DVM on
 * either cluster. Then the same migration from an admin namespace, across namespaces, completes. The
 * trigger's source allow-list is checked against the real API server too (a refused event creates no DVM).
 */

import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CoreV1Api, type KubeConfig, StorageV1Api } from "@kubernetes/client-node";
import { CloudEvent, HTTP } from "cloudevents";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse, stringify } from "yaml";
import { createPhaseRunner } from "../../src/aws/phaseRunner";
import { LABEL } from "../../src/contracts/labels";
import { DEFAULT_MIGRATION_POLICY, type MigrationPolicy } from "../../src/dvm/policy";
import { type DirectVolumeMigration, DVM_API_VERSION, DVM_KIND, DVMP_KIND } from "../../src/dvm/types";
import { KubeMigrationStore } from "../../src/events/migrationStore";
import { triggerNamespaceRule } from "../../src/events/namespaces";
import { MIGRATION_REQUESTED } from "../../src/events/schema";
import { parseSourceAllowList } from "../../src/events/sources";
import { createTrigger } from "../../src/events/trigger";
import { KubeApiError } from "../../src/kube/errors";
import { KubeCluster } from "../../src/kube/kubeCluster";
import { KINDS } from "../../src/kube/objects";
import { testClusters } from "../support/clusters";
import { type FreshTable, freshLedgerTable } from "../support/dynamo";
import { MemoryHandledEvents } from "../support/memoryHandledEvents";
import { createDvm, driveToCompletion, readDvm, requestFor } from "../support/migration";
import { until } from "../support/poll";

const clusters = testClusters();
const run = Date.now().toString(36);
/** Where DVMs of an ordinary user live: references must stay here. */
const TENANT = `sec-tenant-${run}`;
/** Another team's namespace, with a PVC and a kubeconfig Secret of its own. */
const OTHER = `sec-other-${run}`;
/** The operator's admin namespace for this test. */
const ADMIN = `sec-admin-${run}`;
const STORAGE_CLASS = `sec-${run}`;
const ALLOWED_IMAGE = "registry.example.com/dvm/rsync-transfer:1.0";
const POLICY: MigrationPolicy = { ...DEFAULT_MIGRATION_POLICY, adminNamespaces: [ADMIN], transferImages: [ALLOWED_IMAGE] };

const markers = mkdtempSync(join(tmpdir(), "dvm-security-"));
let table: FreshTable;

const sameCluster = clusters.source.getCurrentCluster()?.server === clusters.destination.getCurrentCluster()?.server;
const destinationKubeconfig = readFileSync(clusters.info.destination.kubeconfigPath, "utf8");
/** The destination kubeconfig with its user replaced: the attacks keep a reachable server and CA. */
function withUser(user: Record<string, unknown>): string {
  const config = parse(destinationKubeconfig) as { users: { name: string; user: Record<string, unknown> }[] };
  return stringify({ ...config, users: config.users.map((u) => ({ name: u.name, user })) });
}
const destinationToken = (parse(destinationKubeconfig) as { users: { user: { token?: string } }[] }).users[0]?.user.token;

const ignoreExists = (error: unknown) => {
  if ((error as { code?: number }).code !== 409) throw error;
};

async function secret(namespace: string, name: string, kubeconfig: string): Promise<void> {
  await clusters.source
    .makeApiClient(CoreV1Api)
    .createNamespacedSecret({ namespace, body: { metadata: { name }, stringData: { kubeconfig } } })
    .catch(ignoreExists);
}

function pvc(namespace: string, name = "data", extra: Record<string, unknown> = {}) {
  return {
    name,
    namespace,
    targetStorageClass: STORAGE_CLASS,
    targetAccessModes: ["ReadWriteOnce"],
    ...(sameCluster ? { targetNamespace: `${namespace}-dst` } : {}),
    ...extra,
  };
}

beforeAll(async () => {
  const core = clusters.source.makeApiClient(CoreV1Api);
  for (const namespace of [TENANT, OTHER, ADMIN]) {
    await core.createNamespace({ body: { metadata: { name: namespace } } }).catch(ignoreExists);
    await core
      .createNamespacedPersistentVolumeClaim({
        namespace,
        body: { metadata: { name: "data" }, spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } } } },
      })
      .catch(ignoreExists);
  }
  await clusters.destination
    .makeApiClient(StorageV1Api)
    .createStorageClass({ body: { metadata: { name: STORAGE_CLASS }, provisioner: "kubernetes.io/no-provisioner" } })
    .catch(ignoreExists);
  await secret(TENANT, "destination", destinationKubeconfig);
  await secret(OTHER, "their-destination", destinationKubeconfig);
  await secret(ADMIN, "destination", destinationKubeconfig);
  table = await freshLedgerTable();
});

afterAll(async () => {
  await table?.drop();
  rmSync(markers, { recursive: true, force: true });
});

const runner = () =>
  createPhaseRunner({ hostKubeConfig: clusters.source, ledgerTableName: table.tableName, dynamo: table.client, leaseMs: 30_000, policy: POLICY });

/**
 * Creates the DVM and drives it as the relay would. A refused DVM finishes in a few steps; the bound
 * keeps a DVM that is not refused (the defence missing) from retrying for ever, so the test's own
 * assertions report what went through.
 */
async function migrate(namespace: string, name: string, spec: Record<string, unknown>): Promise<DirectVolumeMigration> {
  const dvm = await createDvm(clusters.source, namespace, name, spec);
  await driveToCompletion(runner(), requestFor(dvm), { maxSteps: 40 }).catch((error: Error) => {
    if (!error.message.startsWith("the migration did not finish")) throw error;
  });
  return readDvm(clusters.source, namespace, name);
}

/** Every object carrying the DVM's uid label, on one cluster, in any namespace (namespaces included). */
async function objectsOf(kc: KubeConfig, uid: string): Promise<string[]> {
  const cluster = new KubeCluster("check", kc);
  const selector = { [LABEL.dvmUid]: uid };
  const kinds = [
    KINDS.Namespace,
    KINDS.Pod,
    KINDS.Secret,
    KINDS.Service,
    KINDS.ConfigMap,
    KINDS.PersistentVolumeClaim,
    { apiVersion: DVM_API_VERSION, kind: DVMP_KIND },
  ];
  const found: string[] = [];
  for (const kind of kinds) {
    for (const object of await untilServed(() => cluster.list(kind, undefined, selector)))
      found.push(`${kind.kind} ${object.metadata.namespace ?? ""}/${object.metadata.name}`);
  }
  return found;
}

/** A first list of a resource can meet "storage is (re)initializing" (429): ask again, for about 10 s. */
async function untilServed<T>(list: () => Promise<T>): Promise<T> {
  const served = await until(
    "a list the server serves",
    () =>
      list().then(
        (items) => ({ items }),
        (error: unknown) => {
          if (error instanceof KubeApiError && error.statusCode === 429) return undefined;
          throw error;
        },
      ),
    (answer) => answer !== undefined,
    { timeoutMs: 10_000, show: () => "429, storage (re)initializing" },
  );
  return served!.items;
}

/** Failed before any side effect: the errors name `fields`, and the DVM left nothing on either cluster. */
async function expectRefused(dvm: DirectVolumeMigration, fields: string[]): Promise<void> {
  expect(dvm.status, JSON.stringify(dvm.status)).toMatchObject({ phase: "Completed", itinerary: "VolumeMigrationFailed" });
  const failed = dvm.status.conditions?.find((c) => c.type === "Failed");
  expect(failed).toMatchObject({ status: "True", category: "Critical" });
  for (const field of fields) expect(dvm.status.errors?.join("\n"), field).toContain(field);
  expect(await objectsOf(clusters.source, dvm.metadata.uid)).toEqual([]);
  expect(await objectsOf(clusters.destination, dvm.metadata.uid)).toEqual([]);
}

describe("a kubeconfig from the DVM's creator", () => {
  it("with an exec plugin is refused before the command runs", async () => {
    const marker = join(markers, "exec-ran");
    await secret(
      TENANT,
      "exec-kubeconfig",
      withUser({
        exec: {
          apiVersion: "client.authentication.k8s.io/v1",
          command: "sh",
          args: ["-c", `touch ${marker}`],
          env: [{ name: "AWS_ENDPOINT_URL_DYNAMODB", value: "http://127.0.0.1:9" }],
        },
      }),
    );
    const dvm = await migrate(TENANT, "exec", {
      destinationCluster: { kubeconfigSecretRef: { name: "exec-kubeconfig" } },
      persistentVolumeClaims: [pvc(TENANT)],
    });
    expect(existsSync(marker), "the exec plugin's command ran").toBe(false);
    await expectRefused(dvm, ["spec.destinationCluster.kubeconfigSecretRef.key", "users[0].user.exec: credential plugins (exec) are refused"]);
  });

  it("with an auth-provider is refused before the provider's command runs", async () => {
    const marker = join(markers, "auth-provider-ran");
    const config = { "cmd-path": "/bin/sh", "cmd-args": `-c 'touch ${marker}; echo {}'`, "token-key": "{.token}", "expiry-key": "{.expiry}" };
    await secret(TENANT, "auth-provider-kubeconfig", withUser({ "auth-provider": { name: "gcp", config } }));
    const dvm = await migrate(TENANT, "auth-provider", {
      destinationCluster: { kubeconfigSecretRef: { name: "auth-provider-kubeconfig" } },
      persistentVolumeClaims: [pvc(TENANT)],
    });
    expect(existsSync(marker), "the auth provider's command ran").toBe(false);
    await expectRefused(dvm, ["users[0].user.auth-provider: auth providers are refused"]);
  });

  it("naming a file is refused before the file is read", async () => {
    // A file holding a token that works: read, it would let the migration through.
    const tokenFile = join(markers, "token");
    writeFileSync(tokenFile, destinationToken ?? "no-token");
    // client-node reads `token-file` (kubectl's `tokenFile`, refused too, it ignores).
    await secret(TENANT, "file-kubeconfig", withUser({ "token-file": tokenFile }));
    const dvm = await migrate(TENANT, "token-file", {
      destinationCluster: { kubeconfigSecretRef: { name: "file-kubeconfig" } },
      persistentVolumeClaims: [pvc(TENANT)],
    });
    await expectRefused(dvm, ["users[0].user.token-file: file paths are refused"]);
  });
});

describe("a DVM outside an admin namespace", () => {
  it("cannot use another namespace's Secret, and cannot tell whether it exists", async () => {
    const existing = await migrate(TENANT, "their-secret", {
      destinationCluster: { kubeconfigSecretRef: { name: "their-destination", namespace: OTHER } },
      persistentVolumeClaims: [pvc(TENANT)],
    });
    await expectRefused(existing, ["spec.destinationCluster.kubeconfigSecretRef.namespace"]);
    const missing = await migrate(TENANT, "no-secret", {
      destinationCluster: { kubeconfigSecretRef: { name: "their-destination", namespace: `${OTHER}-nothing` } },
      persistentVolumeClaims: [pvc(TENANT)],
    });
    await expectRefused(missing, ["spec.destinationCluster.kubeconfigSecretRef.namespace"]);
    // "Not found" and "forbidden" read the same: the answer never depends on the Secret.
    expect(missing.status.errors).toEqual(existing.status.errors);
  });

  it("cannot migrate another namespace's PVC", async () => {
    const dvm = await migrate(TENANT, "their-pvc", {
      destinationCluster: { kubeconfigSecretRef: { name: "destination" } },
      persistentVolumeClaims: [pvc(OTHER)],
    });
    await expectRefused(dvm, ["spec.persistentVolumeClaims[0].namespace: must be the DVM's namespace"]);
  });

  it("cannot write into another namespace", async () => {
    const dvm = await migrate(TENANT, "their-target", {
      destinationCluster: { kubeconfigSecretRef: { name: "destination" } },
      persistentVolumeClaims: [pvc(TENANT, "data", { targetNamespace: OTHER })],
    });
    await expectRefused(dvm, ["spec.persistentVolumeClaims[0].targetNamespace"]);
  });

  it("cannot run the transfer as root", async () => {
    const dvm = await migrate(TENANT, "as-root", {
      destinationCluster: { kubeconfigSecretRef: { name: "destination" } },
      persistentVolumeClaims: [pvc(TENANT)],
      runAsRoot: true,
    });
    await expectRefused(dvm, ["spec.runAsRoot: only DVMs in an admin namespace"]);
  });
});

describe("a transfer image", () => {
  it("outside the operator's allow-list is refused, in an admin namespace too", async () => {
    const dvm = await migrate(ADMIN, "any-image", {
      destinationCluster: { kubeconfigSecretRef: { name: "destination" } },
      persistentVolumeClaims: [pvc(ADMIN)],
      transferImage: "evil.example.org/rsync:latest",
    });
    await expectRefused(dvm, ["spec.transferImage: is not in the operator's transfer image allow-list"]);
  });
});

describe("transfer pod annotations", () => {
  it("outside the operator's allow-list are refused (a sidecar injector's, AppArmor's), in an admin namespace too", async () => {
    const dvm = await migrate(ADMIN, "annotations", {
      destinationCluster: { kubeconfigSecretRef: { name: "destination" } },
      persistentVolumeClaims: [pvc(ADMIN)],
      transferPodAnnotations: {
        "sidecar.istio.io/inject": "true",
        "container.apparmor.security.beta.kubernetes.io/rsync": "unconfined",
      },
    });
    await expectRefused(dvm, [
      'spec.transferPodAnnotations["sidecar.istio.io/inject"]: is not on the operator\'s allow-list of transfer pod annotations',
      'spec.transferPodAnnotations["container.apparmor.security.beta.kubernetes.io/rsync"]: is not on the operator\'s allow-list',
    ]);
  });
});

describe("a DVM in an admin namespace", () => {
  it("migrates PVCs of other namespaces as root, with another namespace's Secret and an allowed image", async () => {
    const watched: string[] = [];
    const spec = {
      destinationCluster: { kubeconfigSecretRef: { name: "their-destination", namespace: OTHER } },
      persistentVolumeClaims: [pvc(TENANT), pvc(OTHER)],
      runAsRoot: true,
      transferImage: ALLOWED_IMAGE,
    };
    const dvm = await createDvm(clusters.source, ADMIN, "cross-namespace", spec);
    const images = new Set<string>();
    const cluster = new KubeCluster("destination", clusters.destination);
    await driveToCompletion(runner(), requestFor(dvm), {
      each: async () => {
        for (const pod of await cluster.list<{ apiVersion: string; kind: string; metadata: { name: string }; spec: { containers: { image: string }[] } }>(
          KINDS.Pod,
          undefined,
          { [LABEL.dvmUid]: dvm.metadata.uid },
        )) {
          watched.push(pod.metadata.name);
          for (const c of pod.spec.containers) images.add(c.image);
        }
      },
    });
    const done = await readDvm(clusters.source, ADMIN, "cross-namespace");
    expect(done.status, JSON.stringify(done.status.errors)).toMatchObject({ phase: "Completed", itinerary: "VolumeMigration" });
    expect(done.status.rsyncOperations?.map((o) => o.succeeded)).toEqual([true, true]);
    expect(watched.length).toBeGreaterThan(0);
    expect([...images]).toEqual([ALLOWED_IMAGE]);
  });
});

describe("the trigger's source allow-list, against the real API server", () => {
  const EVENTS_NS = `sec-events-${run}`;
  const event = (source: string, id: string) =>
    new CloudEvent<unknown>({ type: MIGRATION_REQUESTED, source, id, data: { namespace: EVENTS_NS, spec: { persistentVolumeClaims: [pvc(EVENTS_NS)] } } });
  const bridge = (source: string, id: string) => ({
    version: "0",
    id,
    "detail-type": MIGRATION_REQUESTED,
    source,
    time: new Date().toISOString(),
    detail: { namespace: EVENTS_NS, spec: { persistentVolumeClaims: [pvc(EVENTS_NS)] } },
  });
  const dvmsIn = async () =>
    (await untilServed(() => new KubeCluster("check", clusters.source).list({ apiVersion: DVM_API_VERSION, kind: DVM_KIND }, EVENTS_NS, {}))).map(
      (d) => d.metadata.name,
    );

  beforeAll(async () => {
    await clusters.source
      .makeApiClient(CoreV1Api)
      .createNamespace({ body: { metadata: { name: EVENTS_NS } } })
      .catch(ignoreExists);
  });

  it.each([
    ["a source outside the allow-list", "https://ci.example.com/*", "https://intruder.example.org/run/1"],
    ["any source when the allow-list is empty", "", "https://ci.example.com/run/1"],
  ])("refuses %s (403), creating no DVM", async (_case, list, source) => {
    const trigger = createTrigger({
      store: async () => new KubeMigrationStore(clusters.source),
      handledEvents: new MemoryHandledEvents(),
      allowedSources: parseSourceAllowList(list),
      namespaces: triggerNamespaceRule({ allowedNamespaces: [EVENTS_NS], adminNamespaces: ["dvm-system"], allowAdminNamespaces: false }),
    });
    const http = await trigger.handleHttp(HTTP.structured(event(source, `http-${list.length}`)) as never);
    expect(http).toMatchObject({ status: 403, body: { field: "source" } });
    const bridged = await trigger.handleEventBridge(bridge(source, `bridge-${list.length}`));
    expect(bridged).toMatchObject({ status: 403, body: { field: "source" } });
    expect(await dvmsIn()).toEqual([]);
  });

  // The escalation of the second audit's first item: an allowed sender names an admin namespace, where a DVM
  // may reach every tenant's PVCs and Secrets and run as root. Even with an identity that could create the DVM
  // there (a cluster-wide binding, as the trigger's RBAC once had), the trigger refuses it before any call.
  it("refuses an allowed sender's event that names the admin namespace or one outside the list, creating no DVM", async () => {
    const ADMIN_NS = `sec-events-admin-${run}`;
    await clusters.source
      .makeApiClient(CoreV1Api)
      .createNamespace({ body: { metadata: { name: ADMIN_NS } } })
      .catch(ignoreExists);
    const trigger = createTrigger({
      store: async () => new KubeMigrationStore(clusters.source),
      handledEvents: new MemoryHandledEvents(),
      allowedSources: parseSourceAllowList("*"),
      namespaces: triggerNamespaceRule({ allowedNamespaces: [EVENTS_NS, "sec-*"], adminNamespaces: [ADMIN_NS], allowAdminNamespaces: false }),
    });
    const stealing = (namespace: string, id: string) =>
      new CloudEvent<unknown>({
        type: MIGRATION_REQUESTED,
        source: "https://ci.example.com/run/7",
        id,
        data: { namespace, spec: { runAsRoot: true, persistentVolumeClaims: [pvc(EVENTS_NS)] } },
      });
    for (const [namespace, id] of [
      [ADMIN_NS, "to-admin"],
      ["default", "to-default"],
    ] as const) {
      const reply = await trigger.handleHttp(HTTP.structured(stealing(namespace, id)) as never);
      expect(reply, namespace).toMatchObject({ status: 403, body: { error: "namespace not allowed", field: "data.namespace" } });
    }
    const inAdmin = await new KubeCluster("check", clusters.source).list({ apiVersion: DVM_API_VERSION, kind: DVM_KIND }, ADMIN_NS, {});
    expect(inAdmin).toEqual([]);
    expect(await dvmsIn()).toEqual([]);
  });
});
