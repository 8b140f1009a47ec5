import { describe, expect, it } from "vitest";
import { LABEL } from "../../../src/contracts/labels";
import { DEFAULT_MIGRATION_POLICY } from "../../../src/dvm/policy";
import { parsePolicyEnv } from "../../../src/dvm/policyConfig";
import { KINDS } from "../../../src/kube/objects";
import { createRsyncEndpoint } from "../../../src/phases/endpoint";
import { clientPodName, transferNames } from "../../../src/phases/names";
import { createPVProgressCRs } from "../../../src/phases/progressRecords";
import { runRsyncOperations } from "../../../src/phases/rsyncOperations";
import { createRsyncTransferPods, waitForRsyncTransferPodsRunning } from "../../../src/phases/serverPods";
import { clientSecretName, createRsyncConfig, createStunnelConfig } from "../../../src/phases/transferConfig";
import type { PhaseContext } from "../../../src/phases/types";
import { moduleCredential, moduleNameFor } from "../../../src/transfer";
import type { FakeCluster } from "../../support/fakeCluster";
import { fakeContext, TWO_NAMESPACE_SPEC } from "../../support/phaseContext";

function decode(object: unknown, key: string) {
  const secret = object as { data?: Record<string, string>; stringData?: Record<string, string> } | undefined;
  return secret?.stringData?.[key] ?? (secret?.data?.[key] ? Buffer.from(secret.data[key]!, "base64").toString() : undefined);
}

async function configured(spec: unknown = TWO_NAMESPACE_SPEC, policy = DEFAULT_MIGRATION_POLICY) {
  const setup = fakeContext(spec, { sameCluster: false, policy });
  await createRsyncEndpoint(setup.ctx);
  for (const ns of new Set(setup.ctx.volumes.map((v) => v.to.namespace))) {
    setup.destination.mutate(
      { ...KINDS.Service, namespace: ns, name: transferNames(setup.ctx.dvm).endpointService },
      (svc) => ((svc.spec as Record<string, unknown>).clusterIP = "10.0.0.9"),
    );
  }
  return setup;
}

const setPhase = (cluster: FakeCluster, namespace: string, name: string, phase: string, extra: Record<string, unknown> = {}) =>
  cluster.mutate({ ...KINDS.Pod, namespace, name }, (pod) => (pod.status = { phase, ...extra }));

describe("CreateRsyncConfig and CreateStunnelConfig", () => {
  it("creates the password and PKI once on the host and renders them into server and client Secrets", async () => {
    const { ctx, host, source, destination } = await configured();
    await createRsyncConfig(ctx);
    await createStunnelConfig(ctx);
    // A repeated body (crash before the ledger recorded completion) adopts everything.
    await createRsyncConfig(ctx);
    await createStunnelConfig(ctx);
    expect(host.totalCreations("Secret")).toBe(2);
    expect(destination.totalCreations("Secret")).toBe(2);
    expect(source.totalCreations("Secret")).toBe(3);
    const names = transferNames(ctx.dvm);
    const password = decode(await host.get({ ...KINDS.Secret, namespace: ctx.dvm.namespace, name: names.credentialsSecret }), "password")!;
    expect(password.length).toBeGreaterThanOrEqual(32);
    const server = await destination.get({ ...KINDS.Secret, namespace: "shop", name: names.rsyncServerSecret });
    // One credential per module, derived from the host's secret, which itself goes nowhere else.
    const shopModules = ctx.volumes.filter((v) => v.to.namespace === "shop").map((v) => moduleCredential(password, moduleNameFor(v.to)));
    expect(decode(server, "rsyncd.secrets")).toBe(shopModules.map((c) => `${c.user}:${c.password}\n`).join(""));
    expect(decode(server, "stunnel.conf")).toMatch(/sslVersionMin = TLSv1.3/);
    const client = await source.get({ ...KINDS.Secret, namespace: "ops", name: clientSecretName(ctx, ctx.volumes[2]!) });
    expect(decode(client, "stunnel.conf")).toMatch(/connect = 10\.0\.0\.9:6443/);
    expect(decode(client, "stunnel.conf")).toMatch(/checkHost = rsync-server\.dvm\.local/);
    expect(decode(client, "tls.key")).not.toBe(decode(server, "tls.key"));
    expect(client?.metadata.labels?.[LABEL.transfer]).toBe("true");
    expect(decode(client, "stunnel.conf")).not.toContain("protocol");
    // A client Secret holds its own module's password: not the host's secret, not another volume's.
    const own = moduleCredential(password, moduleNameFor(ctx.volumes[2]!.to));
    expect(decode(client, "rsync-password")).toBe(own.password);
    const clientText = JSON.stringify(client);
    expect(clientText).not.toContain(password);
    for (const other of shopModules) expect(clientText).not.toContain(other.password);
  });

  it("points clients in admin namespaces at the operator's proxy, its credential in those client Secrets only", async () => {
    const operator = parsePolicyEnv({ DVM_STUNNEL_TCP_PROXY: "http://dvm:hunter2@proxy.corp.example:3128" });
    const policy = { ...operator, adminNamespaces: ["shop", "ops"] };
    const { ctx, host, source, destination } = await configured(TWO_NAMESPACE_SPEC, policy);
    await createRsyncConfig(ctx);
    await createStunnelConfig(ctx);
    for (const pair of ctx.volumes) {
      const conf = decode(await source.get({ ...KINDS.Secret, namespace: pair.from.namespace, name: clientSecretName(ctx, pair) }), "stunnel.conf");
      expect(conf).toContain(
        "connect = proxy.corp.example:3128\nprotocol = connect\nprotocolHost = 10.0.0.9:6443\nprotocolAuthentication = basic\nprotocolUsername = dvm\nprotocolPassword = hunter2\n",
      );
      expect(conf).toContain("checkHost = rsync-server.dvm.local");
    }
    const server = await destination.get({ ...KINDS.Secret, namespace: "shop", name: transferNames(ctx.dvm).rsyncServerSecret });
    expect(JSON.stringify(server)).not.toContain("hunter2");
    expect(JSON.stringify(await host.list(KINDS.Secret, ctx.dvm.namespace, {}))).not.toContain("hunter2");
    expect(JSON.stringify(ctx)).not.toContain("hunter2");
  });

  it("never writes the operator's proxy credential into a tenant namespace: the tenant proxy goes there", async () => {
    const operator = parsePolicyEnv({ DVM_STUNNEL_TCP_PROXY: "http://dvm:hunter2@proxy.corp.example:3128" });
    // "shop" and "ops" are tenant namespaces (the default admin namespace is dvm-system).
    const refused = await configured(TWO_NAMESPACE_SPEC, operator);
    await createRsyncConfig(refused.ctx);
    await expect(createStunnelConfig(refused.ctx)).rejects.toThrow(/spec\.persistentVolumeClaims\[0\]\.namespace: .*must set DVM_STUNNEL_TCP_PROXY_TENANT/);
    expect(JSON.stringify(await refused.source.list(KINDS.Secret, "shop", {}))).not.toContain("hunter2");

    const withTenantProxy = parsePolicyEnv({
      DVM_STUNNEL_TCP_PROXY: "http://dvm:hunter2@proxy.corp.example:3128",
      DVM_STUNNEL_TCP_PROXY_TENANT: "http://tenant:visible@tenants.corp.example:3129",
    });
    const { ctx, source } = await configured(TWO_NAMESPACE_SPEC, withTenantProxy);
    await createRsyncConfig(ctx);
    await createStunnelConfig(ctx);
    for (const pair of ctx.volumes) {
      const conf = decode(await source.get({ ...KINDS.Secret, namespace: pair.from.namespace, name: clientSecretName(ctx, pair) }), "stunnel.conf");
      expect(conf).toContain("connect = tenants.corp.example:3129\n");
      expect(conf).toContain("protocolUsername = tenant\nprotocolPassword = visible\n");
      expect(conf).not.toContain("hunter2");
    }
  });
});

describe("rsync server pods", () => {
  it("creates one per destination namespace, mounting that namespace's PVCs, and waits until they run", async () => {
    const { ctx, destination } = await configured();
    await createRsyncTransferPods(ctx);
    await createRsyncTransferPods(ctx);
    expect(destination.totalCreations("Pod")).toBe(2);
    const name = transferNames(ctx.dvm).serverPod;
    const shop = await destination.get<
      { spec: { volumes: { persistentVolumeClaim?: { claimName: string } }[] } } & import("../../../src/kube/objects").KubeObject
    >({ ...KINDS.Pod, namespace: "shop", name });
    expect(shop!.spec.volumes.flatMap((v) => (v.persistentVolumeClaim ? [v.persistentVolumeClaim.claimName] : [])).sort()).toEqual(["db", "media-new"]);
    expect((await waitForRsyncTransferPodsRunning(ctx)).kind).toBe("wait");
    setPhase(destination, "shop", name, "Running");
    setPhase(destination, "ops-new", name, "Running");
    expect(await waitForRsyncTransferPodsRunning(ctx)).toEqual({ kind: "advance" });
  });
});

describe("RunRsyncOperations", () => {
  /** Up to RunRsyncOperations: progress records, and the server pods created and Running. */
  async function operations(spec: unknown) {
    const setup = await configured(spec);
    await createPVProgressCRs(setup.ctx);
    await createRsyncTransferPods(setup.ctx);
    for (const pair of setup.ctx.volumes) setPhase(setup.destination, pair.to.namespace, transferNames(setup.ctx.dvm).serverPod, "Running");
    return setup;
  }
  const podOf = (ctx: PhaseContext, index: number, attempt: number) => clientPodName(ctx.dvm, ctx.volumes[index]!, attempt);

  it("creates attempt 1 per volume, then advances when all succeeded, with a result per volume", async () => {
    const { ctx, source, host } = await operations(TWO_NAMESPACE_SPEC);
    expect((await runRsyncOperations(ctx)).kind).toBe("wait");
    expect((await runRsyncOperations(ctx)).kind).toBe("wait");
    expect(source.totalCreations("Pod")).toBe(3);
    source.logs.set(`shop/${podOf(ctx, 0, 1)}`, "     1,024,000  42%   10.00MB/s    0:00:01 (xfr#1, to-chk=3/5)");
    setPhase(source, "shop", podOf(ctx, 0, 1), "Running");
    const running = await runRsyncOperations(ctx);
    expect(running).toMatchObject({
      kind: "wait",
      status: { runningPods: [{ name: podOf(ctx, 0, 1), lastObservedProgressPercent: "42%", lastObservedTransferRate: "10.00MB/s" }] },
    });
    const record = (await host.list(KINDS.DirectVolumeMigrationProgress, ctx.dvm.namespace, {})).find((r) => (r.spec as { pvcName: string }).pvcName === "db");
    expect(record?.status).toMatchObject({ podName: podOf(ctx, 0, 1), lastObservedProgressPercent: "42%" });
    for (const [i, ns] of [
      [0, "shop"],
      [1, "shop"],
      [2, "ops"],
    ] as const)
      setPhase(source, ns, podOf(ctx, i, 1), "Succeeded");
    const done = await runRsyncOperations(ctx);
    expect(done.kind).toBe("advance");
    expect(done.kind === "advance" && done.status?.rsyncOperations).toEqual([
      // No statistics in these logs: the figures are what the progress lines said, at 100%.
      { pvcReference: { namespace: "shop", name: "db" }, currentAttempt: 1, succeeded: true, bytesTransferred: 1_024_000, percent: 100, secondsLeft: 0 },
      { pvcReference: { namespace: "shop", name: "media" }, currentAttempt: 1, succeeded: true, percent: 100, secondsLeft: 0 },
      { pvcReference: { namespace: "ops", name: "logs" }, currentAttempt: 1, succeeded: true, percent: 100, secondsLeft: 0 },
    ]);
    expect(source.totalCreations("Pod")).toBe(3);
  });

  it("retries a failed attempt with the next deterministic pod, up to backOffLimit, then fails naming the volume", async () => {
    const spec = { persistentVolumeClaims: [TWO_NAMESPACE_SPEC.persistentVolumeClaims[0]], backOffLimit: 2 };
    const { ctx, source } = await operations(spec);
    await runRsyncOperations(ctx);
    setPhase(source, "shop", podOf(ctx, 0, 1), "Failed", {
      containerStatuses: [{ name: "rsync", state: { terminated: { exitCode: 10, message: "rsync error: error in socket IO (code 10)" } } }],
    });
    expect(await runRsyncOperations(ctx)).toMatchObject({ kind: "wait", status: { rsyncOperations: [{ currentAttempt: 2 }] } });
    // A repeated poll adopts attempt 2 instead of creating another.
    await runRsyncOperations(ctx);
    expect(source.totalCreations("Pod")).toBe(2);
    expect(await source.get({ ...KINDS.Pod, namespace: "shop", name: podOf(ctx, 0, 1) })).toBeUndefined();
    setPhase(source, "shop", podOf(ctx, 0, 2), "Failed", {
      containerStatuses: [{ name: "rsync", state: { terminated: { exitCode: 10, message: "rsync error: error in socket IO (code 10)" } } }],
    });
    const failed = await runRsyncOperations(ctx);
    expect(failed).toMatchObject({
      kind: "fail",
      errors: ["spec.persistentVolumeClaims[0]: rsync of shop/db to shop/db failed after 2 attempts: exit code 10: rsync error: error in socket IO (code 10)"],
    });
    expect(failed.kind === "fail" && failed.status?.failedPods?.[0]?.name).toBe(podOf(ctx, 0, 2));
  });

  it("brings a lost rsync server pod back before the next attempt, instead of burning attempts against it", async () => {
    const spec = { persistentVolumeClaims: [TWO_NAMESPACE_SPEC.persistentVolumeClaims[0]], backOffLimit: 3 };
    const { ctx, source, destination } = await operations(spec);
    await runRsyncOperations(ctx);
    const server = { ...KINDS.Pod, namespace: "shop", name: transferNames(ctx.dvm).serverPod };
    await destination.delete(server);
    setPhase(source, "shop", podOf(ctx, 0, 1), "Failed", {
      containerStatuses: [{ name: "rsync", state: { terminated: { exitCode: 12, message: "rsync error: error in rsync protocol data stream (code 12)" } } }],
    });
    // The server is created again; the next attempt waits until it runs.
    expect(await runRsyncOperations(ctx)).toMatchObject({ kind: "wait", status: { rsyncOperations: [{ currentAttempt: 1 }] } });
    expect(await destination.get(server)).toBeDefined();
    expect(source.totalCreations("Pod")).toBe(1);
    setPhase(destination, "shop", server.name, "Running");
    expect(await runRsyncOperations(ctx)).toMatchObject({ kind: "wait", status: { rsyncOperations: [{ currentAttempt: 2 }] } });
    expect(source.totalCreations("Pod")).toBe(2);
  });

  it("counts rsync exit code 24 (files vanished) as success, with a Warn condition naming the PVC and the count", async () => {
    const { ctx, source } = await operations(TWO_NAMESPACE_SPEC);
    await runRsyncOperations(ctx);
    const vanished = [
      'file has vanished: "/mnt/source/tmp/a.lock"',
      'file has vanished: "/mnt/source/tmp/b.lock"',
      'file has vanished: "/mnt/source/tmp/c.lock"',
      "rsync warning: some files vanished before they could be transferred (code 24) at main.c(1338) [sender=3.2.7]",
    ].join("\n");
    // The log has all three; the termination message (the log's end) only the last one and the summary.
    source.logs.set(`shop/${podOf(ctx, 0, 1)}`, vanished);
    setPhase(source, "shop", podOf(ctx, 0, 1), "Failed", {
      containerStatuses: [{ name: "rsync", state: { terminated: { exitCode: 24, message: vanished.split("\n").slice(-2).join("\n") } } }],
    });
    // Logs unreadable (kwok): the termination message is all there is.
    setPhase(source, "ops", podOf(ctx, 2, 1), "Failed", {
      containerStatuses: [{ name: "rsync", state: { terminated: { exitCode: 24, message: vanished.split("\n").slice(-2).join("\n") } } }],
    });
    setPhase(source, "shop", podOf(ctx, 1, 1), "Succeeded");
    const done = await runRsyncOperations(ctx);
    expect(done).toMatchObject({ kind: "advance", warnings: [{ type: "RsyncFilesVanished", category: "Warn", status: "True", durable: true }] });
    expect(done.kind === "advance" && done.status?.rsyncOperations?.every((op) => op.succeeded && op.currentAttempt === 1)).toBe(true);
    const message = done.kind === "advance" ? done.warnings?.[0]?.message : undefined;
    expect(message).toContain("shop/db: 3 files vanished during the transfer");
    expect(message).toContain("ops/logs: 1 file vanished during the transfer");
    expect(message).not.toContain("shop/media");
    // No retry: exit 24 is not a failed attempt.
    expect(source.totalCreations("Pod")).toBe(3);
  });

  it("builds client pods that connect through the volume's own client Secret, unprivileged by default", async () => {
    const { ctx, source } = await operations(TWO_NAMESPACE_SPEC);
    await runRsyncOperations(ctx);
    const pod = await source.get<
      import("../../../src/kube/objects").KubeObject & {
        spec: { securityContext: Record<string, unknown>; restartPolicy: string; volumes: { name: string; secret?: { secretName: string } }[] };
      }
    >({ ...KINDS.Pod, namespace: "ops", name: podOf(ctx, 2, 1) });
    expect(pod!.spec.restartPolicy).toBe("Never");
    expect(pod!.spec.securityContext.runAsNonRoot).toBe(true);
    expect(pod!.spec.volumes.find((v) => v.secret)?.secret?.secretName).toBe(clientSecretName(ctx, ctx.volumes[2]!));
    expect(pod!.metadata.labels).toMatchObject({ [LABEL.attempt]: "1", [LABEL.volume]: ctx.volumes[2]!.id, [LABEL.transfer]: "true" });
    // As the module's own user, the one its daemon section admits.
    const module = moduleNameFor(ctx.volumes[2]!.to);
    expect(JSON.stringify(pod!.spec)).toContain(`rsync://${module}@`);
  });

  it("runs the transfer pods as spec.transferIdentity says", async () => {
    const { ctx, source, destination } = await operations({ ...TWO_NAMESPACE_SPEC, transferIdentity: { runAsUser: 1234, runAsGroup: 5678 } });
    await runRsyncOperations(ctx);
    await createRsyncTransferPods(ctx);
    const client = await source.get<import("../../../src/kube/objects").KubeObject & { spec: { securityContext: Record<string, unknown> } }>({
      ...KINDS.Pod,
      namespace: "ops",
      name: podOf(ctx, 2, 1),
    });
    const server = await destination.get<import("../../../src/kube/objects").KubeObject & { spec: { securityContext: Record<string, unknown> } }>({
      ...KINDS.Pod,
      namespace: "shop",
      name: transferNames(ctx.dvm).serverPod,
    });
    for (const pod of [client, server]) expect(pod!.spec.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 1234, runAsGroup: 5678 });
  });
});
