/**
 * The RBAC in infra/deploy/k8s is sufficient, on real API servers (the run's "source" and "destination"
 * clusters): the ClusterRoles and bindings are created for real (renamed per run, bound to
 * ServiceAccounts in a test namespace, test/support/rbacIdentities.ts), a token is minted for each
 * ServiceAccount with the TokenRequest API, and
 *  - a whole migration runs to Completed with the phase functions' host identity (host + transfer
 *    roles) as the host kubeconfig, and the transfer-side identity in the destination's kubeconfig Secret;
 *  - the relay (in-process) syncs and forwards with the relay's token, watching pods on the destination
 *    with the remote relay-pods token;
 *  - calls outside the roles are refused (403), so the tokens really are the restricted ones.
 * (test/unit/infra/manifests.test.ts proves the other direction: nothing beyond what the code calls.)
 */

import { CoordinationV1Api, CoreV1Api, CustomObjectsApi, type KubeConfig, PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPhaseRunner } from "../../../src/aws/phaseRunner";
import { LABEL } from "../../../src/contracts/labels";
import type { ReconcileRequest, RunResult } from "../../../src/contracts/request";
import { findCondition } from "../../../src/dvm/conditions";
import { ITINERARIES } from "../../../src/dvm/itinerary";
import { DVM_API_VERSION, DVM_GROUP, DVM_KIND, DVM_PLURAL, DVM_VERSION, DVMP_KIND, DVMP_PLURAL } from "../../../src/dvm/types";
import { KubeCluster } from "../../../src/kube/kubeCluster";
import { jsonLogger } from "../../../src/lib/log";
import { PHASE_BODIES } from "../../../src/phases";
import { Relay } from "../../../src/relay/relay";
import type { PhaseRunner } from "../../../src/runner/runner";
import { testClusters } from "../../support/clusters";
import { dynamoEndpoint, type FreshTable, freshLedgerTable } from "../../support/dynamo";
import { InProcessTransport } from "../../support/inProcessTransport";
import { ignoreExists, type Manifest, statusCode } from "../../support/manifests";
import { createDvm, createMigrationFixture, driveToCompletion, readDvm, requestFor, TEST_MIGRATION_POLICY } from "../../support/migration";
import { found } from "../../support/poll";
import { allowed, createRestrictedIdentities, type Identity, RELAY_LEASE, type RestrictedIdentities } from "../../support/rbacIdentities";
import { missing, otherEnvironment } from "../../support/requirements";

const clusters = testClusters();
const run = `m${Date.now().toString(36)}`;
const testNamespace = `rbac-${run}`;
/** A wait polls every 100 ms for 30 s, through errors (a watch cache warming up). */
const WAIT = { timeoutMs: 30_000, intervalMs: 100, retryErrors: true };

let identities: RestrictedIdentities;
let phaseFunctions: Identity;
let relayIdentity: Identity;
let transferDestination: Identity;
let relayPodsDestination: Identity;
let trigger: Identity;
let hostRbac: Manifest[];
let remoteRbac: Manifest[];

beforeAll(async () => {
  identities = await createRestrictedIdentities(clusters, run, testNamespace);
  ({ phaseFunctions, relay: relayIdentity, transferDestination, relayPodsDestination, trigger, hostRbac, remoteRbac } = identities);
});

afterAll(async () => {
  await identities?.remove();
});

async function expectForbidden(call: Promise<unknown>): Promise<void> {
  const code = await call.then(
    () => 200,
    (error: unknown) => statusCode(error),
  );
  expect(code).toBe(403);
}

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
    // The trigger creates, reads, lists and (a schedule's history limit) deletes DVMs, nothing more: no
    // spec change, no status, no Secrets.
    await expectForbidden(
      custom(trigger.kc).patchNamespacedCustomObject({ ...dvm, name: "any", body: { spec: {} } }, setHeaderOptions("Content-Type", PatchStrategy.MergePatch)),
    );
    await expectForbidden(
      custom(trigger.kc).patchNamespacedCustomObjectStatus(
        { ...dvm, name: "any", body: { status: {} } },
        setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
      ),
    );
    await expectForbidden(trigger.kc.makeApiClient(CoreV1Api).readNamespacedSecret({ name: "any", namespace: testNamespace }));
  });

  it("lets the trigger create a DVM, read it back, list and delete it (src/events/migrationStore.ts's calls)", async () => {
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
    // A schedule's history limit: its runs by label, and the deletion of one beyond the limit.
    const listed = (await api.listNamespacedCustomObject({ ...dvm, labelSelector: "events.dvm-serverless.io/schedule=none" })) as { items: unknown[] };
    expect(listed.items).toEqual([]);
    await api.deleteNamespacedCustomObject({ ...dvm, name: "from-trigger", body: { preconditions: { uid: created.metadata.uid } } });
  });

  it("confines the trigger to the namespaces it is bound in: no DVM elsewhere, admin namespaces included", async () => {
    const api = trigger.kc.makeApiClient(CustomObjectsApi);
    const spec = { persistentVolumeClaims: [{ name: "data", namespace: "any", targetStorageClass: "standard", targetAccessModes: ["ReadWriteOnce"] }] };
    for (const namespace of ["dvm-system", "default"]) {
      await expectForbidden(
        api.createNamespacedCustomObject({
          group: DVM_GROUP,
          version: DVM_VERSION,
          namespace,
          plural: DVM_PLURAL,
          body: { apiVersion: DVM_API_VERSION, kind: DVM_KIND, metadata: { name: "escalation" }, spec },
        }),
      );
    }
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
      await found(
        "the relay to be ready with every watch open",
        async () => {
          const stats = relay.stats();
          return relay.ready() && stats.watches.every((w) => w.synced && w.connected) ? stats : undefined;
        },
        WAIT,
      );
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
      await found("a forward of the new DVM", async () => (reasons().length > 0 ? true : undefined), WAIT);

      // Owned objects drive their DVM: a progress record on the host, a pod on the destination.
      await admin.createNamespacedCustomObject({
        group: DVM_GROUP,
        version: DVM_VERSION,
        namespace: testNamespace,
        plural: DVMP_PLURAL,
        body: { apiVersion: DVM_API_VERSION, kind: DVMP_KIND, metadata: { name: "relay-rbac", labels: { [LABEL.dvmUid]: uid } }, spec: { pvcName: "data" } },
      });
      await found("a forward for the progress record", async () => (reasons().some((r) => r.startsWith("progress ")) ? true : undefined), WAIT);
      await clusters.destination.makeApiClient(CoreV1Api).createNamespacedPod({
        namespace: testNamespace,
        // A transfer pod's labels: the relay watches those only.
        body: {
          metadata: { name: "relay-rbac", labels: { [LABEL.dvmUid]: uid, [LABEL.transfer]: "true" } },
          spec: { containers: [{ name: "c", image: "example.invalid/rsync:latest" }] },
        },
      });
      await found(
        "a forward for the destination pod",
        async () => (reasons().some((r) => r.startsWith("pod ") && r.endsWith("@destination")) ? true : undefined),
        WAIT,
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
