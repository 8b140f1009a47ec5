import { describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { parseStaticKubeConfig } from "../../../src/kube/staticKubeConfig";

const CA = Buffer.from("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n").toString("base64");

function kubeconfig(user: Record<string, unknown>, cluster: Record<string, unknown> = {}) {
  return {
    apiVersion: "v1",
    kind: "Config",
    clusters: [{ name: "dst", cluster: { server: "https://127.0.0.1:6443", "certificate-authority-data": CA, ...cluster } }],
    users: [{ name: "me", user }],
    contexts: [{ name: "dst", context: { cluster: "dst", user: "me", namespace: "default" } }],
    "current-context": "dst",
  };
}

const issuesOf = (doc: unknown) => {
  const result = parseStaticKubeConfig(typeof doc === "string" ? doc : stringify(doc));
  if (result.ok) throw new Error("expected a refusal");
  return result.issues;
};

describe("a user-supplied kubeconfig", () => {
  it("with a token or client certificate data loads, with only the current context's cluster and user", () => {
    for (const user of [{ token: "secret-token" }, { "client-certificate-data": CA, "client-key-data": CA }, { username: "u", password: "p" }]) {
      const result = parseStaticKubeConfig(stringify(kubeconfig(user)));
      expect(result.ok).toBe(true);
      if (!result.ok) return;
      expect(result.kubeConfig.getCurrentCluster()).toMatchObject({ name: "dst", server: "https://127.0.0.1:6443", caData: CA, skipTLSVerify: false });
      expect(result.kubeConfig.getCurrentUser()?.exec).toBeUndefined();
    }
  });

  it("as client-node exports it (JSON, the context's name repeated inside) loads", () => {
    const doc = kubeconfig({ token: "t" });
    const exported = { ...doc, preferences: {}, contexts: [{ name: "dst", context: { name: "dst", cluster: "dst", user: "me" } }] };
    expect(parseStaticKubeConfig(JSON.stringify(exported)).ok).toBe(true);
  });

  it("with an exec plugin is refused, naming the field", () => {
    const issues = issuesOf(kubeconfig({ exec: { apiVersion: "client.authentication.k8s.io/v1", command: "sh", args: ["-c", "touch /tmp/x"] } }));
    expect(issues).toEqual([{ path: "users[0].user.exec", message: expect.stringContaining("credential plugins (exec) are refused") }]);
  });

  it("with an auth-provider is refused, naming the field", () => {
    expect(issuesOf(kubeconfig({ "auth-provider": { name: "oidc", config: { "id-token": "x" } } }))).toEqual([
      { path: "users[0].user.auth-provider", message: expect.stringContaining("auth providers are refused") },
    ]);
  });

  it("naming any file is refused, each field named", () => {
    const issues = issuesOf(
      kubeconfig(
        { tokenFile: "/var/run/secrets/token", "token-file": "/t", "client-certificate": "/etc/c.crt", "client-key": "/etc/c.key" },
        { "certificate-authority": "/etc/ca.crt" },
      ),
    );
    expect(issues.map((i) => i.path).sort()).toEqual([
      "clusters[0].cluster.certificate-authority",
      "users[0].user.client-certificate",
      "users[0].user.client-key",
      "users[0].user.token-file",
      "users[0].user.tokenFile",
    ]);
    for (const issue of issues) expect(issue.message).toContain("file paths are refused");
  });

  it("with a proxy, impersonation or an unknown key is refused", () => {
    expect(
      issuesOf(kubeconfig({ token: "t", as: "system:admin" }, { "proxy-url": "http://proxy:3128" }))
        .map((i) => i.path)
        .sort(),
    ).toEqual(["clusters[0].cluster.proxy-url", "users[0].user.as"]);
    expect(issuesOf(kubeconfig({ token: "t", surprise: 1 }))).toEqual([
      { path: "users[0].user.surprise", message: expect.stringContaining("static credentials only") },
    ]);
  });

  it("with a dangling current context, a non-http server or broken YAML is refused without quoting it", () => {
    expect(issuesOf({ ...kubeconfig({ token: "t" }), "current-context": "other" })).toEqual([{ path: "current-context", message: expect.any(String) }]);
    expect(issuesOf(kubeconfig({ token: "t" }, { server: "file:///etc/passwd" }))[0]?.path).toBe("clusters[0].cluster.server");
    const broken = issuesOf("users: [ {token: hunter2-secret\n  - : :");
    expect(broken).toEqual([{ path: "(document)", message: "is not valid YAML" }]);
    expect(JSON.stringify(issuesOf(kubeconfig({ token: 42 as unknown as string })))).not.toContain("42");
  });
});
