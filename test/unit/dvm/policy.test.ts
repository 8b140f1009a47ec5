import { describe, expect, it } from "vitest";
import { ConfigurationError } from "../../../src/config/error";
import { DEFAULT_MIGRATION_POLICY, isAdminNamespace, type MigrationPolicy, policyViolations, transferImageFor } from "../../../src/dvm/policy";
import { POLICY_ENV, parsePolicyEnv, policyEnv } from "../../../src/dvm/policyConfig";
import { isPinnedImage } from "../../../src/dvm/policyKinds";
import { DEFAULT_TRANSFER_POLICY } from "../../../src/dvm/transferPolicy";
import { type DvmSpec, parseDvmSpec } from "../../../src/dvm/types";
import { DEFAULT_TRANSFER_IMAGE } from "../../../src/transfer/pods";

const spec = (extra: Record<string, unknown> = {}, pvc: Record<string, unknown> = {}): DvmSpec => {
  const parsed = parseDvmSpec({
    persistentVolumeClaims: [{ name: "db", namespace: "team-a", targetStorageClass: "fast", targetAccessModes: ["ReadWriteOnce"], ...pvc }],
    ...extra,
  });
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.issues));
  return parsed.spec;
};
const policy: MigrationPolicy = { ...DEFAULT_MIGRATION_POLICY, transferImages: ["registry.example.com/rsync@sha256:*", "registry.example.com/rsync:1.2"] };
const fields = (dvmNamespace: string, s: DvmSpec) => policyViolations(dvmNamespace, s, policy).map((v) => v.field);

describe("the migration policy", () => {
  it("lets a DVM reference its own namespace's PVCs and Secrets", () => {
    expect(
      policyViolations(
        "team-a",
        spec({ destinationCluster: { kubeconfigSecretRef: { name: "dst", namespace: "team-a" } } }, { targetNamespace: "team-a" }),
        policy,
      ),
    ).toEqual([]);
  });

  it("refuses another namespace's PVC, target namespace or Secret outside an admin namespace, naming each field and the rule", () => {
    const crossing = spec(
      {
        sourceCluster: { kubeconfigSecretRef: { name: "src", namespace: "kube-system" } },
        destinationCluster: { kubeconfigSecretRef: { name: "dst", namespace: "team-b" } },
      },
      { namespace: "team-b", targetNamespace: "team-c" },
    );
    const violations = policyViolations("team-a", crossing, policy);
    expect(violations.map((v) => v.field)).toEqual([
      "spec.persistentVolumeClaims[0].namespace",
      "spec.persistentVolumeClaims[0].targetNamespace",
      "spec.sourceCluster.kubeconfigSecretRef.namespace",
      "spec.destinationCluster.kubeconfigSecretRef.namespace",
    ]);
    for (const v of violations) expect(v.message).toContain("only DVMs in an admin namespace may reference other namespaces");
  });

  it("refuses runAsRoot outside an admin namespace", () => {
    expect(fields("team-a", spec({ runAsRoot: true }))).toEqual(["spec.runAsRoot"]);
    expect(fields("team-a", spec({ runAsRoot: false }))).toEqual([]);
  });

  it("allows all of it in an admin namespace (dvm-system by default)", () => {
    const crossing = spec(
      { runAsRoot: true, destinationCluster: { kubeconfigSecretRef: { name: "dst", namespace: "team-b" } } },
      { namespace: "team-b", targetNamespace: "team-c" },
    );
    expect(fields("dvm-system", crossing)).toEqual([]);
    expect(isAdminNamespace("dvm-system-2", policy)).toBe(false);
    expect(isAdminNamespace("mig-7", { ...policy, adminNamespaces: ["mig-*"] })).toBe(true);
    expect(isAdminNamespace("dvm-system", { ...policy, adminNamespaces: [] })).toBe(false);
  });

  it("takes the transfer image from the allow-list or the default, in every namespace", () => {
    expect(fields("dvm-system", spec({ transferImage: "evil.example.org/root:latest" }))).toEqual(["spec.transferImage"]);
    expect(fields("team-a", spec({ transferImage: "registry.example.com/rsync:1.2" }))).toEqual([]);
    expect(fields("team-a", spec({ transferImage: `registry.example.com/rsync@sha256:${"a".repeat(64)}` }))).toEqual([]);
    expect(fields("team-a", spec({ transferImage: "registry.example.com/rsync:1.3" }))).toEqual(["spec.transferImage"]);
    expect(fields("team-a", spec({ transferImage: DEFAULT_TRANSFER_IMAGE }))).toEqual([]);
    expect(transferImageFor(spec(), policy)).toBe(DEFAULT_TRANSFER_IMAGE);
    expect(transferImageFor(spec({ transferImage: "registry.example.com/rsync:1.2" }), policy)).toBe("registry.example.com/rsync:1.2");
    expect(transferImageFor(spec({ transferImage: "evil.example.org/x:1" }), policy)).toBe(DEFAULT_TRANSFER_IMAGE);
  });
});

describe("transfer pod annotations", () => {
  const annotated = (annotations: Record<string, string>) => spec({ transferPodAnnotations: annotations });
  const withKeys = (keys: string[]): MigrationPolicy => ({ ...policy, transfer: { ...policy.transfer, podAnnotations: keys } });

  it("refuses every key the operator did not allow, in an admin namespace too, naming each", () => {
    const attacks = annotated({
      "sidecar.istio.io/inject": "true",
      "vault.hashicorp.com/agent-inject": "true",
      "container.apparmor.security.beta.kubernetes.io/rsync": "unconfined",
    });
    for (const namespace of ["team-a", "dvm-system"]) {
      expect(policyViolations(namespace, attacks, policy)).toEqual([
        { field: 'spec.transferPodAnnotations["sidecar.istio.io/inject"]', message: "is not on the operator's allow-list of transfer pod annotations" },
        {
          field: 'spec.transferPodAnnotations["vault.hashicorp.com/agent-inject"]',
          message: "is not on the operator's allow-list of transfer pod annotations",
        },
        {
          field: 'spec.transferPodAnnotations["container.apparmor.security.beta.kubernetes.io/rsync"]',
          message: "is not on the operator's allow-list of transfer pod annotations",
        },
      ]);
    }
    expect(policyViolations("team-a", attacks, withKeys(["sidecar.istio.io/inject", "vault.hashicorp.com/*"])).map((v) => v.field)).toEqual([
      'spec.transferPodAnnotations["container.apparmor.security.beta.kubernetes.io/rsync"]',
    ]);
    expect(policyViolations("team-a", annotated({}), policy)).toEqual([]);
  });

  it("bounds their count and sizes in the parser, naming the key", () => {
    const issues = (annotations: Record<string, string>) => {
      const parsed = parseDvmSpec({
        persistentVolumeClaims: [{ name: "db", namespace: "team-a", targetStorageClass: "fast", targetAccessModes: ["ReadWriteOnce"] }],
        transferPodAnnotations: annotations,
      });
      return parsed.ok ? [] : parsed.issues;
    };
    expect(issues(Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, "v"])))).toEqual([
      { field: "spec.transferPodAnnotations", message: "must have at most 16 annotations" },
    ]);
    expect(issues({ "example.com/pad": "x".repeat(4097) })).toEqual([
      { field: 'spec.transferPodAnnotations["example.com/pad"]', message: "must be at most 4096 characters" },
    ]);
    expect(issues({ "bad key": "x" }).map((i) => i.field)).toEqual(['spec.transferPodAnnotations["bad key"]']);
    expect(issues({ [`${"a".repeat(64)}`]: "x" }).map((i) => i.field)).toHaveLength(1);
    expect(issues({ "example.com/ok": "x".repeat(4096) })).toEqual([]);
  });

  it("reads the allow-list from DVM_TRANSFER_POD_ANNOTATIONS: none by default", () => {
    expect(parsePolicyEnv({}).transfer.podAnnotations).toEqual([]);
    const read = parsePolicyEnv({ [POLICY_ENV.podAnnotations]: "sidecar.istio.io/inject, example.com/*" });
    expect(read.transfer.podAnnotations).toEqual(["sidecar.istio.io/inject", "example.com/*"]);
    expect(parsePolicyEnv(policyEnv(read))).toEqual(read);
    expect(() => parsePolicyEnv({ [POLICY_ENV.podAnnotations]: "not a key" })).toThrow(/DVM_TRANSFER_POD_ANNOTATIONS/);
  });
});

describe("the migration policy's configuration", () => {
  it("defaults to dvm-system, no extra image, and a pinned default image", () => {
    expect(parsePolicyEnv({})).toEqual({
      adminNamespaces: ["dvm-system"],
      transferImages: [],
      defaultTransferImage: DEFAULT_TRANSFER_IMAGE,
      transfer: DEFAULT_TRANSFER_POLICY,
    });
    expect(isPinnedImage(DEFAULT_TRANSFER_IMAGE)).toBe(true);
  });

  it("reads every setting and round-trips through policyEnv", () => {
    const env = {
      [POLICY_ENV.adminNamespaces]: " ops , mig-* ",
      [POLICY_ENV.transferImages]: "localhost/dvm-transfer:*",
      [POLICY_ENV.defaultTransferImage]: "localhost/dvm-transfer:v1",
    };
    const read = parsePolicyEnv(env);
    expect(read).toEqual({
      adminNamespaces: ["ops", "mig-*"],
      transferImages: ["localhost/dvm-transfer:*"],
      defaultTransferImage: "localhost/dvm-transfer:v1",
      transfer: DEFAULT_TRANSFER_POLICY,
    });
    expect(parsePolicyEnv(policyEnv(read))).toEqual(read);
    expect(parsePolicyEnv({ [POLICY_ENV.adminNamespaces]: "" }).adminNamespaces).toEqual([]);
  });

  it("refuses an unpinned default image and a bad namespace, naming the variable", () => {
    for (const image of ["quay.io/konveyor/rsync-transfer:latest", "quay.io/konveyor/rsync-transfer", "localhost:5000/rsync"]) {
      expect(() => parsePolicyEnv({ [POLICY_ENV.defaultTransferImage]: image })).toThrow(/DVM_DEFAULT_TRANSFER_IMAGE: must be pinned/);
    }
    expect(() => parsePolicyEnv({ [POLICY_ENV.adminNamespaces]: "Not_A_Namespace" })).toThrow(ConfigurationError);
    expect(() => parsePolicyEnv({ [POLICY_ENV.adminNamespaces]: "Not_A_Namespace" })).toThrow(/DVM_ADMIN_NAMESPACES/);
  });
});
