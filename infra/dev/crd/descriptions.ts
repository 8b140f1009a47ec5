/**
 * The DVM CRD's field descriptions (what `kubectl explain` prints), by the path the generator walks
 * (dvmCrd.ts: "." a property, "[]" an array's items, "{}" a map's values). They live here, not in
 * `.describe()` calls on the zod schemas of src/dvm/types.ts, because those schemas ship in every
 * Lambda bundle and the texts are of no use there. The generator fails naming an entry whose path the
 * schema lacks; a text dropped from here fails test/unit/crd/dvmCrd.test.ts, which compares the
 * committed CRD with the generated one.
 */
import { MAX_PVCS_PER_DVM, MAX_QUIESCED_APPLICATIONS } from "../../../src/dvm/limits";
import { DEFAULT_BACKOFF_LIMIT } from "../../../src/dvm/types";
import { TRANSFER_POD_ANNOTATION_BOUNDS } from "../../../src/transfer/podAnnotations";

/** spec.sourceCluster and spec.destinationCluster: the same schema, one side each. */
function clusterRef(side: "source" | "destination"): Record<string, string> {
  const path = `spec.${side}Cluster`;
  return {
    [path]: `How to reach the ${side} cluster. Absent: the host cluster (where this DVM lives). Present: a Secret holding a kubeconfig.`,
    [`${path}.kubeconfigSecretRef.name`]: "Name of the Secret.",
    [`${path}.kubeconfigSecretRef.namespace`]: "Namespace of the Secret; defaults to the DVM's namespace.",
    [`${path}.kubeconfigSecretRef.key`]: "Key in the Secret's data that holds the kubeconfig.",
  };
}

export const FIELD_DESCRIPTIONS: Readonly<Record<string, string>> = {
  ...clusterRef("source"),
  ...clusterRef("destination"),
  "spec.persistentVolumeClaims": `The source PVCs to move, and what to create for each on the destination. At most ${MAX_PVCS_PER_DVM}: every record of a DVM (the object in etcd, its ledger items) is sized for that (docs/security.md).`,
  "spec.persistentVolumeClaims[].name": "Name of the source PVC.",
  "spec.persistentVolumeClaims[].namespace": "Namespace of the source PVC.",
  "spec.persistentVolumeClaims[].targetName": "Name of the destination PVC; defaults to the source name.",
  "spec.persistentVolumeClaims[].targetNamespace": "Namespace of the destination PVC; defaults to the source namespace.",
  "spec.persistentVolumeClaims[].targetStorageClass": "StorageClass of the destination PVC.",
  "spec.persistentVolumeClaims[].targetAccessModes": "Access modes of the destination PVC.",
  "spec.persistentVolumeClaims[].verify": "Adds rsync --checksum.",
  "spec.persistentVolumeClaimSelector": `Instead of persistentVolumeClaims: the PVCs of one namespace whose labels match (at most ${MAX_PVCS_PER_DVM}). Expanded once, by the first phase, into status.selectedPersistentVolumeClaims; a PVC created or relabelled later never joins a running migration. The target fields apply to every selected PVC (the target keeps the source's name). Outside an admin namespace, namespace and targetNamespace must be the DVM's own.`,
  "spec.persistentVolumeClaimSelector.namespace": "Namespace of the source PVCs.",
  "spec.persistentVolumeClaimSelector.labelSelector": "A Kubernetes label selector; absent or empty selects every PVC of the namespace.",
  "spec.persistentVolumeClaimSelector.targetNamespace": "Namespace of the destination PVCs; defaults to the source namespace.",
  "spec.persistentVolumeClaimSelector.targetStorageClass": "StorageClass of every destination PVC.",
  "spec.persistentVolumeClaimSelector.targetAccessModes": "Access modes of every destination PVC.",
  "spec.persistentVolumeClaimSelector.verify": "Adds rsync --checksum.",
  "spec.backOffLimit": `Retry limit for rsync client pods; 0 or absent means the default (${DEFAULT_BACKOFF_LIMIT}).`,
  "spec.deleteProgressReportingCRs": "Also delete the DirectVolumeMigrationProgress objects during cleanup.",
  "spec.endpointType": "How the destination rsync server is exposed to the source cluster.",
  "spec.transferImage": "Image of the rsync/stunnel transfer pods.",
  "spec.runAsRoot":
    "Run rsync as UID 0 (with only the capabilities it needs) so file ownership is preserved. Default false: the transfer pods run unprivileged (files belong to the pod's user).",
  "spec.transferIdentity":
    "The user and groups the unprivileged transfer pods run as. Unset: the platform decides (OpenShift assigns one). On plain Kubernetes with an image whose default user is root, set runAsUser (ideally the application's UID, so its files are readable) or use runAsRoot.",
  "spec.transferPodAnnotations": `Annotations added to the transfer pods (e.g. to keep a service mesh sidecar out of them). Only keys on the operator's allow-list (DVM_TRANSFER_POD_ANNOTATIONS) pass; at most ${TRANSFER_POD_ANNOTATION_BOUNDS.maxCount}.`,
  "spec.transfer":
    "How the data moves: rsync's options, how many PVCs at once, the transfer pods' resources. Only within the operator's transfer policy (docs/security.md); unset fields take its defaults.",
  "spec.transfer.bandwidthLimitKiBPerSecond": "rsync --bwlimit of each client pod, in KiB/s. Unset, the operator's limit if any.",
  "spec.transfer.delete": "rsync --delete (files gone from the source are removed at the destination).",
  "spec.transfer.partial": "rsync --partial (a partly sent file is resumed by the next attempt).",
  "spec.transfer.hardLinks": "rsync --hard-links.",
  "spec.transfer.verify": "rsync --checksum for every PVC whose own verify is unset.",
  "spec.transfer.extraOptions": 'Further rsync long options ("--name" or "--name=value"), each on the operator\'s allow-list.',
  "spec.transfer.maxConcurrentVolumes": "How many PVCs are transferred at once (rsync client pods alive at the same time).",
  "spec.transfer.resources": "Requests and limits of the rsync containers (client and server pods); replace the defaults.",
  "spec.rightSizeTargets":
    "Size each new destination PVC from its source's measured usage plus headroomPercent, instead of the source's capacity; the decision is recorded in status.targetSizes.",
  "spec.quiesce":
    "CutOver: before the final sync, scale to zero the Deployments, StatefulSets and ReplicaSets whose pods mount a source PVC and suspend such CronJobs (each records what it had in an annotation); restored if the migration fails or is cancelled, left quiesced on success. Rollback: restore what the CutOver quiesced once the data is back. Default true for both; refused for a Stage.",
  status:
    "Written by the controller only (the status subresource). Declared: what the printer columns read and the bounded lists; every other field is kept unchecked, and the controller reads it with its own schema.",
  "status.step": 'Position in the itinerary, e.g. "3/18".',
  "status.selectedPersistentVolumeClaims": "What spec.persistentVolumeClaimSelector selected, fixed by the first phase.",
  "status.quiescedApplications": `What spec.quiesce scaled down or suspended, with what each had (at most ${MAX_QUIESCED_APPLICATIONS}).`,
};
