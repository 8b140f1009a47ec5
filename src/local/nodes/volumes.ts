/** Where a bound PVC's files are on a node-mode cluster, seen from this machine. */
import { CoreV1Api, type KubeConfig, type V1PersistentVolume, type V1PersistentVolumeClaim } from "@kubernetes/client-node";
import { waitFor } from "../wait";

/**
 * The folder holding the files of PVC `namespace/name` once it is bound: the volume's host path inside the
 * node's private mount namespace, reached through /proc/<holderPid>/root.
 */
export async function volumeFolder(kc: KubeConfig, holderPid: number, namespace: string, name: string, timeoutMs = 60_000): Promise<string> {
  const core = kc.makeApiClient(CoreV1Api);
  let claim: V1PersistentVolumeClaim | undefined;
  await waitFor(
    `PVC ${namespace}/${name} Bound`,
    async () => {
      claim = await core.readNamespacedPersistentVolumeClaim({ namespace, name });
      return claim.status?.phase === "Bound";
    },
    timeoutMs,
  );
  const volume: V1PersistentVolume = await core.readPersistentVolume({ name: claim!.spec!.volumeName! });
  const path = volume.spec?.hostPath?.path ?? volume.spec?.local?.path;
  if (!path) throw new Error(`PV ${volume.metadata?.name} of ${namespace}/${name} is not a host-path or local volume`);
  return `/proc/${holderPid}/root${path}`;
}
