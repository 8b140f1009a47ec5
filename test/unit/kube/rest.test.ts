import { describe, expect, it } from "vitest";
import { KubeApiError } from "../../../src/kube/errors";
import { KubeConfig } from "../../../src/kube/kubeConfig";
import { KubeRest } from "../../../src/kube/rest";

describe("KubeRest", () => {
  it("never passes on what failing credentials said (a plugin's output can hold secrets)", async () => {
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: "c", server: "https://127.0.0.1:1", skipTLSVerify: false }],
      // The host kubeconfig is the operator's and may use a plugin; this one fails loudly.
      users: [{ name: "u", exec: { apiVersion: "client.authentication.k8s.io/v1", command: "sh", args: ["-c", "echo token=SECRET-STDERR >&2; exit 1"] } }],
      contexts: [{ name: "x", cluster: "c", user: "u" }],
      currentContext: "x",
    });
    const error = await new KubeRest(kc).request({ method: "GET", path: "/api" }, "host: read /api").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(KubeApiError);
    expect((error as KubeApiError).message).toBe("host: read /api: the kubeconfig's credentials could not be applied (details not shown)");
    expect(JSON.stringify(error)).not.toContain("SECRET-STDERR");
  });
});
