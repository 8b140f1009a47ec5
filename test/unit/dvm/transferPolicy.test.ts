import { inspect } from "node:util";
import { describe, expect, it } from "vitest";
import { ConfigurationError } from "../../../src/config/error";
import { DEFAULT_MIGRATION_POLICY, policyViolations } from "../../../src/dvm/policy";
import { parsePolicyEnv, policyEnv } from "../../../src/dvm/policyConfig";
import { quantityValue } from "../../../src/dvm/quantity";
import { DEFAULT_TRANSFER_POLICY, extraOptionAllowed, type TransferPolicy, transferSettingsFor, transferViolations } from "../../../src/dvm/transferPolicy";
import { parseDvmSpec } from "../../../src/dvm/types";
import { rsyncOptionsFor } from "../../../src/phases/rsyncOperations";
import { rsyncClientArgs } from "../../../src/transfer/rsyncClient";

const pvcs = [{ name: "db", namespace: "shop", targetStorageClass: "fast", targetAccessModes: ["ReadWriteOnce"] }];
const specWith = (transfer: unknown) => ({ persistentVolumeClaims: pvcs, transfer });
const issues = (transfer: unknown) => {
  const parsed = parseDvmSpec(specWith(transfer));
  return parsed.ok ? [] : parsed.issues.map((i) => i.field);
};
const parsedSpec = (transfer: unknown) => {
  const parsed = parseDvmSpec(specWith(transfer));
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.issues));
  return parsed.spec;
};
const operator: TransferPolicy = { ...DEFAULT_TRANSFER_POLICY, maxBandwidthLimitKiBPerSecond: 50_000, maxResources: { cpu: "2", memory: "1Gi" } };

describe("spec.transfer, parsed", () => {
  it("takes every option", () => {
    const transfer = {
      bandwidthLimitKiBPerSecond: 10_240,
      delete: false,
      partial: true,
      hardLinks: false,
      verify: true,
      extraOptions: ["--inplace", "--timeout=300"],
      maxConcurrentVolumes: 3,
      resources: { requests: { cpu: "250m", memory: "256Mi" }, limits: { cpu: "1", memory: "512Mi" } },
    };
    expect(parsedSpec(transfer).transfer).toEqual(transfer);
  });

  it("refuses bad values, naming each field", () => {
    expect(issues({ bandwidthLimitKiBPerSecond: 0 })).toEqual(["spec.transfer.bandwidthLimitKiBPerSecond"]);
    expect(issues({ bandwidthLimitKiBPerSecond: 1.5 })).toEqual(["spec.transfer.bandwidthLimitKiBPerSecond"]);
    expect(issues({ maxConcurrentVolumes: 0 })).toEqual(["spec.transfer.maxConcurrentVolumes"]);
    expect(issues({ delete: "yes" })).toEqual(["spec.transfer.delete"]);
    expect(issues({ extraOptions: ["--inplace", "-e ssh"] })).toEqual(["spec.transfer.extraOptions[1]"]);
    expect(issues({ resources: { limits: { cpu: "lots" } } })).toEqual(["spec.transfer.resources.limits.cpu"]);
    expect(issues({ resources: { requests: { memory: "2Gi" }, limits: { memory: "1Gi" } } })).toEqual(["spec.transfer.resources.requests.memory"]);
  });

  it("refuses extra options that would smuggle a second argument or a shell word in", () => {
    for (const option of ["--compress --rsh=sh", "--exclude=x\n--rsh=sh", "--exclude=a b", "--exclude=\u00e9", "-e", "--", "--=x", "--Rsh=x", "rsync://x"]) {
      expect({ option, fields: issues({ extraOptions: [option] }) }).toEqual({ option, fields: ["spec.transfer.extraOptions[0]"] });
    }
  });
});

describe("the operator's transfer policy", () => {
  const violations = (transfer: unknown, policy = operator) => transferViolations(parsedSpec(transfer).transfer, policy).map((v) => v.field);

  it("lets a DVM narrow what the operator allows", () => {
    expect(
      violations({
        bandwidthLimitKiBPerSecond: 10_240,
        maxConcurrentVolumes: 50,
        extraOptions: ["--inplace", "--compress-level=3"],
        resources: { requests: { cpu: "500m" }, limits: { cpu: "2", memory: "1Gi" } },
      }),
    ).toEqual([]);
  });

  it("refuses anything beyond it, naming the field", () => {
    expect(violations({ bandwidthLimitKiBPerSecond: 60_000 })).toEqual(["spec.transfer.bandwidthLimitKiBPerSecond"]);
    expect(violations({ maxConcurrentVolumes: 51 })).toEqual(["spec.transfer.maxConcurrentVolumes"]);
    expect(violations({ resources: { limits: { cpu: "2500m", memory: "2Gi" } } })).toEqual([
      "spec.transfer.resources.limits.cpu",
      "spec.transfer.resources.limits.memory",
    ]);
    expect(violations({ extraOptions: ["--inplace", "--delete-excluded"] })).toEqual(["spec.transfer.extraOptions[1]"]);
  });

  it("is checked with the rest of the migration policy", () => {
    const spec = parsedSpec({ extraOptions: ["--rsh=sh -c 'id>/tmp/x'".replace(/ /g, "")] });
    expect(policyViolations("dvm-system", spec, DEFAULT_MIGRATION_POLICY).map((v) => v.field)).toEqual(["spec.transfer.extraOptions[0]"]);
  });

  it("allows an extra option only in its allow-listed form: a flag without a value, a valued option with one", () => {
    const allowed = ["--inplace", "--timeout="];
    expect(extraOptionAllowed("--inplace", allowed)).toBe(true);
    expect(extraOptionAllowed("--timeout=30", allowed)).toBe(true);
    // A valued option without its value would take the next argument (the controller's own) as its value.
    expect(extraOptionAllowed("--timeout", allowed)).toBe(false);
    expect(extraOptionAllowed("--timeout=", allowed)).toBe(false);
    expect(extraOptionAllowed("--inplace=yes", allowed)).toBe(false);
    expect(extraOptionAllowed("--compress", allowed)).toBe(false);
    // Even an operator's list cannot let through what overrides the controller or leaves the tunnel.
    for (const option of ["--bwlimit=0", "--no-bwlimit", "--rsh=sh", "--info=NONE", "--delete-before", "--no-checksum"]) {
      expect(extraOptionAllowed(option, [option.split("=")[0]!, `${option.split("=")[0]}=`])).toBe(false);
    }
  });

  it("gives a DVM the operator's defaults and caps", () => {
    const settings = transferSettingsFor(parsedSpec(undefined), operator);
    expect(settings).toEqual({
      bandwidthLimitKiBPerSecond: 50_000,
      delete: true,
      partial: true,
      hardLinks: true,
      verify: false,
      extraOptions: [],
      maxConcurrentVolumes: 5,
      tcpProxyFor: expect.any(Function),
      maxVolumesPerServerPod: 16,
      allowedPodAnnotationKeys: [],
    });
    // The pods' default requests (400m CPU, 512Mi memory) are lowered to a smaller maximum.
    expect(transferSettingsFor(parsedSpec(undefined), { ...operator, maxResources: { cpu: "200m" } }).resources).toEqual({
      requests: { cpu: "200m", memory: "512Mi" },
    });
    const own = transferSettingsFor(parsedSpec({ bandwidthLimitKiBPerSecond: 100, delete: false, verify: true, maxConcurrentVolumes: 2 }), operator);
    expect(own).toMatchObject({ bandwidthLimitKiBPerSecond: 100, delete: false, verify: true, maxConcurrentVolumes: 2 });
  });

  it("reaches rsync's command line, the PVC's own verify first", () => {
    const settings = transferSettingsFor(parsedSpec({ bandwidthLimitKiBPerSecond: 10_240, hardLinks: false, partial: false, extraOptions: ["--inplace"] }), {
      ...operator,
      delete: false,
      verify: true,
    });
    const args = rsyncClientArgs({
      sourcePath: "/mnt/source",
      module: "m",
      user: "dvm",
      port: 2222,
      preserveOwnership: false,
      ...rsyncOptionsFor(settings, { verify: false }),
    });
    expect(args).toContain("--bwlimit=10240");
    expect(args).toContain("--inplace");
    for (const absent of ["--hard-links", "--partial", "--delete", "--checksum"]) expect(args).not.toContain(absent);
    expect(rsyncClientArgs({ sourcePath: "/s", module: "m", user: "dvm", port: 1, preserveOwnership: false, ...rsyncOptionsFor(settings, {}) })).toContain(
      "--checksum",
    );
  });
});

describe("the operator's transfer settings in the environment", () => {
  it("round-trips through policyEnv", () => {
    const policy = parsePolicyEnv({
      DVM_TRANSFER_DELETE: "false",
      DVM_TRANSFER_VERIFY: "true",
      DVM_TRANSFER_MAX_BANDWIDTH_KIB: "20480",
      DVM_TRANSFER_CONCURRENT_VOLUMES: "2",
      DVM_TRANSFER_MAX_CONCURRENT_VOLUMES: "10",
      DVM_TRANSFER_MAX_VOLUMES_PER_SERVER_POD: "8",
      DVM_RSYNC_EXTRA_OPTIONS: "--inplace,--timeout=",
      DVM_TRANSFER_MAX_CPU: "2",
      DVM_TRANSFER_MAX_MEMORY: "2Gi",
    });
    expect(policy.transfer).toEqual({
      delete: false,
      partial: true,
      hardLinks: true,
      verify: true,
      maxBandwidthLimitKiBPerSecond: 20_480,
      concurrentVolumes: 2,
      maxConcurrentVolumes: 10,
      maxVolumesPerServerPod: 8,
      extraOptions: ["--inplace", "--timeout="],
      maxResources: { cpu: "2", memory: "2Gi" },
      podAnnotations: [],
    });
    expect(parsePolicyEnv(policyEnv(policy))).toEqual(policy);
    expect(parsePolicyEnv({}).transfer).toEqual(DEFAULT_TRANSFER_POLICY);
    expect(parsePolicyEnv({ DVM_RSYNC_EXTRA_OPTIONS: "" }).transfer.extraOptions).toEqual([]);
  });

  it("refuses a bad setting, naming the variable", () => {
    const bad: [Record<string, string>, RegExp][] = [
      [{ DVM_TRANSFER_DELETE: "yes" }, /DVM_TRANSFER_DELETE/],
      [{ DVM_TRANSFER_MAX_BANDWIDTH_KIB: "0" }, /DVM_TRANSFER_MAX_BANDWIDTH_KIB: must be a positive integer/],
      [{ DVM_TRANSFER_CONCURRENT_VOLUMES: "20", DVM_TRANSFER_MAX_CONCURRENT_VOLUMES: "10" }, /DVM_TRANSFER_CONCURRENT_VOLUMES: must not exceed/],
      [{ DVM_TRANSFER_MAX_MEMORY: "a lot" }, /DVM_TRANSFER_MAX_MEMORY/],
      [{ DVM_TRANSFER_MAX_VOLUMES_PER_SERVER_POD: "0" }, /DVM_TRANSFER_MAX_VOLUMES_PER_SERVER_POD: must be a positive integer/],
      [{ DVM_RSYNC_EXTRA_OPTIONS: "--inplace,--rsh=" }, /DVM_RSYNC_EXTRA_OPTIONS\[1\]: --rsh could bypass the tunnel/],
      [{ DVM_RSYNC_EXTRA_OPTIONS: "--bwlimit=" }, /DVM_RSYNC_EXTRA_OPTIONS\[0\]: --bwlimit is set by the controller/],
      [{ DVM_RSYNC_EXTRA_OPTIONS: "-z" }, /DVM_RSYNC_EXTRA_OPTIONS\[0\]: "-z" must be/],
    ];
    for (const [env, message] of bad) expect(() => parsePolicyEnv(env)).toThrow(message);
  });
});

describe("the operator's stunnel proxy (DVM_STUNNEL_TCP_PROXY)", () => {
  const proxyOf = (value: string) => parsePolicyEnv({ DVM_STUNNEL_TCP_PROXY: value }).transfer.tcpProxy;

  it("is unset by default, and blank is unset", () => {
    expect(parsePolicyEnv({}).transfer.tcpProxy).toBeUndefined();
    expect(proxyOf("  ")).toBeUndefined();
  });

  it("reads http://host:port (port 80 when left out, IPv6 in brackets)", () => {
    expect(proxyOf(" http://proxy.corp.example:3128 ")).toEqual({ host: "proxy.corp.example", port: 3128 });
    expect(proxyOf("http://198.18.0.200:3128/")).toEqual({ host: "198.18.0.200", port: 3128 });
    expect(proxyOf("http://proxy.corp.example")).toEqual({ host: "proxy.corp.example", port: 80 });
    expect(proxyOf("http://[fd00::1]:8080")).toEqual({ host: "fd00::1", port: 8080 });
  });

  it("reads percent-encoded credentials and round-trips them through policyEnv", () => {
    const policy = parsePolicyEnv({ DVM_STUNNEL_TCP_PROXY: "http://dvm%40corp:s3cret%3Ax%20y@proxy.corp.example:3128" });
    const proxy = policy.transfer.tcpProxy;
    expect(proxy).toMatchObject({ host: "proxy.corp.example", port: 3128, credentials: { username: "dvm@corp" } });
    expect(proxy?.credentials?.password()).toBe("s3cret:x y");
    const again = parsePolicyEnv(policyEnv(policy)).transfer.tcpProxy;
    expect(again).toEqual(proxy);
    expect(again?.credentials?.password()).toBe("s3cret:x y");
    // What might be logged of the policy (JSON, util.inspect) never has the password.
    expect(JSON.stringify(policy)).not.toContain("s3cret");
    expect(inspect(policy, { depth: 10 })).not.toContain("s3cret");
  });

  it("refuses a bad value with a ConfigurationError naming the variable, never repeating the value", () => {
    const bad: [string, RegExp][] = [
      ["proxy.corp.example:3128", /must be an http:\/\/ URL/],
      ["not a url", /blanks/],
      ["//proxy.corp.example:3128", /must be a URL/],
      ["https://proxy.corp.example:3128", /must be an http:\/\/ URL/],
      ["socks5://proxy.corp.example:1080", /must be an http:\/\/ URL/],
      ["http://proxy.corp.example:3128/path", /no path, query or fragment/],
      ["http://proxy.corp.example:3128?x=1", /no path, query or fragment/],
      ["http://proxy.corp.example:99999", /must be a URL/],
      ["http://s3cret@proxy.corp.example:3128", /both a user name and a password/],
      ["http://dvm:s3cret\n@proxy.corp.example:3128", /line breaks/],
      ["http://dvm:s3cret%0AverifyChain%20%3D%20no@proxy.corp.example:3128", /password: must not contain control characters or line breaks/],
      ["http://dvm%3Ax:s3cret@proxy.corp.example:3128", /':' in the user name/],
      ["http://dvm:%20s3cret@proxy.corp.example:3128", /password: must not start or end with whitespace/],
      ["http://dvm:s3cret%ZZ@proxy.corp.example:3128", /must be a URL|percent-encode/],
    ];
    for (const [value, message] of bad) {
      let error: unknown;
      try {
        parsePolicyEnv({ DVM_STUNNEL_TCP_PROXY: value });
      } catch (e) {
        error = e;
      }
      expect({ value, error }).toMatchObject({ value, error: expect.any(ConfigurationError) });
      expect((error as ConfigurationError).variable).toBe("DVM_STUNNEL_TCP_PROXY");
      expect((error as Error).message).toMatch(/^migration policy: DVM_STUNNEL_TCP_PROXY: /);
      expect((error as Error).message).toMatch(message);
      expect((error as Error).message).not.toContain("s3cret");
    }
  });

  it("reaches the transfer settings of every DVM, and no DVM can set it", () => {
    const operatorPolicy = parsePolicyEnv({ DVM_STUNNEL_TCP_PROXY: "http://proxy.corp.example:3128" }).transfer;
    const viaProxy = { kind: "proxy", proxy: { host: "proxy.corp.example", port: 3128 } };
    expect(transferSettingsFor(parsedSpec({ verify: true }), operatorPolicy).tcpProxyFor("shop")).toEqual(viaProxy);
    expect(transferSettingsFor(parsedSpec(undefined), DEFAULT_TRANSFER_POLICY).tcpProxyFor("shop")).toEqual({ kind: "direct" });
    // The spec has no such field: a DVM's own (pruned by the CRD, dropped by the parser) changes nothing.
    const asked = parsedSpec({ verify: true, tcpProxy: "http://elsewhere:3128" });
    expect(asked.transfer).toEqual({ verify: true });
    expect(transferSettingsFor(asked, operatorPolicy).tcpProxyFor("shop")).toEqual(viaProxy);
    expect(transferSettingsFor(asked, DEFAULT_TRANSFER_POLICY).tcpProxyFor("shop")).toEqual({ kind: "direct" });
  });
});

describe("the operator's proxy credential and tenants (DVM_STUNNEL_TCP_PROXY_TENANT)", () => {
  const CREDENTIALED = "http://dvm:hunter2@proxy.corp.example:3128";
  const adminOnly = (namespace: string) => namespace === "dvm-system";

  it("gives the credentialed proxy to admin namespaces only, and the tenant proxy everywhere else", () => {
    const policy = parsePolicyEnv({ DVM_STUNNEL_TCP_PROXY: CREDENTIALED, DVM_STUNNEL_TCP_PROXY_TENANT: "http://tenants.corp.example:3129" });
    const settings = transferSettingsFor(parsedSpec(undefined), policy.transfer, adminOnly);
    const admin = settings.tcpProxyFor("dvm-system");
    expect(admin).toMatchObject({ kind: "proxy", proxy: { host: "proxy.corp.example", credentials: { username: "dvm" } } });
    expect(settings.tcpProxyFor("shop")).toEqual({ kind: "proxy", proxy: { host: "tenants.corp.example", port: 3129 } });
    // Round-trips through the function's environment like the operator's proxy.
    expect(parsePolicyEnv(policyEnv(policy)).transfer.tenantTcpProxy).toEqual({ host: "tenants.corp.example", port: 3129 });
  });

  it("refuses a tenant namespace when only the credentialed proxy is set, naming what the operator must set", () => {
    const transfer = parsePolicyEnv({ DVM_STUNNEL_TCP_PROXY: CREDENTIALED }).transfer;
    const choice = transferSettingsFor(parsedSpec(undefined), transfer, adminOnly).tcpProxyFor("shop");
    expect(choice).toEqual({ kind: "refused", reason: expect.stringContaining("must set DVM_STUNNEL_TCP_PROXY_TENANT") });
    expect(JSON.stringify(choice)).not.toContain("hunter2");
    // Unset isAdminNamespace: no namespace is an admin one, so the credential goes nowhere.
    expect(transferSettingsFor(parsedSpec(undefined), transfer).tcpProxyFor("dvm-system").kind).toBe("refused");
    // A proxy without a credential holds nothing secret: tenants use it when no tenant proxy is set.
    const open = parsePolicyEnv({ DVM_STUNNEL_TCP_PROXY: "http://proxy.corp.example:3128" }).transfer;
    expect(transferSettingsFor(parsedSpec(undefined), open, adminOnly).tcpProxyFor("shop").kind).toBe("proxy");
  });

  it("refuses such a tenant DVM (and an admin DVM reading from a tenant namespace) before any pod, by policy", () => {
    const policy = { ...DEFAULT_MIGRATION_POLICY, transfer: parsePolicyEnv({ DVM_STUNNEL_TCP_PROXY: CREDENTIALED }).transfer };
    const pvcs = [
      { name: "db", namespace: "shop", targetStorageClass: "fast", targetAccessModes: ["ReadWriteOnce"] },
      { name: "cfg", namespace: "dvm-system", targetNamespace: "shop", targetStorageClass: "fast", targetAccessModes: ["ReadWriteOnce"] },
    ];
    const spec = (migrationType?: string) => {
      const parsed = parseDvmSpec({ persistentVolumeClaims: pvcs, ...(migrationType ? { migrationType } : {}) });
      if (!parsed.ok) throw new Error(JSON.stringify(parsed.issues));
      return parsed.spec;
    };
    const proxyFields = (namespace: string, migrationType?: string) =>
      policyViolations(namespace, spec(migrationType), policy)
        .filter((v) => v.message.includes("DVM_STUNNEL_TCP_PROXY_TENANT"))
        .map((v) => v.field);
    expect(proxyFields("dvm-system")).toEqual(["spec.persistentVolumeClaims[0].namespace"]);
    // A Rollback reads from the target namespace: the client Secret of the second PVC goes to "shop".
    expect(proxyFields("dvm-system", "Rollback")).toEqual(["spec.persistentVolumeClaims[0].namespace", "spec.persistentVolumeClaims[1].targetNamespace"]);
    const tenantPolicy = { ...policy, transfer: { ...policy.transfer, tenantTcpProxy: { host: "tenants.corp.example", port: 3129 } } };
    expect(policyViolations("dvm-system", spec("Rollback"), tenantPolicy)).toEqual([]);
  });
});

describe("quantities", () => {
  it("compares CPU and memory in their own units", () => {
    expect(quantityValue("500m")).toBe(0.5);
    expect(quantityValue("2")).toBe(2);
    expect(quantityValue("512Mi")).toBe(512 * 2 ** 20);
    expect(quantityValue("1G")).toBe(1e9);
    expect(quantityValue("1e3")).toBeUndefined();
    expect(quantityValue("-1")).toBeUndefined();
  });
});
