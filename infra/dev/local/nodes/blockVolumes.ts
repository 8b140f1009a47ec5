/**
 * Block volumes on a node-mode cluster: a loop device over a file made for the purpose, offered as a
 * local PersistentVolume with volumeMode Block. The files live in the slot's state folder, so the
 * slot's teardown (infra/dev/nodes/teardown.sh) detaches every loop device over them, the kubelet's
 * own locks on the mapped devices included, even when the owner died.
 */
import { mkdirSync, rmSync, truncateSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CoreV1Api, type KubeConfig, StorageV1Api } from "@kubernetes/client-node";
import { host, hostQuiet } from "./host";

/** The StorageClass of the loop-device PVs: statically provisioned, bound as soon as a claim fits. */
export const LOOP_STORAGE_CLASS = "loop-block";

export interface LoopVolume {
  /** The loop device, e.g. /dev/loop3. */
  device: string;
  backingFile: string;
  persistentVolume: string;
  /** Deletes the PV and detaches the device; the file goes too. */
  remove(): Promise<void>;
}

export interface LoopVolumeOptions {
  /** The slot's state folder (or a folder inside it). */
  folder: string;
  /** Names the file and the PV. */
  name: string;
  sizeBytes: number;
  /** The node the device is on: the PV's node affinity. */
  nodeName: string;
  /** Content for the device (written before it is attached); default: zeros. */
  content?: Buffer;
}

export async function createLoopVolume(kc: KubeConfig, options: LoopVolumeOptions): Promise<LoopVolume> {
  await ensureLoopStorageClass(kc);
  mkdirSync(options.folder, { recursive: true });
  const backingFile = join(options.folder, `${options.name}.img`);
  writeFileSync(backingFile, options.content ?? Buffer.alloc(0));
  truncateSync(backingFile, options.sizeBytes);
  const device = (await host("losetup", ["--find", "--show", backingFile])).trim();
  const core = kc.makeApiClient(CoreV1Api);
  const remove = async () => {
    await core.deletePersistentVolume({ name: options.name }).catch(() => undefined);
    await hostQuiet("losetup", ["--detach", device]);
    rmSync(backingFile, { force: true });
  };
  try {
    await core.createPersistentVolume({
      body: {
        metadata: { name: options.name, labels: { "dvm.test/loop-device": device.replace(/^\/dev\//, "") } },
        spec: {
          capacity: { storage: String(options.sizeBytes) },
          volumeMode: "Block",
          accessModes: ["ReadWriteOnce"],
          persistentVolumeReclaimPolicy: "Retain",
          storageClassName: LOOP_STORAGE_CLASS,
          local: { path: device },
          nodeAffinity: {
            required: { nodeSelectorTerms: [{ matchExpressions: [{ key: "kubernetes.io/hostname", operator: "In", values: [options.nodeName] }] }] },
          },
        },
      },
    });
  } catch (error) {
    await remove();
    throw error;
  }
  return { device, backingFile, persistentVolume: options.name, remove };
}

/** A claim of `sizeBytes` in volumeMode Block on the loop-device PVs (bound at once when one fits). */
export async function createBlockClaim(kc: KubeConfig, namespace: string, name: string, sizeBytes: number): Promise<void> {
  await kc.makeApiClient(CoreV1Api).createNamespacedPersistentVolumeClaim({
    namespace,
    body: {
      metadata: { name },
      spec: {
        accessModes: ["ReadWriteOnce"],
        volumeMode: "Block",
        storageClassName: LOOP_STORAGE_CLASS,
        resources: { requests: { storage: String(sizeBytes) } },
      },
    },
  });
}

async function ensureLoopStorageClass(kc: KubeConfig): Promise<void> {
  await kc
    .makeApiClient(StorageV1Api)
    .createStorageClass({
      body: { metadata: { name: LOOP_STORAGE_CLASS }, provisioner: "kubernetes.io/no-provisioner", volumeBindingMode: "Immediate", reclaimPolicy: "Retain" },
    })
    .catch((error: { code?: number }) => {
      if (error.code !== 409) throw error;
    });
}
