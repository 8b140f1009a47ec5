/**
 * infra/deploy/k8s against real API servers (the run's "source" and "destination" clusters):
 *
 * 1. Every manifest passes a server-side dry run (validation, defaulting, admission) — and so does the
 *    kind overlay (infra/dev/kind/host) once rendered, when kubectl is here to render it.
 * 2. The RBAC is sufficient: the ClusterRoles and bindings are created for real (renamed per run, bound
 *    to ServiceAccounts in a test namespace), a token is minted for each ServiceAccount with the
 *    TokenRequest API, and
 *    - a whole migration runs to Completed with the phase functions' host identity (host + transfer
 *      roles) as the host kubeconfig, and the transfer-side identity in the destination's kubeconfig
 *      Secret;
 *    - the relay (in-process) syncs and forwards with the relay's token, watching pods on the
 *      destination with the remote relay-pods token;
 *    - calls outside the roles are refused (403), so the tokens really are the restricted ones.
 *    (test/unit/infra/manifests.test.ts proves the other direction: nothing beyond what the code calls.)
 * 3. The relay's container bundle (infra/deploy/relay/build.mjs) runs as a process: with the relay's restricted
 *    kubeconfig it becomes ready, invokes "Lambda" (a local stand-in answering 202) when a DVM is
 *    created, and exits 0 on SIGTERM.
 */
import { type ChildProcess, execFile, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { promisify } from "node:util";
import {
  AuthorizationV1Api,
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  type KubernetesObject,
  KubernetesObjectApi,
  PatchStrategy,
  setHeaderOptions,
} from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAllDocuments, stringify } from "yaml";
import { findCondition } from "../../../src/dvm/conditions";
import { ITINERARIES } from "../../../src/dvm/itinerary";
import { DVM_API_VERSION, DVM_GROUP, DVM_KIND, DVM_PLURAL, DVM_VERSION, DVMP_KIND, DVMP_PLURAL } from "../../../src/dvm/types";
import { KubeCluster } from "../../../src/kube/kubeCluster";
import { findFreePort } from "../../../src/local/ports";
import { jsonLogger } from "../../../src/log";
import { PHASE_BODIES } from "../../../src/phases";
import { LABEL } from "../../../src/phases/names";
import { Relay } from "../../../src/relay/relay";
import { InProcessTransport } from "../../../src/relay/transport";
import { createPhaseRunner } from "../../../src/runner/phaseRunner";
import type { ReconcileRequest, RunResult } from "../../../src/runner/request";
import type { PhaseRunner } from "../../../src/runner/runner";
import { testClusters } from "../../support/clusters";
import { dynamoEndpoint, type FreshTable, freshLedgerTable } from "../../support/dynamo";
import { startLambdaStandIn } from "../../support/lambdaStandIn";
import { createDvm, createMigrationFixture, driveToCompletion, readDvm, requestFor, TEST_MIGRATION_POLICY } from "../../support/migration";
import { missing, otherEnvironment } from "../../support/requirements";

const ROOT = join(import.meta.dirname, "..", "..", "..");
const K8S_DIR = join(ROOT, "infra", "deploy", "k8s");
const KIND_OVERLAY = join(ROOT, "infra", "dev", "kind", "host");
const clusters = testClusters();
const run = `m${Date.now().toString(36)}`;
const testNamespace = `rbac-${run}`;
const FIELD_MANAGER = "dvm-manifests-test";
/** The relay's Lease, the one name its Role lets it read and update (infra/deploy/k8s/relay-config.yaml). */
const RELAY_LEASE = "dvm-relay";

// biome-ignore lint/suspicious/noExplicitAny: parsed YAML/JSON, walked freely by the test
type Manifest = KubernetesObject & Record<string, any>;

// ---------------------------------------------------------------------------------------------------
// Reading the manifests

function yamlFiles(dir: string): string[] {
  return readdirSync(dir)
    .flatMap((entry) => {
      const path = join(dir, entry);
      if (statSync(path).isDirectory()) return yamlFiles(path);
      return /\.ya?ml$/.test(entry) && entry !== "kustomization.yaml" ? [path] : [];
    })
    .sort();
}

function parseYaml(text: string, origin: string): Manifest[] {
  return parseAllDocuments(text).flatMap((doc) => {
    if (doc.errors.length > 0) throw new Error(`${origin}: ${doc.errors[0]!.message}`);
    const value = doc.toJS() as Manifest | null;
    return value ? [value] : [];
  });
}

function manifests(file: string): Manifest[] {
  return parseYaml(readFileSync(file, "utf8"), relative(ROOT, file));
}

const describeObject = (m: Manifest) => `${m.kind} ${m.metadata?.namespace ? `${m.metadata.namespace}/` : ""}${m.metadata?.name}`;
const clone = <T>(value: T): T => structuredClone(value);

function kubectl(): string | undefined {
  const found = spawnSync("kubectl", ["version", "--client"], { encoding: "utf8" });
  return found.status === 0 ? "kubectl" : undefined;
}

// ---------------------------------------------------------------------------------------------------
// API helpers

function statusCode(error: unknown): number | undefined {
  const e = error as { code?: number; statusCode?: number; response?: { statusCode?: number } };
  return e.code ?? e.statusCode ?? e.response?.statusCode;
}

async function ignoreExists<T>(promise: Promise<T>): Promise<T | undefined> {
  try {
    return await promise;
  } catch (error) {
    if (statusCode(error) === 409) return undefined;
    throw error;
  }
}

async function ignoreMissing(promise: Promise<unknown>): Promise<void> {
  try {
    await promise;
  } catch (error) {
    if (statusCode(error) !== 404) throw error;
  }
}

/**
 * Server-side dry run of one object: create with dryRun=All, or, when it exists already (the namespace
 * made for real, or an existing cluster that has infra/deploy/k8s applied), a dry-run server-side apply.
 */
async function dryRun(kc: KubeConfig, object: Manifest): Promise<KubernetesObject> {
  const api = KubernetesObjectApi.makeApiClient(kc);
  try {
    return await api.create(clone(object), undefined, "All", FIELD_MANAGER);
  } catch (error) {
    if (statusCode(error) !== 409) throw new Error(`dry run of ${describeObject(object)}: ${errorText(error)}`);
    return api.patch(clone(object), undefined, "All", FIELD_MANAGER, true, PatchStrategy.ServerSideApply);
  }
}

function errorText(error: unknown): string {
  const e = error as { body?: unknown; message?: string };
  const body = typeof e.body === "string" ? e.body : JSON.stringify(e.body);
  return `${e.message ?? String(error)} ${body ?? ""}`.trim();
}

async function poll<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

// ---------------------------------------------------------------------------------------------------
// Restricted identities from the manifests

/**
 * The RBAC objects of `docs`, made unique to this run so that they can be created for real next to
 * anything already on the cluster (an existing cluster may have infra/deploy/k8s applied): ClusterRoles and
 * ClusterRoleBindings get a suffix (roleRef follows); ServiceAccounts, Roles and RoleBindings move to the
 * test namespace (the relay's Lease is then made there). Token
 * Secrets are left out (nothing fills them without a controller-manager; tokens come from TokenRequest).
 */
function instantiate(docs: Manifest[]): Manifest[] {
  const suffix = `-${run}`;
  return docs.flatMap((doc): Manifest[] => {
    const copy = clone(doc);
    switch (doc.kind) {
      case "ClusterRole":
        copy.metadata!.name += suffix;
        return [copy];
      case "ClusterRoleBinding":
        copy.metadata!.name += suffix;
        copy.roleRef.name += suffix;
        copy.subjects = copy.subjects.map((s: { namespace?: string }) => ({ ...s, namespace: testNamespace }));
        return [copy];
      case "ServiceAccount":
        copy.metadata!.namespace = testNamespace;
        delete copy.metadata!.annotations;
        return [copy];
      case "Role":
        copy.metadata!.namespace = testNamespace;
        return [copy];
      case "RoleBinding":
        copy.metadata!.namespace = testNamespace;
        copy.subjects = copy.subjects.map((s: { namespace?: string }) => ({ ...s, namespace: testNamespace }));
        return [copy];
      default:
        return [];
    }
  });
}

async function createAll(kc: KubeConfig, objects: Manifest[]): Promise<void> {
  const api = KubernetesObjectApi.makeApiClient(kc);
  for (const object of objects) await ignoreExists(api.create(clone(object)));
}

async function deleteAll(kc: KubeConfig, objects: Manifest[]): Promise<void> {
  const api = KubernetesObjectApi.makeApiClient(kc);
  for (const object of [...objects].reverse()) await ignoreMissing(api.delete(clone(object))).catch(() => undefined);
}

/** A kubeconfig for `serviceAccount` (in the test namespace) on the cluster of `admin`, with a fresh token. */
async function serviceAccountKubeConfig(admin: KubeConfig, serviceAccount: string): Promise<{ kc: KubeConfig; text: string }> {
  const response = await admin.makeApiClient(CoreV1Api).createNamespacedServiceAccountToken({
    name: serviceAccount,
    namespace: testNamespace,
    body: { apiVersion: "authentication.k8s.io/v1", kind: "TokenRequest", spec: { audiences: [], expirationSeconds: 3600 } },
  });
  const token = response.status?.token;
  if (!token) throw new Error(`no token for ServiceAccount ${testNamespace}/${serviceAccount}`);
  const cluster = admin.getCurrentCluster();
  if (!cluster) throw new Error("admin kubeconfig has no current cluster");
  const text = stringify({
    apiVersion: "v1",
    kind: "Config",
    clusters: [
      {
        name: "cluster",
        cluster: {
          server: cluster.server,
          ...(cluster.caData ? { "certificate-authority-data": cluster.caData } : {}),
          ...(cluster.caFile ? { "certificate-authority": cluster.caFile } : {}),
          ...(cluster.skipTLSVerify ? { "insecure-skip-tls-verify": true } : {}),
        },
      },
    ],
    users: [{ name: serviceAccount, user: { token } }],
    contexts: [{ name: serviceAccount, context: { cluster: "cluster", user: serviceAccount } }],
    "current-context": serviceAccount,
  });
  const kc = new KubeConfig();
  kc.loadFromString(text);
  return { kc, text };
}

/** Whether `kc`'s user may do `verb` on `resource` (RBAC caches catch up with new bindings quickly). */
async function allowed(
  kc: KubeConfig,
  attributes: { verb: string; resource: string; group?: string; subresource?: string; namespace?: string; name?: string },
): Promise<boolean> {
  const review = await kc.makeApiClient(AuthorizationV1Api).createSelfSubjectAccessReview({
    body: { apiVersion: "authorization.k8s.io/v1", kind: "SelfSubjectAccessReview", spec: { resourceAttributes: { group: "", ...attributes } } },
  });
  return review.status?.allowed === true;
}

async function untilAllowed(kc: KubeConfig, attributes: Parameters<typeof allowed>[1]): Promise<void> {
  await poll(`RBAC to allow ${attributes.verb} ${attributes.resource}`, async () => ((await allowed(kc, attributes)) ? true : undefined));
}

async function expectForbidden(call: Promise<unknown>): Promise<void> {
  const code = await call.then(
    () => 200,
    (error: unknown) => statusCode(error),
  );
  expect(code).toBe(403);
}

// ---------------------------------------------------------------------------------------------------

const hostRbac = instantiate([
  ...manifests(join(K8S_DIR, "common", "transfer-clusterrole.yaml")),
  ...manifests(join(K8S_DIR, "relay-rbac.yaml")),
  ...manifests(join(K8S_DIR, "phase-functions-rbac.yaml")),
  ...manifests(join(K8S_DIR, "trigger-rbac.yaml")),
]);
const remoteRbac = instantiate([...manifests(join(K8S_DIR, "common", "transfer-clusterrole.yaml")), ...manifests(join(K8S_DIR, "remote", "identities.yaml"))]);

let phaseFunctions: { kc: KubeConfig; text: string };
let relayIdentity: { kc: KubeConfig; text: string };
let transferDestination: { kc: KubeConfig; text: string };
let relayPodsDestination: { kc: KubeConfig; text: string };
let trigger: { kc: KubeConfig; text: string };

beforeAll(async () => {
  for (const kc of [clusters.source, clusters.destination]) {
    await ignoreExists(kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: testNamespace } } }));
  }
  await createAll(clusters.source, hostRbac);
  await createAll(clusters.destination, remoteRbac);
  phaseFunctions = await serviceAccountKubeConfig(clusters.source, "dvm-phase-functions");
  relayIdentity = await serviceAccountKubeConfig(clusters.source, "dvm-relay");
  transferDestination = await serviceAccountKubeConfig(clusters.destination, "dvm-transfer");
  relayPodsDestination = await serviceAccountKubeConfig(clusters.destination, "dvm-relay-pods");
  trigger = await serviceAccountKubeConfig(clusters.source, "dvm-trigger");
  // The authorizer's caches learn new bindings asynchronously.
  await untilAllowed(phaseFunctions.kc, { verb: "get", group: DVM_GROUP, resource: DVM_PLURAL, namespace: testNamespace });
  await untilAllowed(phaseFunctions.kc, { verb: "create", resource: "pods", namespace: testNamespace });
  await untilAllowed(relayIdentity.kc, { verb: "watch", group: DVM_GROUP, resource: DVM_PLURAL });
  await untilAllowed(relayIdentity.kc, { verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: testNamespace, name: RELAY_LEASE });
  await untilAllowed(transferDestination.kc, { verb: "create", resource: "pods", namespace: testNamespace });
  await untilAllowed(relayPodsDestination.kc, { verb: "watch", resource: "pods" });
  await untilAllowed(trigger.kc, { verb: "create", group: DVM_GROUP, resource: DVM_PLURAL, namespace: testNamespace });
});

afterAll(async () => {
  // Namespaces are never emptied on the harness's control planes (no controller-manager): remove what
  // this file created in its namespace, so that no relay of a later test file sees it.
  const dvms = { group: DVM_GROUP, version: DVM_VERSION, namespace: testNamespace };
  for (const plural of [DVM_PLURAL, DVMP_PLURAL]) {
    await clusters.source
      .makeApiClient(CustomObjectsApi)
      .deleteCollectionNamespacedCustomObject({ ...dvms, plural })
      .catch(() => undefined);
  }
  for (const kc of [clusters.source, clusters.destination]) {
    await kc
      .makeApiClient(CoreV1Api)
      .deleteCollectionNamespacedPod({ namespace: testNamespace, gracePeriodSeconds: 0 })
      .catch(() => undefined);
  }
  await deleteAll(clusters.source, hostRbac);
  await deleteAll(clusters.destination, remoteRbac);
  for (const kc of [clusters.source, clusters.destination]) {
    await ignoreMissing(kc.makeApiClient(CoreV1Api).deleteNamespace({ name: testNamespace })).catch(() => undefined);
  }
});

describe("server-side dry runs", () => {
  const hostFiles = yamlFiles(K8S_DIR).filter((f) => !f.includes(`${join("k8s", "remote")}`));
  const remoteFiles = yamlFiles(join(K8S_DIR, "remote"));

  /** The namespace has to exist for a dry run of the objects in it: made for real, once per cluster. */
  async function ensureSystemNamespace(kc: KubeConfig): Promise<void> {
    const [namespace] = manifests(join(K8S_DIR, "common", "namespace.yaml"));
    await ignoreExists(KubernetesObjectApi.makeApiClient(kc).create(clone(namespace!)));
  }

  it.each(hostFiles.map((f) => [relative(ROOT, f), f]))("%s is accepted by the host cluster", async (_name, file) => {
    await ensureSystemNamespace(clusters.source);
    const docs = manifests(file);
    expect(docs.length).toBeGreaterThan(0);
    for (const doc of docs) {
      const result = await dryRun(clusters.source, doc);
      expect(result.metadata?.name, describeObject(doc)).toBe(doc.metadata?.name);
    }
  });

  it.each(remoteFiles.map((f) => [relative(ROOT, f), f]))("%s is accepted by a source/destination cluster", async (_name, file) => {
    await ensureSystemNamespace(clusters.destination);
    for (const doc of manifests(file)) {
      const result = await dryRun(clusters.destination, doc);
      expect(result.metadata?.name, describeObject(doc)).toBe(doc.metadata?.name);
    }
  });

  it.skipIf(
    otherEnvironment(
      "the kind deployment path (kubectl on the PATH)",
      kubectl(),
      "kubectl kustomize renders the kind overlay; CI does not install kubectl, infra/dev/kind/e2e.sh runs this path",
    ),
  )("the kind overlay (infra/dev/kind/host), rendered by kubectl kustomize, is accepted", async () => {
    await ensureSystemNamespace(clusters.source);
    const rendered = await promisify(execFile)("kubectl", ["kustomize", KIND_OVERLAY], { encoding: "utf8" });
    const docs = parseYaml(rendered.stdout, "kubectl kustomize infra/dev/kind/host");
    expect(docs.map((d) => d.kind)).toContain("Deployment");
    for (const doc of docs) await dryRun(clusters.source, doc);
  });
});

describe("the RBAC in infra/deploy/k8s is enough for the code", () => {
  it("refuses what the roles leave out (the tokens are the restricted identities)", async () => {
    const custom = (kc: KubeConfig) => kc.makeApiClient(CustomObjectsApi);
    const dvm = { group: DVM_GROUP, version: DVM_VERSION, namespace: testNamespace, plural: DVM_PLURAL };
    const body = { apiVersion: DVM_API_VERSION, kind: DVM_KIND, metadata: { name: "not-allowed" }, spec: {} };
    // The relay only lists and watches: no create, no single read, no write of any kind but its Lease.
    await expectForbidden(custom(relayIdentity.kc).createNamespacedCustomObject({ ...dvm, body }));
    await expectForbidden(custom(relayIdentity.kc).getNamespacedCustomObject({ ...dvm, name: "any" }));
    await expectForbidden(relayIdentity.kc.makeApiClient(CoreV1Api).listSecretForAllNamespaces());
    // Its Lease: only the one name, only in the Role's namespace, never deleted.
    const relayLeases = relayIdentity.kc.makeApiClient(CoordinationV1Api);
    const lease = (name: string) => ({ metadata: { name }, spec: { holderIdentity: "intruder", leaseDurationSeconds: 15 } });
    await ignoreExists(clusters.source.makeApiClient(CoordinationV1Api).createNamespacedLease({ namespace: testNamespace, body: lease("someone-elses") }));
    await expectForbidden(relayLeases.readNamespacedLease({ namespace: testNamespace, name: "someone-elses" }));
    await expectForbidden(relayLeases.replaceNamespacedLease({ namespace: testNamespace, name: "someone-elses", body: lease("someone-elses") }));
    await expectForbidden(relayLeases.deleteNamespacedLease({ namespace: testNamespace, name: RELAY_LEASE }));
    await expectForbidden(relayLeases.createNamespacedLease({ namespace: "default", body: lease(RELAY_LEASE) }));
    await expectForbidden(relayLeases.listNamespacedLease({ namespace: testNamespace }));
    // The phase functions read DVMs, write their status and patch them for the finalizer only (RBAC cannot
    // narrow a patch to metadata; the CRD refuses any spec change, test/integration/lifecycle.test.ts).
    // They never create, list or delete one.
    await expectForbidden(custom(phaseFunctions.kc).createNamespacedCustomObject({ ...dvm, body }));
    await expectForbidden(custom(phaseFunctions.kc).deleteNamespacedCustomObject({ ...dvm, name: "any" }));
    await expectForbidden(custom(phaseFunctions.kc).listNamespacedCustomObject(dvm));
    // The transfer side never touches PVC data it did not create: no delete of PVCs or namespaces.
    await expectForbidden(transferDestination.kc.makeApiClient(CoreV1Api).deleteNamespacedPersistentVolumeClaim({ name: "any", namespace: testNamespace }));
    await expectForbidden(transferDestination.kc.makeApiClient(CoreV1Api).deleteNamespace({ name: testNamespace }));
    await expectForbidden(relayPodsDestination.kc.makeApiClient(CoreV1Api).listSecretForAllNamespaces());
    // The trigger creates and reads DVMs, nothing more: no delete, no spec change, no status, no Secrets.
    await expectForbidden(custom(trigger.kc).deleteNamespacedCustomObject({ ...dvm, name: "any" }));
    await expectForbidden(
      custom(trigger.kc).patchNamespacedCustomObjectStatus(
        { ...dvm, name: "any", body: { status: {} } },
        setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
      ),
    );
    await expectForbidden(trigger.kc.makeApiClient(CoreV1Api).readNamespacedSecret({ name: "any", namespace: testNamespace }));
  });

  it("lets the trigger create a DVM and read it back (src/events/migrationStore.ts's two calls)", async () => {
    const api = trigger.kc.makeApiClient(CustomObjectsApi);
    const dvm = { group: DVM_GROUP, version: DVM_VERSION, namespace: testNamespace, plural: DVM_PLURAL };
    const spec = { persistentVolumeClaims: [{ name: "data", namespace: testNamespace, targetStorageClass: "standard", targetAccessModes: ["ReadWriteOnce"] }] };
    const created = (await api.createNamespacedCustomObject({
      ...dvm,
      body: { apiVersion: DVM_API_VERSION, kind: DVM_KIND, metadata: { name: "from-trigger" }, spec },
    })) as { metadata: { uid: string } };
    const read = (await api.getNamespacedCustomObject({ ...dvm, name: "from-trigger" })) as { metadata: { uid: string } };
    expect(read.metadata.uid).toBe(created.metadata.uid);
    // A second create of the same name is the API server's AlreadyExists, not a refusal.
    const again = await api
      .createNamespacedCustomObject({ ...dvm, body: { apiVersion: DVM_API_VERSION, kind: DVM_KIND, metadata: { name: "from-trigger" }, spec } })
      .then(
        () => 201,
        (error: unknown) => statusCode(error),
      );
    expect(again).toBe(409);
  });

  it("grants each identity every rule of its roles through the bindings (paths a migration on kwok does not take too)", async () => {
    // NodePort endpoints (nodes), Routes, and progress from pod logs are not on the fixture's path, and
    // the last one even swallows its errors: ask the authorizer about every rule instead.
    const CLUSTER_SCOPED = new Set(["namespaces", "nodes", "storageclasses"]);
    const identities: Array<[string, KubeConfig, Manifest[]]> = [
      [
        "dvm-phase-functions",
        phaseFunctions.kc,
        hostRbac.filter((d) => d.kind === "ClusterRole" && /^dvm-(phase-functions-host|transfer)-/.test(d.metadata!.name!)),
      ],
      // Its ClusterRole, and the Role for its Lease (the one name it may get and update).
      ["dvm-relay", relayIdentity.kc, hostRbac.filter((d) => (d.kind === "ClusterRole" || d.kind === "Role") && d.metadata!.name!.startsWith("dvm-relay-"))],
      [
        "dvm-transfer (destination)",
        transferDestination.kc,
        remoteRbac.filter((d) => d.kind === "ClusterRole" && d.metadata!.name!.startsWith("dvm-transfer-")),
      ],
      [
        "dvm-relay-pods (destination)",
        relayPodsDestination.kc,
        remoteRbac.filter((d) => d.kind === "ClusterRole" && d.metadata!.name!.startsWith("dvm-relay-pods-")),
      ],
      ["dvm-trigger", trigger.kc, hostRbac.filter((d) => d.kind === "ClusterRole" && d.metadata!.name!.startsWith("dvm-trigger-"))],
    ];
    const denied: string[] = [];
    for (const [who, kc, roles] of identities) {
      expect(roles.length, who).toBeGreaterThan(0);
      for (const rule of roles.flatMap((r) => r.rules as Array<{ apiGroups: string[]; resources: string[]; verbs: string[]; resourceNames?: string[] }>)) {
        for (const group of rule.apiGroups) {
          for (const full of rule.resources) {
            const [resource, subresource] = full.split("/") as [string, string | undefined];
            for (const verb of rule.verbs) {
              for (const name of rule.resourceNames ?? [undefined]) {
                const attributes = {
                  verb,
                  group,
                  resource,
                  ...(subresource ? { subresource } : {}),
                  ...(CLUSTER_SCOPED.has(resource) ? {} : { namespace: testNamespace }),
                  ...(name ? { name } : {}),
                };
                if (!(await allowed(kc, attributes))) denied.push(`${who}: ${verb} ${group || "core"}/${full}${name ? ` ${name}` : ""}`);
              }
            }
          }
        }
      }
    }
    expect(denied).toEqual([]);

    // And one such call for real: the rsync progress read (pods/log) with the functions' token.
    await ignoreExists(
      clusters.source.makeApiClient(CoreV1Api).createNamespacedPod({
        namespace: testNamespace,
        body: { metadata: { name: "log-reader" }, spec: { containers: [{ name: "rsync", image: "example.invalid/rsync:latest" }] } },
      }),
    );
    // The apiserver authorizes before it asks the kubelet; whatever the kubelet (kwok, or a container
    // still pulling) answers, the request must not be refused.
    const read = await new KubeCluster("source", phaseFunctions.kc).podLogs(testNamespace, "log-reader", "rsync", 10).then(
      () => "read",
      (error: { statusCode?: number; message?: string }) => (error.statusCode === 401 || error.statusCode === 403 ? `refused: ${error.message}` : "read"),
    );
    expect(read).toBe("read");
  });

  it("lets the relay sync and forward with its own token (pods on the destination with the relay-pods token)", async () => {
    const requests: ReconcileRequest[] = [];
    const logs: string[] = [];
    const relay = new Relay({
      kubeConfig: relayIdentity.kc,
      transport: new InProcessTransport(async (request) => {
        requests.push(request);
        return undefined;
      }),
      clusters: [{ name: "destination", kubeConfig: relayPodsDestination.kc }],
      resyncMs: 0,
      log: jsonLogger({ component: "relay" }, "warn", (line) => logs.push(line)),
    });
    relay.start();
    try {
      await poll("the relay to be ready with every watch open", async () => {
        const stats = relay.stats();
        return relay.ready() && stats.watches.every((w) => w.synced && w.connected) ? stats : undefined;
      });
      const admin = clusters.source.makeApiClient(CustomObjectsApi);
      const created = (await admin.createNamespacedCustomObject({
        group: DVM_GROUP,
        version: DVM_VERSION,
        namespace: testNamespace,
        plural: DVM_PLURAL,
        body: {
          apiVersion: DVM_API_VERSION,
          kind: DVM_KIND,
          metadata: { name: "relay-rbac" },
          spec: { persistentVolumeClaims: [{ name: "data", namespace: testNamespace, targetStorageClass: "standard", targetAccessModes: ["ReadWriteOnce"] }] },
        },
      })) as { metadata: { uid: string } };
      const { uid } = created.metadata;
      const reasons = () => requests.filter((r) => r.uid === uid).map((r) => r.reason ?? "");
      await poll("a forward of the new DVM", async () => (reasons().length > 0 ? true : undefined));

      // Owned objects drive their DVM: a progress record on the host, a pod on the destination.
      await admin.createNamespacedCustomObject({
        group: DVM_GROUP,
        version: DVM_VERSION,
        namespace: testNamespace,
        plural: DVMP_PLURAL,
        body: { apiVersion: DVM_API_VERSION, kind: DVMP_KIND, metadata: { name: "relay-rbac", labels: { [LABEL.dvmUid]: uid } }, spec: { pvcName: "data" } },
      });
      await poll("a forward for the progress record", async () => (reasons().some((r) => r.startsWith("progress ")) ? true : undefined));
      await clusters.destination.makeApiClient(CoreV1Api).createNamespacedPod({
        namespace: testNamespace,
        // A transfer pod's labels: the relay watches those only.
        body: {
          metadata: { name: "relay-rbac", labels: { [LABEL.dvmUid]: uid, [LABEL.transfer]: "true" } },
          spec: { containers: [{ name: "c", image: "example.invalid/rsync:latest" }] },
        },
      });
      await poll("a forward for the destination pod", async () =>
        reasons().some((r) => r.startsWith("pod ") && r.endsWith("@destination")) ? true : undefined,
      );

      // No list or watch was refused anywhere. (Other errors are the server's to have: right after a
      // control plane starts, a CRD's watch cache answers 429 "storage is (re)initializing" for a moment.)
      expect(logs.filter((line) => /"statusCode":(401|403)|forbidden/i.test(line))).toEqual([]);
    } finally {
      await relay.stop(5_000);
    }
  });

  // The whole migration needs kwok (it completes the transfer pods) and the fixture's storage class;
  // both exist only on the control planes this run starts itself.
  describe.skipIf(
    otherEnvironment(
      "clusters this run started itself",
      clusters.info.local,
      "kwok and the fixture's storage class exist only there (.ci/external-endpoints.sh runs against others)",
    ) || missing("DynamoDB (the dynamo test service)", dynamoEndpoint(), "run without DVM_TEST_SERVICES"),
  )("a whole migration", () => {
    let table: FreshTable;

    beforeAll(async () => {
      table = await freshLedgerTable();
    });

    afterAll(async () => {
      await table?.drop();
    });

    it("completes with the phase functions' host identity and the transfer identity on the destination", async () => {
      const fixture = await createMigrationFixture(clusters, run);
      // The destination's kubeconfig, as an operator would store it: the restricted transfer identity.
      await ignoreExists(
        clusters.source.makeApiClient(CoreV1Api).createNamespacedSecret({
          namespace: fixture.dvmNamespace,
          body: { metadata: { name: "destination-restricted" }, stringData: { kubeconfig: transferDestination.text } },
        }),
      );
      const spec = { ...fixture.spec, destinationCluster: { kubeconfigSecretRef: { name: "destination-restricted" } }, deleteProgressReportingCRs: true };
      const dvm = await createDvm(clusters.source, fixture.dvmNamespace, "restricted", spec);

      const runner = createPhaseRunner({
        hostKubeConfig: phaseFunctions.kc,
        ledgerTableName: table.tableName,
        dynamo: table.client,
        bodies: PHASE_BODIES,
        leaseMs: 30_000,
        policy: TEST_MIGRATION_POLICY,
      });
      // A refused call is retried by the runner forever: stop at the first one, naming it.
      const strict = {
        run: async (request: ReconcileRequest): Promise<RunResult> => {
          const result = await runner.run(request);
          if (result.kind === "retry" && /forbidden|\b403\b/i.test(result.error)) throw new Error(`phase ${result.phase} was refused: ${result.error}`);
          return result;
        },
      } as unknown as PhaseRunner;
      const results = await driveToCompletion(strict, requestFor(dvm));

      expect(results.filter((r) => r.kind === "retry")).toEqual([]);
      const done = await readDvm(clusters.source, fixture.dvmNamespace, "restricted");
      expect(done.status).toMatchObject({ phase: "Completed", itinerary: "VolumeMigration" });
      expect(findCondition(done.status.conditions, "Succeeded")?.status).toBe("True");
      expect(done.status.rsyncOperations?.every((op) => op.succeeded)).toBe(true);
      // Every phase of the itinerary ran, each with these permissions (cleanup of progress records too).
      const ran = new Set(results.flatMap((r) => ("phase" in r ? [r.phase] : [])));
      for (const phase of ITINERARIES.VolumeMigration) expect(ran.has(phase), phase).toBe(true);
    });
  });
});

// ---------------------------------------------------------------------------------------------------
// The relay bundle as a process

describe("the relay bundle (dist/relay/relay.mjs)", () => {
  let child: ChildProcess | undefined;
  let lambda: Awaited<ReturnType<typeof startLambdaStandIn>> | undefined;
  let output = "";

  afterAll(async () => {
    if (child && child.exitCode === null) child.kill("SIGKILL");
    await lambda?.close();
  });

  it("builds, becomes ready with the relay's token, invokes the function for a new DVM and exits 0 on SIGTERM", async () => {
    const build = await promisify(execFile)(process.execPath, [join(ROOT, "infra", "deploy", "relay", "build.mjs")], { cwd: ROOT, encoding: "utf8" });
    expect(build.stdout).toMatch(/relay bundle: dist\/relay\/relay\.mjs/);
    const bundle = join(ROOT, "dist", "relay", "relay.mjs");

    lambda = await startLambdaStandIn();
    const dir = mkdtempSync(join(tmpdir(), "dvm-relay-bundle-"));
    const kubeconfig = join(dir, "relay.kubeconfig");
    writeFileSync(kubeconfig, relayIdentity.text, { mode: 0o600 });
    const healthPort = await findFreePort();
    const functionName = `dvm-it-${run}-phase`;
    // A clean environment: only what the Deployment's ConfigMap and Secret would give it.
    child = spawn(process.execPath, [bundle], {
      cwd: dir,
      env: {
        PATH: process.env.PATH ?? "",
        KUBECONFIG: kubeconfig,
        RELAY_FUNCTION_NAME: functionName,
        RELAY_NAMESPACE: testNamespace,
        // Leader election with the relay's own Role (moved to the test namespace): the bundle creates
        // the Lease, leads, and only then forwards.
        RELAY_LEASE_NAMESPACE: testNamespace,
        POD_NAME: "dvm-relay-bundle",
        RELAY_HEALTH_PORT: String(healthPort),
        RELAY_RESYNC_MS: "0",
        AWS_REGION: "us-east-1",
        AWS_ACCESS_KEY_ID: "test",
        AWS_SECRET_ACCESS_KEY: "test",
        AWS_ENDPOINT_URL_LAMBDA: lambda.url,
        LOG_LEVEL: "debug",
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    child.stdout!.on("data", (chunk: Buffer) => (output += chunk.toString()));
    child.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString()));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child!.once("exit", (code, signal) => resolve({ code, signal })),
    );
    const alive = () => {
      if (child!.exitCode !== null) throw new Error(`the relay exited with ${child!.exitCode}:\n${output}`);
    };

    const health = `http://127.0.0.1:${healthPort}`;
    const ready = await poll(
      "the bundle's /readyz",
      async () => {
        alive();
        const response = await fetch(`${health}/readyz`);
        return response.status === 200 ? ((await response.json()) as { status: string; role: string }) : undefined;
      },
      60_000,
    ).catch((error: unknown) => {
      throw new Error(`${String(error)}\n${output}`);
    });
    expect(ready).toMatchObject({ status: "ready", role: "leader" });
    expect((await fetch(`${health}/healthz`)).status).toBe(200);

    const dvm = await createDvm(clusters.source, testNamespace, "bundle", {
      persistentVolumeClaims: [{ name: "data", namespace: testNamespace, targetStorageClass: "standard", targetAccessModes: ["ReadWriteOnce"] }],
    });
    const invocation = await poll("an Invoke call for the new DVM", async () => {
      alive();
      return lambda!.invocations.find((i) => i.payload.uid === dvm.metadata.uid);
    }).catch((error: unknown) => {
      throw new Error(`${String(error)}\n${output}`);
    });
    expect(invocation).toMatchObject({
      functionName,
      invocationType: "Event",
      payload: { uid: dvm.metadata.uid, namespace: testNamespace, name: "bundle" },
    });

    child.kill("SIGTERM");
    const end = await exited;
    expect(end, output).toEqual({ code: 0, signal: null });
    expect(output).toMatch(/"stopping"/);
    // A clean stop hands the Lease back, so a standby would take over at once.
    const released = await clusters.source.makeApiClient(CoordinationV1Api).readNamespacedLease({ namespace: testNamespace, name: RELAY_LEASE });
    expect(released.spec?.holderIdentity).toBe("");
  });
});
