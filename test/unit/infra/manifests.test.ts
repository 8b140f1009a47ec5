/**
 * infra/deploy/k8s is least privilege and internally consistent, read as YAML (no cluster needed):
 * - no "*" anywhere in an RBAC rule; the relay's roles have no write verb but on its one Lease;
 * - each ClusterRole grants exactly the (group, resource, verb) triples listed here, each with the code
 *   that needs it: a rule added without a caller, or a call added without a rule, fails this test
 *   (test/integration/manifests/rbac.test.ts proves these are enough, on a real API server);
 * - the relay Deployment is locked down (non-root, read-only root, no capabilities, seccomp, probes on the
 *   health port the ConfigMap sets, resources), and its ConfigMap is accepted by the relay's own parser;
 * - no credentials are written anywhere; the kustomizations reference every file once;
 * - the image (infra/deploy/relay/Dockerfile) and the kind configs agree with the manifests and infra/dev/kind/e2e.sh.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { ENV } from "../../../src/config/environment";
import { DVM_GROUP, DVM_PLURAL, DVMP_PLURAL } from "../../../src/dvm/types";
import { parseRelayEnv } from "../../../src/relay/config";
import { DEFAULT_HEALTH_PORT } from "../../../src/relay/health";
import { otherEnvironment } from "../../support/requirements";

const ROOT = join(import.meta.dirname, "..", "..", "..");
const K8S = join(ROOT, "infra", "deploy", "k8s");
const KIND = join(ROOT, "infra", "dev", "kind");

// biome-ignore lint/suspicious/noExplicitAny: parsed YAML/JSON, walked freely by the test
type Doc = Record<string, any>;
interface Rule {
  apiGroups?: string[];
  resources?: string[];
  verbs?: string[];
  resourceNames?: string[];
  nonResourceURLs?: string[];
}

function yamlFiles(dir: string): string[] {
  return readdirSync(dir)
    .flatMap((entry) => {
      const path = join(dir, entry);
      return statSync(path).isDirectory() ? yamlFiles(path) : /\.ya?ml$/.test(entry) ? [path] : [];
    })
    .sort();
}

function docsOf(file: string): Doc[] {
  return parseAllDocuments(readFileSync(file, "utf8")).flatMap((doc) => {
    if (doc.errors.length > 0) throw new Error(`${relative(ROOT, file)}: ${doc.errors[0]!.message}`);
    const value = doc.toJS() as Doc | null;
    return value ? [value] : [];
  });
}

const manifestFiles = yamlFiles(K8S).filter((f) => !f.endsWith("kustomization.yaml"));
const all = manifestFiles.flatMap((file) => docsOf(file).map((doc) => ({ file: relative(ROOT, file), doc })));
/** Not part of any build: the operator copies it into each namespace listed in triggerAllowedNamespaces. */
const TRIGGER_BINDING_TEMPLATE = "infra/deploy/k8s/trigger-rolebinding.yaml";
const find = (kind: string, name: string): Doc => {
  const found = all.filter((m) => m.doc.kind === kind && m.doc.metadata?.name === name);
  if (found.length !== 1) throw new Error(`expected one ${kind} ${name}, found ${found.length}`);
  return found[0]!.doc;
};
const roles = all.filter((m) => m.doc.kind === "ClusterRole" || m.doc.kind === "Role");
/** The ClusterRole or (namespaced) Role named `name`. */
const findRole = (name: string): Doc => {
  const found = roles.filter((m) => m.doc.metadata?.name === name);
  if (found.length !== 1) throw new Error(`expected one role ${name}, found ${found.length}`);
  return found[0]!.doc;
};

/** "group/resource verb" for every combination a role grants. */
function grants(role: Doc): string[] {
  return (role.rules as Rule[])
    .flatMap((rule) => (rule.apiGroups ?? []).flatMap((g) => (rule.resources ?? []).flatMap((r) => (rule.verbs ?? []).map((v) => `${g || "core"}/${r} ${v}`))))
    .sort();
}

const WRITE_VERBS = ["create", "update", "patch", "delete", "deletecollection", "escalate", "bind", "impersonate", "approve", "sign"];

/**
 * What the code calls, per role. Each line names the caller; keep it in step with the code and the YAML.
 * The relay: src/relay/resources.ts (listers) and src/relay/listWatch.ts (watches).
 */
const EXPECTED: Record<string, string[]> = {
  "dvm-relay": [
    `${DVM_GROUP}/${DVM_PLURAL} list`, // dvmLister
    `${DVM_GROUP}/${DVM_PLURAL} watch`, // ListWatch "dvms"
    `${DVM_GROUP}/${DVMP_PLURAL} list`, // progressVersionLister
    `${DVM_GROUP}/${DVMP_PLURAL} watch`, // ListWatch "progress"
    "core/pods list", // podVersionLister (host)
    "core/pods watch", // ListWatch "pods@host"
  ],
  // On clusters other than the host: only the pod watch (RELAY_POD_CLUSTERS).
  "dvm-relay-pods": ["core/pods list", "core/pods watch"],
  // A Role in dvm-system: src/relay/leaderLeaseStore.ts KubeLeaderLeaseStore (get and update only of the one Lease).
  "dvm-relay-leader-election": [
    "coordination.k8s.io/leases get", // LeaderElector: read the Lease every retry period
    "coordination.k8s.io/leases update", // renew, take over an expired Lease, release on stop
    "coordination.k8s.io/leases create", // the first replica ever creates it
  ],
  "dvm-phase-functions-host": [
    `${DVM_GROUP}/${DVM_PLURAL} get`, // KubeDvmStore.get: the fresh read
    `${DVM_GROUP}/${DVM_PLURAL} patch`, // KubeDvmStore.writeFinalizers: add / release the finalizer
    `${DVM_GROUP}/${DVM_PLURAL}/status patch`, // KubeDvmStore.writeStatus
    // OwnerReferencesPermissionEnforcement: progress records set blockOwnerDeletion on their DVM owner.
    `${DVM_GROUP}/${DVM_PLURAL}/finalizers update`,
    `${DVM_GROUP}/${DVMP_PLURAL} create`, // createPVProgressCRs (ensure)
    `${DVM_GROUP}/${DVMP_PLURAL} get`, // ensure: adopt on AlreadyExists
    `${DVM_GROUP}/${DVMP_PLURAL} list`, // cleanup with deleteProgressReportingCRs
    `${DVM_GROUP}/${DVMP_PLURAL} delete`, // cleanup with deleteProgressReportingCRs
    `${DVM_GROUP}/${DVMP_PLURAL}/status patch`, // runRsyncOperations: progress
    "core/secrets get", // resolver (kubeconfig Secrets); transferConfig hostSecret
    "core/secrets create", // transferConfig hostSecret (rsync password, PKI)
    "core/secrets delete", // cleanup: the host Secrets
  ],
  // The trigger function: src/events/migrationStore.ts KubeMigrationStore.
  "dvm-trigger": [
    `${DVM_GROUP}/${DVM_PLURAL} get`, // get: who owns an existing name
    `${DVM_GROUP}/${DVM_PLURAL} create`, // create: one DVM per migration request event
    `${DVM_GROUP}/${DVM_PLURAL} list`, // listLabelled: a schedule's runs (history limit)
    `${DVM_GROUP}/${DVM_PLURAL} delete`, // delete: a schedule's completed runs beyond its history limit
  ],
  "dvm-transfer": [
    "core/namespaces get", // createDestinationNamespaces: source labels; ensure adopt
    "core/namespaces create", // createDestinationNamespaces
    "core/persistentvolumeclaims get", // started; createDestinationPVCs
    "core/persistentvolumeclaims create", // createDestinationPVCs
    "core/persistentvolumeclaims patch", // pvcUse: the in-use mark, given back at cleanup
    "storage.k8s.io/storageclasses get", // started: the target storage class exists
    "core/pods get", // serverPods; ensure adopt
    "core/pods list", // rsyncOperations (attempts); cleanup
    "core/pods create", // serverPods; rsyncOperations
    "core/pods delete", // rsyncOperations (retries); cleanup
    "core/pods/log get", // rsyncOperations: progress from the rsync log
    "core/services get", // endpointAddress; ensure adopt
    "core/services list", // cleanup
    "core/services create", // createRsyncEndpoint
    "core/services delete", // cleanup
    "core/secrets get", // ensure adopt
    "core/secrets list", // cleanup
    "core/secrets create", // createStunnelConfig: transfer Secrets
    "core/secrets delete", // cleanup
    "core/configmaps list", // cleanup (TRANSFER_KINDS)
    "core/configmaps delete", // cleanup (TRANSFER_KINDS)
    "core/nodes list", // endpointAddress, NodePort
    "route.openshift.io/routes get", // endpointAddress, Route; ensure adopt
    "route.openshift.io/routes list", // cleanup
    "route.openshift.io/routes create", // createRsyncEndpoint, Route
    "route.openshift.io/routes delete", // cleanup
    "apps/deployments get", // quiesce: the fresh read before each guarded write
    "apps/deployments list", // quiesce: the workloads of a source PVC's namespace
    "apps/deployments patch", // quiesce: replicas and the record, in one guarded write
    "apps/statefulsets get", // quiesce
    "apps/statefulsets list", // quiesce
    "apps/statefulsets patch", // quiesce
    "apps/replicasets get", // quiesce
    "apps/replicasets list", // quiesce
    "apps/replicasets patch", // quiesce
    "batch/cronjobs get", // quiesce: suspend
    "batch/cronjobs list", // quiesce
    "batch/cronjobs patch", // quiesce
  ],
};

describe("RBAC in infra/deploy/k8s", () => {
  it("has the roles this test knows, and no others", () => {
    expect(roles.map((r) => r.doc.metadata.name).sort()).toEqual(Object.keys(EXPECTED).sort());
  });

  it("uses no wildcard in any rule, no aggregation, no non-resource URLs, and resourceNames only for the relay's Lease", () => {
    for (const { file, doc } of roles) {
      expect(doc.aggregationRule, `${file} ${doc.metadata.name}`).toBeUndefined();
      for (const rule of doc.rules as Rule[]) {
        const where = `${file} ${doc.metadata.name} ${JSON.stringify(rule)}`;
        for (const field of [rule.apiGroups, rule.resources, rule.verbs, rule.resourceNames, rule.nonResourceURLs]) {
          expect(
            (field ?? []).some((value) => value.includes("*")),
            where,
          ).toBe(false);
        }
        expect(rule.nonResourceURLs, where).toBeUndefined();
        if (doc.metadata.name !== "dvm-relay-leader-election") expect(rule.resourceNames, where).toBeUndefined();
        expect(rule.apiGroups?.length, where).toBeGreaterThan(0);
        expect(rule.resources?.length, where).toBeGreaterThan(0);
        expect(rule.verbs?.length, where).toBeGreaterThan(0);
      }
    }
  });

  it("gives the relay read verbs only, but for its one Lease: get and update of that name, create in dvm-system", () => {
    for (const name of ["dvm-relay", "dvm-relay-pods"]) {
      const verbs = new Set((find("ClusterRole", name).rules as Rule[]).flatMap((r) => r.verbs ?? []));
      expect(
        [...verbs].filter((v) => WRITE_VERBS.includes(v) || !["get", "list", "watch"].includes(v)),
        name,
      ).toEqual([]);
    }
    const election = find("Role", "dvm-relay-leader-election");
    expect(election.metadata.namespace).toBe("dvm-system");
    const leaseName = parseRelayEnv(find("ConfigMap", "dvm-relay").data).leaderElection;
    expect(leaseName).toMatchObject({ enabled: true, name: "dvm-relay" });
    for (const rule of election.rules as Rule[]) {
      expect(rule).toMatchObject({ apiGroups: ["coordination.k8s.io"], resources: ["leases"] });
      // RBAC cannot limit a create by name (the object has none yet when it is authorized); every
      // other verb is limited to the relay's Lease.
      if (rule.verbs!.includes("create")) expect(rule).toEqual({ apiGroups: ["coordination.k8s.io"], resources: ["leases"], verbs: ["create"] });
      else expect(rule.resourceNames).toEqual(["dvm-relay"]);
    }
  });

  it.each(Object.keys(EXPECTED))("%s grants exactly what the code calls", (name) => {
    const role = findRole(name);
    expect(grants(role)).toEqual([...EXPECTED[name]!].sort());
    // No duplicate grants (two rules saying the same thing drift apart).
    expect(new Set(grants(role)).size).toBe(grants(role).length);
  });

  it("never grants secrets list/watch on the host beyond the transfer role, nor any verb on RBAC, nor a change of a DVM", () => {
    const hostVerbs = grants(find("ClusterRole", "dvm-phase-functions-host"));
    expect(hostVerbs.filter((g) => g.startsWith("core/secrets ") && /(list|watch)$/.test(g))).toEqual([]);
    for (const { doc } of roles) {
      expect(
        grants(doc).filter((g) => g.startsWith("rbac.authorization.k8s.io/")),
        doc.metadata.name,
      ).toEqual([]);
      // Only the trigger creates DVMs (and deletes a schedule's completed runs beyond its history limit);
      // only the phase functions patch one (its finalizer); nobody else deletes one.
      const allowedOnDvms =
        { "dvm-trigger": / (get|create|list|delete)$/, "dvm-phase-functions-host": / (get|patch)$/ }[doc.metadata.name as string] ?? / (get|list|watch)$/;
      expect(
        grants(doc).filter((g) => g.startsWith(`${DVM_GROUP}/${DVM_PLURAL} `) && !allowedOnDvms.test(g)),
        doc.metadata.name,
      ).toEqual([]);
    }
  });

  it("binds each role to its own ServiceAccount in dvm-system, and nothing else", () => {
    const bindings = all.filter((m) => m.doc.kind === "ClusterRoleBinding" || m.doc.kind === "RoleBinding").map((m) => m.doc);
    const accounts = new Set(all.filter((m) => m.doc.kind === "ServiceAccount").map((m) => `${m.doc.metadata.namespace}/${m.doc.metadata.name}`));
    const pairs = bindings.map((b) => {
      expect(b.subjects, b.metadata.name).toHaveLength(1);
      const [subject] = b.subjects as Array<{ kind: string; name: string; namespace: string }>;
      expect(subject!.kind).toBe("ServiceAccount");
      expect(accounts.has(`${subject!.namespace}/${subject!.name}`), `${b.metadata.name}: subject exists`).toBe(true);
      // A RoleBinding to its Role (same namespace), or the trigger's per-namespace binding of its ClusterRole;
      // a ClusterRoleBinding to a ClusterRole.
      const triggerBinding = b.kind === "RoleBinding" && b.metadata.name === "dvm-trigger";
      expect(b.roleRef).toMatchObject({ apiGroup: "rbac.authorization.k8s.io", kind: b.kind === "RoleBinding" && !triggerBinding ? "Role" : "ClusterRole" });
      if (b.kind === "RoleBinding" && !triggerBinding) expect(find("Role", b.roleRef.name).metadata.namespace).toBe(b.metadata.namespace);
      expect(Object.keys(EXPECTED), `${b.metadata.name}: role exists`).toContain(b.roleRef.name);
      return `${subject!.name} -> ${b.roleRef.name}`;
    });
    expect(pairs.sort()).toEqual(
      [
        "dvm-relay -> dvm-relay",
        "dvm-relay -> dvm-relay-leader-election",
        "dvm-relay-pods -> dvm-relay-pods",
        "dvm-phase-functions -> dvm-phase-functions-host",
        // The host is also a transfer side when a DVM leaves out sourceCluster / destinationCluster.
        "dvm-phase-functions -> dvm-transfer",
        "dvm-transfer -> dvm-transfer",
        "dvm-trigger -> dvm-trigger",
      ].sort(),
    );
  });
});

describe("the trigger's binding", () => {
  // Whoever may send an event names the namespace: a cluster-wide binding would let an event create a DVM
  // in an admin namespace, whose DVMs may copy any tenant's volume (issue: the second audit, item 1).
  it("is never cluster-wide: one RoleBinding per namespace, kept out of `kubectl apply -k`", () => {
    const bindings = all.filter((m) => /Binding$/.test(m.doc.kind) && m.doc.roleRef?.name === "dvm-trigger");
    expect(bindings.map((m) => `${m.doc.kind} ${m.file}`)).toEqual([`RoleBinding ${TRIGGER_BINDING_TEMPLATE}`]);
    const kustomization = parseAllDocuments(readFileSync(join(K8S, "kustomization.yaml"), "utf8"))[0]!.toJS() as { resources: string[] };
    expect(kustomization.resources).not.toContain("trigger-rolebinding.yaml");
    expect(bindings[0]!.doc.metadata.namespace).not.toBe("dvm-system");
  });
});

describe("the relay Deployment", () => {
  const deployment = find("Deployment", "dvm-relay");
  const pod = deployment.spec.template.spec;
  const [container, ...others] = pod.containers as Doc[];
  const configMap = find("ConfigMap", "dvm-relay");

  it("runs two non-root replicas (one leads) with a read-only root, no capabilities and the runtime's seccomp profile", () => {
    expect(others).toEqual([]);
    expect(deployment.spec.replicas).toBe(2);
    // Safe to roll: old and new pods elect one leader between them.
    expect(deployment.spec.strategy).toEqual({ type: "RollingUpdate", rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } });
    expect(pod.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.topologyKey).toBe("kubernetes.io/hostname");
    expect(pod.serviceAccountName).toBe("dvm-relay");
    expect(pod.hostNetwork ?? false).toBe(false);
    expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, seccompProfile: { type: "RuntimeDefault" } });
    expect(pod.securityContext.runAsUser).toBeGreaterThan(0);
    expect(container!.securityContext).toEqual({
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      runAsNonRoot: true,
      capabilities: { drop: ["ALL"] },
    });
  });

  it("probes /healthz (liveness) and /readyz (readiness) on the port the relay listens on", () => {
    const port = (container!.ports as Doc[]).find((p) => p.name === "health");
    expect(port?.containerPort).toBe(Number(configMap.data.RELAY_HEALTH_PORT));
    expect(port?.containerPort).toBe(DEFAULT_HEALTH_PORT);
    expect(container!.livenessProbe.httpGet).toEqual({ path: "/healthz", port: "health" });
    expect(container!.readinessProbe.httpGet).toEqual({ path: "/readyz", port: "health" });
  });

  it("has requests and limits, and a heap limit below the memory limit", () => {
    expect(container!.resources.requests).toMatchObject({ cpu: expect.any(String), memory: expect.any(String) });
    expect(container!.resources.limits).toMatchObject({ cpu: expect.any(String), memory: expect.any(String) });
    const mebibytes = (q: string) => Number(/^(\d+)Mi$/.exec(q)?.[1]);
    const heap = Number(/--max-old-space-size=(\d+)/.exec((container!.env as Doc[]).find((e) => e.name === "NODE_OPTIONS")!.value)?.[1]);
    expect(heap).toBeLessThan(mebibytes(container!.resources.limits.memory));
  });

  it("takes its settings from the ConfigMap, which the relay's own parser accepts, and its Lease identity and namespace from the pod", () => {
    expect(container!.envFrom).toContainEqual({ configMapRef: { name: "dvm-relay" } });
    const fromPod = Object.fromEntries((container!.env as Doc[]).filter((e) => e.valueFrom).map((e) => [e.name, e.valueFrom.fieldRef?.fieldPath]));
    expect(fromPod).toEqual({ [ENV.podName]: "metadata.name", [ENV.relayLeaseNamespace]: "metadata.namespace" });
    const config = parseRelayEnv({ ...configMap.data, [ENV.podName]: "dvm-relay-5d8f-abcde", [ENV.relayLeaseNamespace]: deployment.metadata.namespace });
    expect(config.leaderElection).toMatchObject({ enabled: true, identity: "dvm-relay-5d8f-abcde", namespace: "dvm-system" });
    expect(config).toMatchObject({ target: { kind: "shared", name: "dvm-serverless-dev-phase" }, invocationType: "Event", healthPort: 8080 });
    expect(config.namespace).toBeUndefined();
    expect(config.podClusters).toEqual([]);
  });

  it("reads AWS credentials only from an optional Secret (or IRSA), never from the manifests", () => {
    expect(container!.envFrom).toContainEqual({ secretRef: { name: "dvm-relay-aws", optional: true } });
    const inline = (container!.env as Doc[]).map((e) => e.name);
    expect(inline.filter((name) => /^AWS_(ACCESS|SECRET|SESSION)/.test(name))).toEqual([]);
    expect(Object.keys(configMap.data).filter((key) => /ACCESS_KEY|SECRET|TOKEN|PASSWORD/.test(key))).toEqual([]);
  });

  it("mounts the other clusters' kubeconfigs read-only from an optional Secret, readable by the relay's group", () => {
    const volume = (pod.volumes as Doc[]).find((v) => v.name === "pod-clusters");
    expect(volume?.secret).toMatchObject({ secretName: "dvm-relay-pod-clusters", optional: true });
    expect(pod.securityContext.fsGroup).toBe(pod.securityContext.runAsGroup);
    expect((container!.volumeMounts as Doc[]).find((m) => m.name === "pod-clusters")).toMatchObject({ mountPath: "/etc/dvm/clusters", readOnly: true });
  });
});

describe("credentials and namespaces", () => {
  it("carries no secret material: token Secrets are empty shells the token controller fills", () => {
    for (const { file, doc } of all.filter((m) => m.doc.kind === "Secret")) {
      expect(doc.type, file).toBe("kubernetes.io/service-account-token");
      expect(doc.data ?? doc.stringData, file).toBeUndefined();
      expect(doc.metadata.annotations?.["kubernetes.io/service-account.name"], file).toBeTruthy();
    }
    const text = manifestFiles.map((f) => readFileSync(f, "utf8")).join("\n");
    expect(text).not.toMatch(/AKIA[0-9A-Z]{16}|aws_secret_access_key|BEGIN [A-Z ]*PRIVATE KEY|\btoken: [A-Za-z0-9._-]{20,}/);
  });

  it("puts every namespaced object in dvm-system, which enforces the restricted Pod Security level", () => {
    const clusterScoped = new Set(["Namespace", "ClusterRole", "ClusterRoleBinding"]);
    for (const { file, doc } of all) {
      // The trigger's binding is a template, copied into each namespace that receives migrations from events.
      if (file === TRIGGER_BINDING_TEMPLATE) continue;
      if (clusterScoped.has(doc.kind)) expect(doc.metadata.namespace, `${file} ${doc.kind}`).toBeUndefined();
      else expect(doc.metadata.namespace, `${file} ${doc.kind} ${doc.metadata.name}`).toBe("dvm-system");
    }
    expect(find("Namespace", "dvm-system").metadata.labels).toMatchObject({ "pod-security.kubernetes.io/enforce": "restricted" });
  });
});

describe("kustomizations", () => {
  /** The files a kustomization pulls in, following directory resources (other kustomizations). */
  function resourcesOf(dir: string, seen: string[] = []): string[] {
    const kustomization = docsOf(join(dir, "kustomization.yaml"))[0]!;
    expect(kustomization).toMatchObject({ apiVersion: "kustomize.config.k8s.io/v1beta1", kind: "Kustomization" });
    for (const entry of kustomization.resources as string[]) {
      const path = resolve(dir, entry);
      expect(existsSync(path), `${relative(ROOT, dir)}: ${entry}`).toBe(true);
      if (statSync(path).isDirectory()) resourcesOf(path, seen);
      else seen.push(relative(ROOT, path));
    }
    return seen;
  }

  /** The optional metrics component's files (a kustomize Component, not in the default build). */
  function componentFiles(dir: string): string[] {
    const component = docsOf(join(dir, "kustomization.yaml"))[0]!;
    expect(component).toMatchObject({ apiVersion: "kustomize.config.k8s.io/v1alpha1", kind: "Component" });
    return (component.resources as string[]).map((entry) => relative(ROOT, resolve(dir, entry)));
  }

  it("the host (infra/deploy/k8s) and remote (infra/deploy/k8s/remote) builds and the metrics component together cover every manifest, each once per build", () => {
    const host = resourcesOf(K8S);
    const remote = resourcesOf(join(K8S, "remote"));
    const metrics = componentFiles(join(K8S, "metrics"));
    expect(new Set(host).size).toBe(host.length);
    expect(new Set(remote).size).toBe(remote.length);
    // Optional: the default `kubectl apply -k infra/deploy/k8s` has no ServiceMonitor (its CRD may be absent).
    expect(host.filter((f) => metrics.includes(f))).toEqual([]);
    expect([...new Set([...host, ...remote, ...metrics, TRIGGER_BINDING_TEMPLATE])].sort()).toEqual(manifestFiles.map((f) => relative(ROOT, f)).sort());
    // The remote clusters get no relay Deployment and no host roles.
    expect(remote.filter((f) => /relay-|phase-functions|trigger/.test(f))).toEqual([]);
  });

  it("the metrics component's Service reaches the relay's health port and its ServiceMonitor selects that Service", () => {
    const deployment = find("Deployment", "dvm-relay");
    const service = find("Service", "dvm-relay-metrics");
    const monitor = find("ServiceMonitor", "dvm-relay");
    expect(deployment.spec.template.metadata.labels).toMatchObject(service.spec.selector);
    const healthPort = deployment.spec.template.spec.containers[0].ports.find((p: Doc) => p.name === service.spec.ports[0].targetPort);
    expect(healthPort?.containerPort).toBe(DEFAULT_HEALTH_PORT);
    expect(service.metadata.labels).toMatchObject(monitor.spec.selector.matchLabels);
    expect(monitor.spec.namespaceSelector.matchNames).toEqual([service.metadata.namespace]);
    expect(monitor.spec.endpoints).toEqual([expect.objectContaining({ port: service.spec.ports[0].name, path: "/metrics" })]);
  });

  it("the kind overlay builds on infra/deploy/k8s and only replaces keys that exist", () => {
    const overlay = docsOf(join(KIND, "host", "kustomization.yaml"))[0]!;
    expect(overlay.resources).toEqual(["../../../deploy/k8s"]);
    expect(overlay.images).toEqual([{ name: "dvm-relay", newTag: "e2e" }]);
    const configPatch = (overlay.patches as Doc[]).find((p) => p.target.kind === "ConfigMap")!;
    const ops = parseAllDocuments(configPatch.patch)[0]!.toJS() as Array<{ op: string; path: string; value: string }>;
    const data: Record<string, string> = { ...find("ConfigMap", "dvm-relay").data };
    for (const op of ops) {
      expect(op.op).toBe("replace");
      const key = op.path.replace(/^\/data\//, "");
      expect(Object.keys(data), op.path).toContain(key);
      data[key] = op.value;
    }
    // What the kind relay runs with is valid, and names the function `osls deploy --stage local` makes.
    const config = parseRelayEnv(data);
    expect(config.target).toEqual({ kind: "shared", name: "dvm-serverless-local-phase" });
    expect(config.namespace).toBe("dvm-e2e");
    expect(config.podClusters).toEqual([{ name: "destination", kubeconfigPath: "/etc/dvm/clusters/destination.kubeconfig" }]);
  });

  const kubectl = spawnSync("kubectl", ["version", "--client"], { encoding: "utf8" }).status === 0;
  it.skipIf(
    otherEnvironment(
      "the kind deployment path (kubectl on the PATH)",
      kubectl,
      "kubectl kustomize renders the builds; CI does not install kubectl, infra/dev/kind/e2e.sh runs this path",
    ),
  )(
    "kubectl kustomize renders each build with the objects expected",
    () => {
      const render = (dir: string) => {
        const out = spawnSync("kubectl", ["kustomize", dir], { encoding: "utf8" });
        expect(out.status, out.stderr).toBe(0);
        return parseAllDocuments(out.stdout)
          .map((d) => d.toJS() as Doc)
          .map((d) => `${d.kind}/${d.metadata.name}`)
          .sort();
      };
      const host = render(K8S);
      expect(host).toContain("Deployment/dvm-relay");
      expect(host).toContain("ClusterRole/dvm-transfer");
      expect(render(join(K8S, "remote"))).toEqual(
        [
          "Namespace/dvm-system",
          "ClusterRole/dvm-transfer",
          "ServiceAccount/dvm-transfer",
          "Secret/dvm-transfer-token",
          "ClusterRoleBinding/dvm-transfer",
          "ServiceAccount/dvm-relay-pods",
          "Secret/dvm-relay-pods-token",
          "ClusterRole/dvm-relay-pods",
          "ClusterRoleBinding/dvm-relay-pods",
        ].sort(),
      );
      expect(render(join(KIND, "host"))).toEqual(host);
      // An overlay with the metrics component: the default build plus the Service and the ServiceMonitor.
      const overlay = mkdtempSync(join(ROOT, "infra", "deploy", ".metrics-overlay-"));
      try {
        writeFileSync(
          join(overlay, "kustomization.yaml"),
          "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [../k8s]\ncomponents: [../k8s/metrics]\n",
        );
        expect(render(overlay)).toEqual([...host, "Service/dvm-relay-metrics", "ServiceMonitor/dvm-relay"].sort());
      } finally {
        rmSync(overlay, { recursive: true, force: true });
      }
      // Four renders of kubectl on a shared machine: seconds each.
    },
    60_000,
  );
});

describe("the relay image and the kind run", () => {
  const dockerfile = readFileSync(join(ROOT, "infra", "deploy", "relay", "Dockerfile"), "utf8");
  const instructions = dockerfile
    .split("\n")
    .filter((line) => line.trim() && !line.trim().startsWith("#"))
    .map((line) => line.trim());

  it("is the bundle and the tests' Node 24 alone on a distroless base, as a numeric non-root user the Deployment also uses", () => {
    const from = instructions.filter((i) => i.startsWith("FROM "));
    expect(from).toEqual(["FROM gcr.io/distroless/cc-debian12:nonroot"]);
    expect(instructions.filter((i) => /^(COPY|ADD) /.test(i))).toEqual(["COPY node /nodejs/bin/node", "COPY relay.mjs /app/relay.mjs"]);
    expect(instructions).toContain('ENTRYPOINT ["/nodejs/bin/node"]');
    expect(instructions.filter((i) => i.startsWith("RUN "))).toEqual([]);
    const user = instructions.find((i) => i.startsWith("USER "));
    expect(user).toBe("USER 65532:65532");
    const pod = find("Deployment", "dvm-relay").spec.template.spec;
    expect(`USER ${pod.securityContext.runAsUser}:${pod.securityContext.runAsGroup}`).toBe(user);
    expect(instructions).toContain('CMD ["/app/relay.mjs"]');
  });

  it("is built by npm run build:relay into dist/relay/relay.mjs, which the Dockerfile's context is", () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { scripts: Record<string, string> };
    expect(pkg.scripts["build:relay"]).toBe("node infra/deploy/relay/build.mjs");
    expect(pkg.scripts["e2e:kind"]).toBe("bash infra/dev/kind/e2e.sh");
    expect(readFileSync(join(ROOT, "infra", "deploy", "relay", "build.mjs"), "utf8")).toContain('join(ROOT, "dist", "relay", "relay.mjs")');
    expect(readFileSync(join(KIND, "e2e.sh"), "utf8")).toContain('docker build -q -f infra/deploy/relay/Dockerfile -t "$RELAY_IMAGE" dist/relay');
  });

  it("kind configs: a control plane and two workers each, the names and contexts e2e.sh uses, pod and service ranges apart", () => {
    const script = readFileSync(join(KIND, "e2e.sh"), "utf8");
    const configs = ["source", "destination"].map((side) => {
      const [config, ...more] = docsOf(join(KIND, `cluster-${side}.yaml`));
      expect(more).toEqual([]);
      expect(config).toMatchObject({ kind: "Cluster", apiVersion: "kind.x-k8s.io/v1alpha4", name: `dvm-${side}` });
      // kind's v1alpha4 Node (sigs.k8s.io/kind pkg/apis/config/v1alpha4/types.go): role is "control-plane" or "worker".
      expect(config!.nodes).toEqual([{ role: "control-plane" }, { role: "worker" }, { role: "worker" }]);
      expect(Object.keys(config!).sort()).toEqual(["apiVersion", "kind", "name", "networking", "nodes"]);
      expect(Object.keys(config!.networking).sort()).toEqual(["apiServerAddress", "podSubnet", "serviceSubnet"]);
      expect(script).toContain(`_CLUSTER=dvm-${side}`);
      return config!;
    });
    const ranges = configs.flatMap((c) => [c.networking.podSubnet as string, c.networking.serviceSubnet as string]);
    expect(new Set(ranges.map((r) => r.split(".").slice(0, 2).join("."))).size).toBe(4);
    expect(script).toContain('SOURCE_CONTEXT="kind-$SOURCE_CLUSTER"');
    expect(script).toContain('DVM_SOURCE_CONTEXT="$SOURCE_CONTEXT" DVM_DESTINATION_CONTEXT="$DESTINATION_CONTEXT"');
    expect(script).toContain('node_modules/.bin/osls deploy --stage "$STAGE"');
    expect(script).toMatch(/readonly STAGE=local\n/);
    expect(script).toContain("src apply -k infra/dev/kind/host");
    expect(script).toContain("dst apply -k infra/deploy/k8s/remote");
    expect(dirname(join(KIND, "e2e.sh"))).toBe(KIND);
  });
});
