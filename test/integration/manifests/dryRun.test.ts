/**
 * Every manifest of infra/deploy/k8s passes a server-side dry run (validation, defaulting, admission) on
 * a real API server — and so does the kind overlay (infra/dev/kind/host) once rendered, when kubectl is
 * here to render it.
 */
import { execFile } from "node:child_process";
import { join, relative } from "node:path";
import { promisify } from "node:util";
import { type KubeConfig, KubernetesObjectApi } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { testClusters } from "../../support/clusters";
import { clone, describeObject, dryRun, ignoreExists, K8S_DIR, KIND_OVERLAY, kubectl, manifests, parseYaml, ROOT, yamlFiles } from "../../support/manifests";
import { otherEnvironment } from "../../support/requirements";

const clusters = testClusters();

/**
 * Kinds whose API another project installs: the optional metrics component's ServiceMonitor needs the
 * Prometheus Operator's CRD, which no cluster here has; test/unit/infra/manifests.test.ts checks that
 * component as kubectl renders it.
 */
const FOREIGN_API_GROUPS = ["monitoring.coreos.com/"];
const foreign = (file: string) => manifests(file).every((doc) => FOREIGN_API_GROUPS.some((group) => doc.apiVersion?.startsWith(group)));

describe("server-side dry runs", () => {
  const hostFiles = yamlFiles(K8S_DIR).filter((f) => !f.includes(`${join("k8s", "remote")}`) && !foreign(f));
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
      // A per-namespace template (the trigger's RoleBinding) names an example namespace: made for the dry run.
      const namespace = doc.metadata?.namespace;
      if (namespace && namespace !== "dvm-system") {
        await ignoreExists(KubernetesObjectApi.makeApiClient(clusters.source).create({ apiVersion: "v1", kind: "Namespace", metadata: { name: namespace } }));
      }
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
