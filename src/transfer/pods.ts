/**
 * The transfer pods as plain Kubernetes objects: the rsync server pod on the destination (rsync daemon
 * + stunnel server, one per group of a destination namespace's PVCs, src/phases/serverGroups.ts) and one rsync client pod per source PVC and attempt
 * (rsync + stunnel client sidecar). Pure functions: names come from the caller (no generateName), so a
 * repeated phase finds and adopts what an earlier run created.
 *
 * Security: no privilege escalation, read-only root filesystem (writable scratch is an in-memory
 * emptyDir), all capabilities dropped, RuntimeDefault seccomp, no service account token. Only with
 * `runAsRoot` (needed to preserve file ownership) do the rsync containers run as UID 0, and then they
 * get back only what rsync needs (see ROOT_CAPABILITIES); stunnel never gets any capability.
 */

import type {
  V1Affinity,
  V1Container,
  V1PodSecurityContext,
  V1PodSpec,
  V1ResourceRequirements,
  V1SecurityContext,
  V1Toleration,
  V1Volume,
  V1VolumeDevice,
  V1VolumeMount,
} from "@kubernetes/client-node";
import type { PvcRef } from "../contracts/pvcRef";
import { definedFields } from "../lib/definedFields";
import { shellQuote as quote, TransferConfigError } from "./configText";
import { blockDevicePath, configFile, doneFile, moduleMountPath, SECRET_KEY, scratchSecretsFile, type TransferPaths, transferPaths } from "./paths";
import { annotationField, refusedAnnotationKeys } from "./podAnnotations";
import { clientScript, RSYNC_PASSWORD_ENV, type RsyncClientOptions, rsyncClientArgs } from "./rsyncClient";
import { moduleNameFor } from "./rsyncd";
import { type ServedPvc, STUNNEL_CLIENT_DEFAULT_LOCAL_PORT, STUNNEL_DEFAULT_PORT } from "./secrets";
import { stunnelSidecarScript } from "./stunnel";

/**
 * The transfer image when the operator sets none (DVM_DEFAULT_TRANSFER_IMAGE, src/dvm/policyConfig.ts).
 * Pinned to a release: a moving tag would let whoever controls the tag change what runs next to the data.
 */
export const DEFAULT_TRANSFER_IMAGE = "quay.io/konveyor/rsync-transfer:release-1.7.0";

/**
 * What a root rsync needs and nothing more: CHOWN/FOWNER to set owners, modes and times on files it
 * does not own, DAC_OVERRIDE to read and write regardless of modes, SETGID/SETUID for the daemon's
 * `uid = 0`/`gid = 0` switch. The client (a sender) needs only DAC_OVERRIDE, to read every file.
 */
export const ROOT_CAPABILITIES = ["CHOWN", "FOWNER", "DAC_OVERRIDE", "SETGID", "SETUID"] as const;
/** Added to the server's rsync container only when it chroots into modules (see `chroot`). */
export const CHROOT_CAPABILITY = "SYS_CHROOT";

/** Upstream's defaults for transfer pods (400m CPU / 512Mi memory requests); stunnel needs far less. */
export const DEFAULT_RSYNC_RESOURCES: V1ResourceRequirements = { requests: { cpu: "400m", memory: "512Mi" } };
export const DEFAULT_STUNNEL_RESOURCES: V1ResourceRequirements = { requests: { cpu: "100m", memory: "64Mi" } };

/** A pod as the cluster interface takes it: plain JSON, spec typed by @kubernetes/client-node. */
export type TransferPod = {
  apiVersion: "v1";
  kind: "Pod";
  metadata: { name: string; namespace: string; labels: Record<string, string>; annotations?: Record<string, string> };
  spec: V1PodSpec;
};

export type TransferSecret = {
  apiVersion: "v1";
  kind: "Secret";
  type: "Opaque";
  metadata: { name: string; namespace: string; labels: Record<string, string> };
  stringData: Record<string, string>;
};

export interface PodIdentity {
  /** User, group and filesystem group of the pod; unset fields are left to the platform (OpenShift assigns them). */
  runAsUser?: number;
  runAsGroup?: number;
  /**
   * Careful: the kubelet then re-groups every file of the mounted PVCs (fsGroupChangePolicy
   * OnRootMismatch limits that to volumes whose root does not match). Leave unset unless the platform
   * requires it; the pods work without it.
   */
  fsGroup?: number;
  supplementalGroups?: number[];
}

export interface TransferPodOptions {
  name: string;
  namespace: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  /** The operator's allow-list of annotation keys (exact or "prefix*"); a key beyond it is refused. Default: none. */
  allowedAnnotationKeys?: readonly string[];
  /** Default DEFAULT_TRANSFER_IMAGE; the phases pass the one the migration policy chose. */
  image?: string;
  imagePullPolicy?: "Always" | "IfNotPresent" | "Never";
  /** The Secret built by serverTransferSecretData / clientTransferSecretData. */
  configSecretName: string;
  /** Run rsync as UID 0 to preserve ownership (see ROOT_CAPABILITIES). */
  runAsRoot: boolean;
  identity?: PodIdentity;
  rsyncResources?: V1ResourceRequirements;
  stunnelResources?: V1ResourceRequirements;
  nodeName?: string;
  nodeSelector?: Record<string, string>;
  /** E.g. the node of the pod that has the source volume mounted (src/phases/sourcePlacement.ts). */
  affinity?: V1Affinity;
  tolerations?: V1Toleration[];
  /** Must match the `paths` given to the Secret builder. */
  paths?: Partial<TransferPaths>;
}

export interface RsyncServerPodOptions extends TransferPodOptions {
  /**
   * Destination PVCs, all in `namespace`; each is mounted at `<volumeRoot>/<moduleNameFor(pvc)>`, or, when
   * `block`, mapped as the device node `<volumeRoot>/<module>/device` (see BLOCK_DEVICE_FILE).
   */
  pvcs: ServedPvc[];
  /** Must match serverTransferSecretData's `chroot`. Default: `runAsRoot`. Adds SYS_CHROOT. */
  chroot?: boolean;
  /** Default 6443. */
  stunnelPort?: number;
}

export function rsyncServerPod(options: RsyncServerPodOptions): TransferPod {
  const paths = transferPaths(options.paths);
  const chroot = options.chroot ?? options.runAsRoot;
  if (chroot && !options.runAsRoot) throw new TransferConfigError("chroot", "chroot needs runAsRoot");
  if (options.pvcs.length === 0) throw new TransferConfigError("pvcs", "at least one PVC is needed");
  const volumes = options.pvcs.map((pvc, i) => {
    if (pvc.namespace !== options.namespace)
      throw new TransferConfigError(`pvcs[${i}].namespace`, `must be the pod's namespace ${options.namespace}, got ${pvc.namespace}`);
    const module = moduleNameFor(pvc);
    return mappedPvc(`pvc-${i}`, { claimName: pvc.name }, moduleMountPath(paths, module), pvc.block ?? false);
  });
  const image = options.image ?? DEFAULT_TRANSFER_IMAGE;
  const configMount = { name: "transfer-config", mountPath: paths.configDir, readOnly: true };
  const scratchMount = { name: "scratch", mountPath: paths.scratchDir };
  const stunnelPort = options.stunnelPort ?? STUNNEL_DEFAULT_PORT;

  const rsync: V1Container = {
    name: "rsync",
    image,
    ...pullPolicy(options),
    command: ["/bin/sh", "-c", rsyncDaemonScript(paths)],
    securityContext: containerSecurity(options.runAsRoot ? [...ROOT_CAPABILITIES, ...(chroot ? [CHROOT_CAPABILITY] : [])] : undefined),
    resources: options.rsyncResources ?? DEFAULT_RSYNC_RESOURCES,
    volumeMounts: [configMount, scratchMount, ...volumes.flatMap((v) => v.mounts)],
    ...devicesOf(volumes),
    terminationMessagePolicy: "FallbackToLogsOnError",
  };
  const stunnel: V1Container = {
    name: "stunnel",
    image,
    ...pullPolicy(options),
    command: ["stunnel", configFile(paths, SECRET_KEY.stunnelConf)],
    ports: [{ name: "stunnel", containerPort: stunnelPort, protocol: "TCP" }],
    securityContext: containerSecurity(undefined, options.runAsRoot),
    resources: options.stunnelResources ?? DEFAULT_STUNNEL_RESOURCES,
    volumeMounts: [configMount, scratchMount],
    terminationMessagePolicy: "FallbackToLogsOnError",
  };
  return pod(options, {
    containers: [rsync, stunnel],
    volumes: [
      configVolume(options, [SECRET_KEY.rsyncdConf, SECRET_KEY.rsyncdSecrets, SECRET_KEY.stunnelConf, SECRET_KEY.cert, SECRET_KEY.key, SECRET_KEY.ca]),
      scratchVolume(),
      ...volumes.flatMap((v) => v.volumes),
    ],
  });
}

interface MappedPvc {
  volumes: V1Volume[];
  mounts: V1VolumeMount[];
  devices: V1VolumeDevice[];
}

/**
 * A PVC at `folder`: mounted there (Filesystem), or (Block) its device node mapped to `folder/device`,
 * with an in-memory folder under it so the read-only root file system can hold the node.
 */
function mappedPvc(name: string, claim: { claimName: string; readOnly?: boolean }, folder: string, block: boolean): MappedPvc {
  const volume: V1Volume = { name, persistentVolumeClaim: claim };
  if (!block) return { volumes: [volume], mounts: [{ name, mountPath: folder, ...(claim.readOnly ? { readOnly: true } : {}) }], devices: [] };
  const holder = `${name}-folder`;
  return {
    volumes: [volume, { name: holder, emptyDir: { medium: "Memory", sizeLimit: "1Mi" } }],
    mounts: [{ name: holder, mountPath: folder }],
    devices: [{ name, devicePath: blockDevicePath(folder) }],
  };
}

function devicesOf(mapped: readonly MappedPvc[]): Pick<V1Container, "volumeDevices"> {
  const devices = mapped.flatMap((m) => m.devices);
  return devices.length > 0 ? { volumeDevices: devices } : {};
}

/**
 * The server's rsync container: copy the secrets file to scratch (mode 0400, owned by whoever the
 * daemon runs as, which is what rsync's strict modes wants) and exec the daemon in the foreground.
 */
export function rsyncDaemonScript(pathOverrides: Partial<TransferPaths> = {}): string {
  const paths = transferPaths(pathOverrides);
  const from = configFile(paths, SECRET_KEY.rsyncdSecrets);
  const to = scratchSecretsFile(paths);
  return [
    "set -e",
    "umask 077",
    // rm first: the emptyDir outlives a container restart, and the old copy is read-only.
    `rm -f ${quote(to)}`,
    `cat ${quote(from)} > ${quote(to)}`,
    `chmod 0400 ${quote(to)}`,
    `exec rsync --daemon --no-detach ${quote(`--config=${configFile(paths, SECRET_KEY.rsyncdConf)}`)}`,
    "",
  ].join("\n");
}

export interface RsyncClientPodOptions extends TransferPodOptions {
  /** The source PVC (in `namespace`), mounted read-only; `block`: its device node is copied instead. */
  sourcePvc: ServedPvc;
  /** The destination PVC: its module name is derived with moduleNameFor. */
  destinationPvc: PvcRef;
  user: string;
  /** The stunnel sidecar's loopback port (must match clientTransferSecretData's `localPort`). Default 6443. */
  localPort?: number;
  /** How long rsync waits for the sidecar. Default 120 s. */
  waitSeconds?: number;
  /** rsync flags; ownership is preserved exactly when `runAsRoot`. */
  rsync?: Omit<RsyncClientOptions, "sourcePath" | "module" | "user" | "host" | "port" | "preserveOwnership" | "blockDevice">;
}

export function rsyncClientPod(options: RsyncClientPodOptions): TransferPod {
  const paths = transferPaths(options.paths);
  if (options.sourcePvc.namespace !== options.namespace) {
    throw new TransferConfigError("sourcePvc.namespace", `must be the pod's namespace ${options.namespace}, got ${options.sourcePvc.namespace}`);
  }
  const localPort = options.localPort ?? STUNNEL_CLIENT_DEFAULT_LOCAL_PORT;
  const image = options.image ?? DEFAULT_TRANSFER_IMAGE;
  const doneMount = { name: "done", mountPath: paths.doneDir };
  const scratchMount = { name: "scratch", mountPath: paths.scratchDir };
  const block = options.sourcePvc.block ?? false;
  const source = mappedPvc("source", { claimName: options.sourcePvc.name, readOnly: true }, paths.sourceMountPath, block);
  const args = rsyncClientArgs({
    ...options.rsync,
    sourcePath: block ? blockDevicePath(paths.sourceMountPath) : paths.sourceMountPath,
    blockDevice: block,
    module: moduleNameFor(options.destinationPvc),
    user: options.user,
    host: "127.0.0.1",
    port: localPort,
    preserveOwnership: options.runAsRoot,
  });

  const rsync: V1Container = {
    name: "rsync",
    image,
    ...pullPolicy(options),
    command: [
      "/bin/bash",
      "-c",
      clientScript({
        args,
        waitPort: localPort,
        doneFile: doneFile(paths),
        errorFile: `${paths.scratchDir}/rsync.err`,
        ...(options.waitSeconds ? { waitSeconds: options.waitSeconds } : {}),
      }),
    ],
    env: [{ name: RSYNC_PASSWORD_ENV, valueFrom: { secretKeyRef: { name: options.configSecretName, key: SECRET_KEY.rsyncPassword } } }],
    securityContext: containerSecurity(options.runAsRoot ? ["DAC_OVERRIDE"] : undefined),
    resources: options.rsyncResources ?? DEFAULT_RSYNC_RESOURCES,
    volumeMounts: [...source.mounts, doneMount, scratchMount] satisfies V1VolumeMount[],
    ...devicesOf([source]),
    // A failed attempt's last log lines (the rsync error) become its termination message.
    terminationMessagePolicy: "FallbackToLogsOnError",
  };
  const stunnel: V1Container = {
    name: "stunnel",
    image,
    ...pullPolicy(options),
    command: ["/bin/sh", "-c", stunnelSidecarScript({ configPath: configFile(paths, SECRET_KEY.stunnelConf), doneFile: doneFile(paths) })],
    securityContext: containerSecurity(undefined, options.runAsRoot),
    resources: options.stunnelResources ?? DEFAULT_STUNNEL_RESOURCES,
    volumeMounts: [{ name: "transfer-config", mountPath: paths.configDir, readOnly: true }, doneMount, scratchMount],
    terminationMessagePolicy: "FallbackToLogsOnError",
  };
  return pod(options, {
    containers: [rsync, stunnel],
    restartPolicy: "Never",
    volumes: [
      // The password is not projected: rsync gets it from the environment only.
      configVolume(options, [SECRET_KEY.stunnelConf, SECRET_KEY.cert, SECRET_KEY.key, SECRET_KEY.ca]),
      { name: "done", emptyDir: { medium: "Memory", sizeLimit: "1Mi" } },
      scratchVolume(),
      ...source.volumes,
    ],
  });
}

export interface UsagePodOptions extends Omit<TransferPodOptions, "configSecretName" | "paths" | "stunnelResources"> {
  /** The PVC to measure, in the pod's namespace. */
  sourcePvc: PvcRef;
}

/**
 * A short pod that mounts a PVC read-only and writes the apparent size of its files (bytes) as its
 * termination message: what the destination PVC must hold (src/phases/targetSizing.ts). As root (runAsRoot)
 * it reads every directory with DAC_OVERRIDE only; unprivileged, unreadable directories are not counted.
 */
export function usagePod(options: UsagePodOptions): TransferPod {
  if (options.sourcePvc.namespace !== options.namespace) {
    throw new TransferConfigError("sourcePvc.namespace", `must be the pod's namespace ${options.namespace}, got ${options.sourcePvc.namespace}`);
  }
  const mount = "/mnt/source";
  const usage: V1Container = {
    name: "usage",
    image: options.image ?? DEFAULT_TRANSFER_IMAGE,
    ...pullPolicy(options),
    command: [
      "/bin/sh",
      "-c",
      `total=$(du -sx --apparent-size -B1 ${mount} 2>/dev/null | cut -f1); [ -n "$total" ] || exit 1; printf %s "$total" > /dev/termination-log`,
    ],
    securityContext: containerSecurity(options.runAsRoot ? ["DAC_OVERRIDE"] : undefined),
    resources: { requests: { cpu: "50m", memory: "32Mi" } },
    volumeMounts: [{ name: "source", mountPath: mount, readOnly: true }],
  };
  return pod(
    { ...options, configSecretName: "" },
    {
      containers: [usage],
      restartPolicy: "Never",
      volumes: [{ name: "source", persistentVolumeClaim: { claimName: options.sourcePvc.name, readOnly: true } }],
    },
  );
}

/** A transfer Secret object for the payload of serverTransferSecretData / clientTransferSecretData. */
export function transferSecret(options: { name: string; namespace: string; labels?: Record<string, string>; data: Record<string, string> }): TransferSecret {
  return {
    apiVersion: "v1",
    kind: "Secret",
    type: "Opaque",
    metadata: { name: options.name, namespace: options.namespace, labels: { ...options.labels } },
    stringData: { ...options.data },
  };
}

function pod(options: TransferPodOptions, spec: Pick<V1PodSpec, "containers" | "volumes" | "restartPolicy">): TransferPod {
  // The policy refused these before any phase ran; the builder refuses again, so no path skips the check.
  const refused = refusedAnnotationKeys(options.annotations, options.allowedAnnotationKeys ?? []);
  if (refused.length > 0) throw new TransferConfigError(annotationField(refused[0]!), "is not on the operator's allow-list of transfer pod annotations");
  const identity = options.identity ?? {};
  const podSecurity: V1PodSecurityContext = {
    // Root pods: the containers decide (rsync as 0, stunnel as 0 without capabilities).
    ...(options.runAsRoot ? {} : { runAsNonRoot: true }),
    ...(identity.runAsUser !== undefined && !options.runAsRoot ? { runAsUser: identity.runAsUser } : {}),
    ...(identity.runAsGroup !== undefined && !options.runAsRoot ? { runAsGroup: identity.runAsGroup } : {}),
    ...(identity.fsGroup !== undefined ? { fsGroup: identity.fsGroup, fsGroupChangePolicy: "OnRootMismatch" } : {}),
    ...(identity.supplementalGroups ? { supplementalGroups: identity.supplementalGroups } : {}),
    seccompProfile: { type: "RuntimeDefault" },
  };
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name: options.name,
      namespace: options.namespace,
      labels: { ...options.labels },
      ...(options.annotations ? { annotations: { ...options.annotations } } : {}),
    },
    spec: {
      ...spec,
      securityContext: podSecurity,
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      ...definedFields({
        nodeName: options.nodeName || undefined,
        nodeSelector: options.nodeSelector && { ...options.nodeSelector },
        affinity: options.affinity,
        tolerations: options.tolerations,
      }),
    },
  };
}

/**
 * Container security context. `addCapabilities` given: run as UID/GID 0 with exactly those. Otherwise
 * non-root, or (in a root pod, `rootWithoutCapabilities`) UID 0 with no capabilities at all, which is
 * enough for stunnel to read its root-owned key and nothing more.
 */
function containerSecurity(addCapabilities: readonly string[] | undefined, rootWithoutCapabilities = false): V1SecurityContext {
  const root = addCapabilities !== undefined || rootWithoutCapabilities;
  return {
    allowPrivilegeEscalation: false,
    readOnlyRootFilesystem: true,
    privileged: false,
    ...(root ? { runAsUser: 0, runAsGroup: 0, runAsNonRoot: false } : { runAsNonRoot: true }),
    capabilities: { drop: ["ALL"], ...(addCapabilities?.length ? { add: [...addCapabilities] } : {}) },
    seccompProfile: { type: "RuntimeDefault" },
  };
}

function configVolume(options: TransferPodOptions, keys: string[]): V1Volume {
  const groupReadable = options.runAsRoot || options.identity?.fsGroup !== undefined;
  return {
    name: "transfer-config",
    secret: {
      secretName: options.configSecretName,
      items: keys.map((key) => ({ key, path: key })),
      // Owner root, group fsGroup when set: 0440 suffices. A non-root pod without fsGroup can only
      // read world-readable files; the pod's own containers are the only readers of this volume.
      defaultMode: groupReadable ? 0o440 : 0o444,
    },
  };
}

function scratchVolume(): V1Volume {
  // In memory: the copied rsync secrets file never reaches a node's disk.
  return { name: "scratch", emptyDir: { medium: "Memory", sizeLimit: "16Mi" } };
}

function pullPolicy(options: Pick<TransferPodOptions, "imagePullPolicy">): Pick<V1Container, "imagePullPolicy"> {
  return options.imagePullPolicy ? { imagePullPolicy: options.imagePullPolicy } : {};
}
