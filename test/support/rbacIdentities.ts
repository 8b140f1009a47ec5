/**
 * Restricted identities made from the project's RBAC manifests on real API servers: the ClusterRoles,
 * Roles and bindings of infra/deploy/k8s created for real (renamed per run, bound to ServiceAccounts in a
 * test namespace) and a kubeconfig with a TokenRequest token for each ServiceAccount, for
 * test/integration/manifests/.
 */

import { join } from "node:path";
import { AuthorizationV1Api, CoreV1Api, CustomObjectsApi, KubeConfig, KubernetesObjectApi } from "@kubernetes/client-node";
import { stringify } from "yaml";
import { DVM_GROUP, DVM_PLURAL, DVM_VERSION, DVMP_PLURAL } from "../../src/dvm/types";
import type { TestClusters } from "./clusters";
import { clone, ignoreExists, ignoreMissing, K8S_DIR, type Manifest, manifests } from "./manifests";
import { found } from "./poll";

/** The relay's Lease, the one name its Role lets it read and update (infra/deploy/k8s/relay-config.yaml). */
export const RELAY_LEASE = "dvm-relay";

/** A kubeconfig (parsed and as text) for one ServiceAccount. */
export interface Identity {
  kc: KubeConfig;
  text: string;
}

export interface RestrictedIdentities {
  /** The host cluster's RBAC objects as created (ClusterRoles renamed for the run). */
  hostRbac: Manifest[];
  remoteRbac: Manifest[];
  phaseFunctions: Identity;
  relay: Identity;
  transferDestination: Identity;
  relayPodsDestination: Identity;
  trigger: Identity;
  /** Removes what was created in `namespace` and the RBAC objects, on both clusters. */
  remove(): Promise<void>;
}

/**
 * The RBAC objects of `docs`, made unique to this run so that they can be created for real next to
 * anything already on the cluster (an existing cluster may have infra/deploy/k8s applied): ClusterRoles and
 * ClusterRoleBindings get a suffix (roleRef follows, in RoleBindings of a ClusterRole too); ServiceAccounts, Roles and RoleBindings move to the
 * test namespace (the relay's Lease is then made there). Token
 * Secrets are left out (nothing fills them without a controller-manager; tokens come from TokenRequest).
 */
function instantiate(docs: Manifest[], run: string, testNamespace: string): Manifest[] {
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
        // A RoleBinding of a ClusterRole (the trigger's, one per namespace) follows the ClusterRole's new name.
        if (copy.roleRef.kind === "ClusterRole") copy.roleRef.name += suffix;
        copy.subjects = copy.subjects.map((s: { namespace?: string }) => ({ ...s, namespace: testNamespace }));
        return [copy];
      default:
        return [];
    }
  });
}

export async function createAll(kc: KubeConfig, objects: Manifest[]): Promise<void> {
  const api = KubernetesObjectApi.makeApiClient(kc);
  for (const object of objects) await ignoreExists(api.create(clone(object)));
}

export async function deleteAll(kc: KubeConfig, objects: Manifest[]): Promise<void> {
  const api = KubernetesObjectApi.makeApiClient(kc);
  for (const object of [...objects].reverse()) await ignoreMissing(api.delete(clone(object))).catch(() => undefined);
}

/** A kubeconfig for `serviceAccount` (in `testNamespace`) on the cluster of `admin`, with a fresh token. */
async function serviceAccountKubeConfig(admin: KubeConfig, testNamespace: string, serviceAccount: string): Promise<Identity> {
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
export async function allowed(
  kc: KubeConfig,
  attributes: { verb: string; resource: string; group?: string; subresource?: string; namespace?: string; name?: string },
): Promise<boolean> {
  const review = await kc.makeApiClient(AuthorizationV1Api).createSelfSubjectAccessReview({
    body: { apiVersion: "authorization.k8s.io/v1", kind: "SelfSubjectAccessReview", spec: { resourceAttributes: { group: "", ...attributes } } },
  });
  return review.status?.allowed === true;
}

async function untilAllowed(kc: KubeConfig, attributes: Parameters<typeof allowed>[1]): Promise<void> {
  await found(`RBAC to allow ${attributes.verb} ${attributes.resource}`, () => allowed(kc, attributes), {
    timeoutMs: 30_000,
    intervalMs: 100,
    retryErrors: true,
  });
}

/**
 * Creates `namespace` and the RBAC of infra/deploy/k8s on the source (host) and destination clusters,
 * mints a token for each identity, and waits until the authorizer knows the new bindings.
 */
export async function createRestrictedIdentities(clusters: TestClusters, run: string, namespace: string): Promise<RestrictedIdentities> {
  const hostRbac = instantiate(
    [
      ...manifests(join(K8S_DIR, "common", "transfer-clusterrole.yaml")),
      ...manifests(join(K8S_DIR, "relay-rbac.yaml")),
      ...manifests(join(K8S_DIR, "phase-functions-rbac.yaml")),
      ...manifests(join(K8S_DIR, "trigger-rbac.yaml")),
      // The trigger's per-namespace binding, as the operator copies it into a namespace that receives events.
      ...manifests(join(K8S_DIR, "trigger-rolebinding.yaml")),
    ],
    run,
    namespace,
  );
  const remoteRbac = instantiate(
    [...manifests(join(K8S_DIR, "common", "transfer-clusterrole.yaml")), ...manifests(join(K8S_DIR, "remote", "identities.yaml"))],
    run,
    namespace,
  );
  for (const kc of [clusters.source, clusters.destination]) {
    await ignoreExists(kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: namespace } } }));
  }
  await createAll(clusters.source, hostRbac);
  await createAll(clusters.destination, remoteRbac);
  const phaseFunctions = await serviceAccountKubeConfig(clusters.source, namespace, "dvm-phase-functions");
  const relay = await serviceAccountKubeConfig(clusters.source, namespace, "dvm-relay");
  const transferDestination = await serviceAccountKubeConfig(clusters.destination, namespace, "dvm-transfer");
  const relayPodsDestination = await serviceAccountKubeConfig(clusters.destination, namespace, "dvm-relay-pods");
  const trigger = await serviceAccountKubeConfig(clusters.source, namespace, "dvm-trigger");
  // The authorizer's caches learn new bindings asynchronously.
  await untilAllowed(phaseFunctions.kc, { verb: "get", group: DVM_GROUP, resource: DVM_PLURAL, namespace });
  await untilAllowed(phaseFunctions.kc, { verb: "create", resource: "pods", namespace });
  await untilAllowed(relay.kc, { verb: "watch", group: DVM_GROUP, resource: DVM_PLURAL });
  await untilAllowed(relay.kc, { verb: "update", group: "coordination.k8s.io", resource: "leases", namespace, name: RELAY_LEASE });
  await untilAllowed(transferDestination.kc, { verb: "create", resource: "pods", namespace });
  await untilAllowed(relayPodsDestination.kc, { verb: "watch", resource: "pods" });
  await untilAllowed(trigger.kc, { verb: "create", group: DVM_GROUP, resource: DVM_PLURAL, namespace });
  const remove = async () => {
    // Namespaces are never emptied on the harness's control planes (no controller-manager): remove what
    // the tests created in the namespace, so that no relay of a later test file sees it.
    const dvms = { group: DVM_GROUP, version: DVM_VERSION, namespace };
    for (const plural of [DVM_PLURAL, DVMP_PLURAL]) {
      await clusters.source
        .makeApiClient(CustomObjectsApi)
        .deleteCollectionNamespacedCustomObject({ ...dvms, plural })
        .catch(() => undefined);
    }
    for (const kc of [clusters.source, clusters.destination]) {
      await kc
        .makeApiClient(CoreV1Api)
        .deleteCollectionNamespacedPod({ namespace, gracePeriodSeconds: 0 })
        .catch(() => undefined);
    }
    await deleteAll(clusters.source, hostRbac);
    await deleteAll(clusters.destination, remoteRbac);
    for (const kc of [clusters.source, clusters.destination]) {
      await ignoreMissing(kc.makeApiClient(CoreV1Api).deleteNamespace({ name: namespace })).catch(() => undefined);
    }
  };
  return { hostRbac, remoteRbac, phaseFunctions, relay, transferDestination, relayPodsDestination, trigger, remove };
}
