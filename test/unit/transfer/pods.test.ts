import type { V1Container, V1SecurityContext } from "@kubernetes/client-node";
import { beforeAll, describe, expect, it } from "vitest";
import { generateTransferPki, type TransferPki } from "../../../src/transfer/certificates";
import { moduleCredential } from "../../../src/transfer/credentials";
import { DEFAULT_TRANSFER_IMAGE, rsyncClientPod, rsyncDaemonScript, rsyncServerPod, type TransferPod, transferSecret } from "../../../src/transfer/pods";
import { RSYNC_PASSWORD_ENV } from "../../../src/transfer/rsyncClient";
import { moduleNameFor } from "../../../src/transfer/rsyncd";
import { clientTransferSecretData, serverTransferSecretData } from "../../../src/transfer/secrets";

const data = { namespace: "app", name: "data" };
const logs = { namespace: "app", name: "logs" };
const labels = { "dvm.migration.openshift.io/uid": "u-1", "dvm.migration.openshift.io/transfer": "true" };

let pki: TransferPki;
beforeAll(async () => {
  pki = await generateTransferPki({ commonName: "dvm-t", serverDnsNames: ["rsync-server.dvm.local"] });
});

const container = (pod: TransferPod, name: string): V1Container => {
  const found = pod.spec.containers.find((c) => c.name === name);
  if (!found) throw new Error(`no container ${name}`);
  return found;
};

function expectLockedDown(sc: V1SecurityContext | undefined) {
  expect(sc).toMatchObject({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, privileged: false, seccompProfile: { type: "RuntimeDefault" } });
  expect(sc?.capabilities?.drop).toEqual(["ALL"]);
}

const SECRET = "s".repeat(48);

describe("serverTransferSecretData", () => {
  it("holds the daemon and stunnel configs, the secrets file and only the server's key", () => {
    const secret = serverTransferSecretData({ pvcs: [data, logs], rsyncSecret: "p".repeat(48), pki, runAsRoot: false });
    expect(Object.keys(secret).sort()).toEqual(["ca.crt", "rsyncd.conf", "rsyncd.secrets", "stunnel.conf", "tls.crt", "tls.key"]);
    // One user per module, each with its own password; the migration's secret itself is not there.
    const [dataCredential, logsCredential] = [data, logs].map((pvc) => moduleCredential("p".repeat(48), moduleNameFor(pvc)));
    expect(secret["rsyncd.secrets"]).toBe(`${moduleNameFor(data)}:${dataCredential!.password}\n${moduleNameFor(logs)}:${logsCredential!.password}\n`);
    expect(secret["rsyncd.conf"]).toContain(
      `[${moduleNameFor(data)}]\npath = /mnt/${moduleNameFor(data)}\ncomment = app/data\nauth users = ${moduleNameFor(data)}\n`,
    );
    expect(secret["rsyncd.conf"]).toContain(`[${moduleNameFor(logs)}]`);
    expect(secret["rsyncd.conf"]).toContain("secrets file = /tmp/rsyncd.secrets");
    expect(secret["rsyncd.conf"]).toContain("port = 8873");
    expect(secret["rsyncd.conf"]).toContain("use chroot = no");
    expect(secret["stunnel.conf"]).toContain("accept = 6443\nconnect = 127.0.0.1:8873");
    expect(secret["stunnel.conf"]).toContain("key = /etc/dvm-transfer/tls.key");
    expect(secret["tls.key"]).toBe(pki.serverKeyPem);
    expect(Object.values(secret).join("")).not.toContain(pki.clientKeyPem);
  });

  it("as root chroots into modules unless told otherwise, and honours ports and paths", () => {
    const root = serverTransferSecretData({
      pvcs: [data],
      rsyncSecret: SECRET,
      pki,
      runAsRoot: true,
      stunnelPort: 7443,
      rsyncPort: 2222,
      paths: { configDir: "/cfg", volumeRoot: "/v", scratchDir: "/s" },
    });
    expect(root["rsyncd.conf"]).toContain("uid = 0\ngid = 0\nuse chroot = yes");
    expect(root["rsyncd.conf"]).toContain(`path = /v/${moduleNameFor(data)}`);
    expect(root["rsyncd.conf"]).toContain("secrets file = /s/rsyncd.secrets");
    expect(root["stunnel.conf"]).toContain("accept = 7443\nconnect = 127.0.0.1:2222");
    expect(root["stunnel.conf"]).toContain("cert = /cfg/tls.crt");
    expect(serverTransferSecretData({ pvcs: [data], rsyncSecret: SECRET, pki, runAsRoot: true, chroot: false })["rsyncd.conf"]).toContain("use chroot = no");
    expect(() => serverTransferSecretData({ pvcs: [data], rsyncSecret: SECRET, pki, runAsRoot: false, rsyncPort: 6443 })).toThrow(/rsyncPort/);
  });
});

describe("serverTransferSecretData for Block volumes", () => {
  it("admits --write-devices in a Block PVC's module only, never --copy-devices", () => {
    const payload = serverTransferSecretData({ pvcs: [data, { ...logs, block: true }], rsyncSecret: SECRET, pki, runAsRoot: true });
    const conf = payload["rsyncd.conf"] ?? "";
    const sections = conf.split(/^(?=\[)/m);
    expect(sections.find((s) => s.startsWith(`[${moduleNameFor(logs)}]`))).toContain("refuse options = copy-devices !write-devices");
    expect(sections.find((s) => s.startsWith(`[${moduleNameFor(data)}]`))).not.toContain("refuse options");
  });
});

describe("clientTransferSecretData", () => {
  it("holds the stunnel client config, the client's key and the password", () => {
    const secret = clientTransferSecretData({
      password: "pw",
      pki,
      endpointHost: "dvm-rsync.app.svc",
      endpointPort: 6443,
      checkHost: "rsync-server.dvm.local",
    });
    expect(Object.keys(secret).sort()).toEqual(["ca.crt", "rsync-password", "stunnel.conf", "tls.crt", "tls.key"]);
    expect(secret["stunnel.conf"]).toContain(
      "client = yes\naccept = 127.0.0.1:6443\nconnect = dvm-rsync.app.svc:6443\nverifyChain = yes\ncheckHost = rsync-server.dvm.local",
    );
    expect(secret["tls.key"]).toBe(pki.clientKeyPem);
    expect(Object.values(secret).join("")).not.toContain(pki.serverKeyPem);
    expect(() => clientTransferSecretData({ password: "a\nb", pki, endpointHost: "h", endpointPort: 1 })).toThrow(/password/);
  });
});

describe("rsyncServerPod", () => {
  const options = { name: "dvm-abc-rsync-server", namespace: "app", labels, configSecretName: "dvm-abc-rsync-server", pvcs: [data, logs] };

  it("non-root: daemon + stunnel, each PVC at /mnt/<module>, locked down", () => {
    const pod = rsyncServerPod({ ...options, runAsRoot: false, identity: { runAsUser: 1001, runAsGroup: 1001 } });
    expect(pod.metadata).toEqual({ name: "dvm-abc-rsync-server", namespace: "app", labels });
    expect(pod.spec.securityContext).toEqual({ runAsNonRoot: true, runAsUser: 1001, runAsGroup: 1001, seccompProfile: { type: "RuntimeDefault" } });
    expect(pod.spec.automountServiceAccountToken).toBe(false);
    expect(pod.spec.restartPolicy).toBeUndefined();
    const rsync = container(pod, "rsync");
    expect(rsync.image).toBe(DEFAULT_TRANSFER_IMAGE);
    expect(rsync.command).toEqual(["/bin/sh", "-c", rsyncDaemonScript()]);
    expectLockedDown(rsync.securityContext);
    expect(rsync.securityContext).toMatchObject({ runAsNonRoot: true });
    expect(rsync.securityContext?.capabilities?.add).toBeUndefined();
    expect(rsync.volumeMounts).toEqual([
      { name: "transfer-config", mountPath: "/etc/dvm-transfer", readOnly: true },
      { name: "scratch", mountPath: "/tmp" },
      { name: "pvc-0", mountPath: `/mnt/${moduleNameFor(data)}` },
      { name: "pvc-1", mountPath: `/mnt/${moduleNameFor(logs)}` },
    ]);
    const stunnel = container(pod, "stunnel");
    expect(stunnel.command).toEqual(["stunnel", "/etc/dvm-transfer/stunnel.conf"]);
    expect(stunnel.ports).toEqual([{ name: "stunnel", containerPort: 6443, protocol: "TCP" }]);
    expectLockedDown(stunnel.securityContext);
    expect(pod.spec.volumes).toEqual(
      expect.arrayContaining([
        { name: "pvc-0", persistentVolumeClaim: { claimName: "data" } },
        { name: "scratch", emptyDir: { medium: "Memory", sizeLimit: "16Mi" } },
      ]),
    );
    const config = pod.spec.volumes?.find((v) => v.name === "transfer-config");
    expect(config?.secret?.secretName).toBe("dvm-abc-rsync-server");
    expect(config?.secret?.defaultMode).toBe(0o444);
  });

  it("root: rsync runs as 0 with the five capabilities plus SYS_CHROOT; stunnel gets none", () => {
    const pod = rsyncServerPod({ ...options, runAsRoot: true, image: "img:1", imagePullPolicy: "IfNotPresent", nodeName: "n1" });
    const rsync = container(pod, "rsync");
    expectLockedDown(rsync.securityContext);
    expect(rsync.securityContext).toMatchObject({ runAsUser: 0, runAsGroup: 0, runAsNonRoot: false });
    expect(rsync.securityContext?.capabilities?.add).toEqual(["CHOWN", "FOWNER", "DAC_OVERRIDE", "SETGID", "SETUID", "SYS_CHROOT"]);
    expect(rsync.image).toBe("img:1");
    expect(rsync.imagePullPolicy).toBe("IfNotPresent");
    expect(container(pod, "stunnel").securityContext?.capabilities).toEqual({ drop: ["ALL"] });
    expect(pod.spec.securityContext).toEqual({ seccompProfile: { type: "RuntimeDefault" } });
    expect(pod.spec.nodeName).toBe("n1");
    expect(pod.spec.volumes?.find((v) => v.name === "transfer-config")?.secret?.defaultMode).toBe(0o440);
    expect(container(rsyncServerPod({ ...options, runAsRoot: true, chroot: false }), "rsync").securityContext?.capabilities?.add).toEqual([
      "CHOWN",
      "FOWNER",
      "DAC_OVERRIDE",
      "SETGID",
      "SETUID",
    ]);
  });

  it("maps a Block PVC's device into its module folder, an in-memory folder on the read-only root", () => {
    const pod = rsyncServerPod({ ...options, runAsRoot: true, pvcs: [data, { ...logs, block: true }] });
    const rsync = container(pod, "rsync");
    const module = `/mnt/${moduleNameFor(logs)}`;
    expect(rsync.volumeMounts).toContainEqual({ name: "pvc-0", mountPath: `/mnt/${moduleNameFor(data)}` });
    expect(rsync.volumeMounts).toContainEqual({ name: "pvc-1-folder", mountPath: module });
    expect(rsync.volumeMounts?.some((m) => m.name === "pvc-1")).toBe(false);
    expect(rsync.volumeDevices).toEqual([{ name: "pvc-1", devicePath: `${module}/device` }]);
    expect(pod.spec.volumes).toEqual(
      expect.arrayContaining([
        { name: "pvc-1", persistentVolumeClaim: { claimName: "logs" } },
        { name: "pvc-1-folder", emptyDir: { medium: "Memory", sizeLimit: "1Mi" } },
      ]),
    );
    expect(container(pod, "stunnel").volumeDevices).toBeUndefined();
    expect(container(rsyncServerPod({ ...options, runAsRoot: true }), "rsync").volumeDevices).toBeUndefined();
  });

  it("refuses PVCs of another namespace and chroot without root", () => {
    expect(() => rsyncServerPod({ ...options, runAsRoot: false, pvcs: [{ namespace: "other", name: "x" }] })).toThrow(/pvcs\[0\]\.namespace/);
    expect(() => rsyncServerPod({ ...options, runAsRoot: false, chroot: true })).toThrow(/chroot/);
    expect(() => rsyncServerPod({ ...options, runAsRoot: false, pvcs: [] })).toThrow(/pvcs/);
  });

  it("puts only annotations on the operator's allow-list on the pod, refusing any other by its field", () => {
    const annotations = { "example.com/team": "a", "sidecar.istio.io/inject": "true" };
    expect(() => rsyncServerPod({ ...options, runAsRoot: false, annotations })).toThrow(
      'spec.transferPodAnnotations["example.com/team"]: is not on the operator\'s allow-list of transfer pod annotations',
    );
    expect(() => rsyncServerPod({ ...options, runAsRoot: false, annotations, allowedAnnotationKeys: ["example.com/*"] })).toThrow(
      'spec.transferPodAnnotations["sidecar.istio.io/inject"]',
    );
    const pod = rsyncServerPod({ ...options, runAsRoot: false, annotations, allowedAnnotationKeys: ["example.com/*", "sidecar.istio.io/inject"] });
    expect(pod.metadata.annotations).toEqual(annotations);
  });
});

describe("rsyncDaemonScript", () => {
  it("copies the secrets file to scratch with mode 0400 and execs the daemon", () => {
    expect(rsyncDaemonScript({ configDir: "/c d" })).toBe(
      [
        "set -e",
        "umask 077",
        "rm -f /tmp/rsyncd.secrets",
        "cat '/c d/rsyncd.secrets' > /tmp/rsyncd.secrets",
        "chmod 0400 /tmp/rsyncd.secrets",
        "exec rsync --daemon --no-detach '--config=/c d/rsyncd.conf'",
        "",
      ].join("\n"),
    );
  });
});

describe("rsyncClientPod", () => {
  const options = {
    name: "dvm-abc-rsync-0123456789-1",
    namespace: "app",
    labels,
    configSecretName: "dvm-abc-rsync-client",
    sourcePvc: data,
    destinationPvc: data,
    user: "dvm",
  };

  it("runs rsync against the local sidecar, password from the Secret, source read-only, never restarted", () => {
    const pod = rsyncClientPod({ ...options, runAsRoot: false, rsync: { bwlimitKiB: 1024, verify: true } });
    expect(pod.spec.restartPolicy).toBe("Never");
    const rsync = container(pod, "rsync");
    expect(rsync.command?.[0]).toBe("/bin/bash");
    const script = rsync.command?.[2] ?? "";
    expect(script).toContain(`--bwlimit=1024`);
    expect(script).toContain(`--checksum`);
    expect(script).toContain(`/mnt/source/ rsync://dvm@127.0.0.1:6443/${moduleNameFor(data)}/`);
    expect(script).toContain("done_file=/run/dvm-transfer/rsync-client-done");
    expect(script).not.toContain("--owner");
    expect(rsync.env).toEqual([{ name: RSYNC_PASSWORD_ENV, valueFrom: { secretKeyRef: { name: "dvm-abc-rsync-client", key: "rsync-password" } } }]);
    expect(rsync.terminationMessagePolicy).toBe("FallbackToLogsOnError");
    expect(rsync.volumeMounts).toContainEqual({ name: "source", mountPath: "/mnt/source", readOnly: true });
    expectLockedDown(rsync.securityContext);
    expect(pod.spec.volumes).toContainEqual({ name: "source", persistentVolumeClaim: { claimName: "data", readOnly: true } });
    const config = pod.spec.volumes?.find((v) => v.name === "transfer-config");
    expect(config?.secret?.items?.map((i) => i.key)).toEqual(["stunnel.conf", "tls.crt", "tls.key", "ca.crt"]);
    const stunnel = container(pod, "stunnel");
    expect(stunnel.command?.[2]).toContain("while [ ! -e /run/dvm-transfer/rsync-client-done ]");
    expect(stunnel.volumeMounts).toContainEqual({ name: "done", mountPath: "/run/dvm-transfer" });
    expect(rsync.volumeMounts).toContainEqual({ name: "done", mountPath: "/run/dvm-transfer" });
    expect(JSON.stringify(pod)).not.toMatch(/PRIVATE KEY/);
  });

  it("root: preserves ownership, reads everything with DAC_OVERRIDE only", () => {
    const pod = rsyncClientPod({ ...options, runAsRoot: true, localPort: 7000, waitSeconds: 30, identity: { fsGroup: 5 } });
    const rsync = container(pod, "rsync");
    expect(rsync.securityContext?.capabilities?.add).toEqual(["DAC_OVERRIDE"]);
    expect(rsync.command?.[2]).toContain("--owner --group");
    expect(rsync.command?.[2]).toContain("/dev/tcp/127.0.0.1/7000");
    expect(rsync.command?.[2]).toContain("SECONDS + 30");
    expect(pod.spec.securityContext).toEqual({ fsGroup: 5, fsGroupChangePolicy: "OnRootMismatch", seccompProfile: { type: "RuntimeDefault" } });
    expect(() => rsyncClientPod({ ...options, runAsRoot: false, sourcePvc: { namespace: "x", name: "y" } })).toThrow(/sourcePvc\.namespace/);
  });

  it("Block: maps the source device read-only and copies its content as /mnt/source/device", () => {
    const pod = rsyncClientPod({ ...options, runAsRoot: true, sourcePvc: { ...data, block: true } });
    const rsync = container(pod, "rsync");
    expect(rsync.volumeDevices).toEqual([{ name: "source", devicePath: "/mnt/source/device" }]);
    expect(rsync.volumeMounts).toContainEqual({ name: "source-folder", mountPath: "/mnt/source" });
    expect(pod.spec.volumes).toContainEqual({ name: "source", persistentVolumeClaim: { claimName: "data", readOnly: true } });
    expect(rsync.command?.[2]).toContain(`--copy-devices --write-devices --ignore-times`);
    expect(rsync.command?.[2]).toContain(`/mnt/source/device rsync://dvm@127.0.0.1:6443/${moduleNameFor(data)}/`);
    expect(rsync.command?.[2]).not.toContain("--delete");
  });
});

describe("transferSecret", () => {
  it("wraps a payload as an Opaque Secret", () => {
    expect(transferSecret({ name: "s", namespace: "n", labels, data: { a: "b" } })).toEqual({
      apiVersion: "v1",
      kind: "Secret",
      type: "Opaque",
      metadata: { name: "s", namespace: "n", labels },
      stringData: { a: "b" },
    });
  });
});
