/**
 * How the resolver reports a kubeconfig reference that does not resolve: a missing Secret or key may be a
 * rotation (delete and re-create) and is ClusterCredentialsUnavailableError, which the runner retries
 * for a bounded time; a kubeconfig that is there but unusable is plain bad input. The host cluster is an
 * in-memory stand-in (the resolver only reads the Secrets through it).
 */

import { KubeConfig } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { MigrationInputError } from "../../../src/contracts/inputError";
import { KINDS } from "../../../src/kube/objects";
import { ClusterCredentialsUnavailableError, SecretClusterResolver } from "../../../src/kube/resolver";
import { FakeCluster } from "../../support/fakeCluster";

const NAMESPACE = "shop";

function resolverWith(...secrets: Array<{ name: string; data: Record<string, string> }>) {
  const hostConfig = new KubeConfig();
  hostConfig.loadFromOptions({
    clusters: [{ name: "host", server: "https://127.0.0.1:1" }],
    users: [{ name: "me", token: "t" }],
    contexts: [{ name: "host", cluster: "host", user: "me" }],
    currentContext: "host",
  });
  const resolver = new SecretClusterResolver(hostConfig);
  const host = new FakeCluster("host").add(...secrets.map((s) => ({ ...KINDS.Secret, metadata: { name: s.name, namespace: NAMESPACE }, data: s.data })));
  // The resolver reads Secrets through its host cluster (and reuses its kubeconfig for unreferenced sides).
  Object.defineProperty(resolver, "host", { value: Object.assign(host, { kubeConfig: hostConfig }) });
  return resolver;
}

const encoded = (doc: unknown) => Buffer.from(stringify(doc)).toString("base64");
const withExec = encoded({
  apiVersion: "v1",
  kind: "Config",
  clusters: [{ name: "dst", cluster: { server: "https://127.0.0.1:6443" } }],
  users: [{ name: "me", user: { exec: { apiVersion: "client.authentication.k8s.io/v1", command: "sh" } } }],
  contexts: [{ name: "dst", context: { cluster: "dst", user: "me" } }],
  "current-context": "dst",
});
const ref = (name: string, key = "kubeconfig") => ({ kubeconfigSecretRef: { name, key } });

async function errorOf(promise: Promise<unknown>): Promise<MigrationInputError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(MigrationInputError);
  return error as MigrationInputError;
}

describe("SecretClusterResolver", () => {
  it("reports a missing Secret, or a missing key, as credentials unavailable (a rotation may be under way)", async () => {
    const missing = await errorOf(resolverWith().resolve(NAMESPACE, { destinationCluster: ref("dst") }));
    expect(missing).toBeInstanceOf(ClusterCredentialsUnavailableError);
    expect(missing.errors).toEqual(["spec.destinationCluster.kubeconfigSecretRef.name: Secret shop/dst not found"]);
    const noKey = await errorOf(resolverWith({ name: "dst", data: { other: "eA==" } }).resolve(NAMESPACE, { destinationCluster: ref("dst") }));
    expect(noKey).toBeInstanceOf(ClusterCredentialsUnavailableError);
    expect(noKey.errors).toEqual(['spec.destinationCluster.kubeconfigSecretRef.key: Secret shop/dst has no key "kubeconfig"']);
  });

  it("reports an unusable kubeconfig as bad input, also when the other reference is only missing", async () => {
    const bad = await errorOf(resolverWith({ name: "dst", data: { kubeconfig: withExec } }).resolve(NAMESPACE, { destinationCluster: ref("dst") }));
    expect(bad).not.toBeInstanceOf(ClusterCredentialsUnavailableError);
    expect(bad.errors[0]).toMatch(/users\[0\]\.user\.exec/);
    const both = await errorOf(
      resolverWith({ name: "dst", data: { kubeconfig: withExec } }).resolve(NAMESPACE, { sourceCluster: ref("src"), destinationCluster: ref("dst") }),
    );
    expect(both).not.toBeInstanceOf(ClusterCredentialsUnavailableError);
    expect(both.errors).toHaveLength(2);
  });
});
