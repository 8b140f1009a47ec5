/** The DVM a node-mode bench migrates one PVC with: namespace bench to the destination cluster over a NodePort. */
import { CustomObjectsApi, type KubeConfig } from "@kubernetes/client-node";
import type { ReconcileRequest } from "../src/contracts/request";
import { DVM_API_VERSION, DVM_KIND } from "../src/dvm/types";

/** Where the bench's DVMs live, with the destination's kubeconfig Secret "destination". */
export const BENCH_DVM_NAMESPACE = "dvm-system";
/** Where the bench's PVCs are, on both clusters. */
export const BENCH_PVC_NAMESPACE = "bench";

/** Creates DVM `name` migrating bench/`pvc` to `storageClass`; the request that starts it. */
export async function createBenchDvm(kc: KubeConfig, name: string, pvc: string, storageClass: string): Promise<ReconcileRequest> {
  const dvm = (await kc.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
    group: "migration.openshift.io",
    version: "v1alpha1",
    namespace: BENCH_DVM_NAMESPACE,
    plural: "directvolumemigrations",
    body: {
      apiVersion: DVM_API_VERSION,
      kind: DVM_KIND,
      metadata: { name, namespace: BENCH_DVM_NAMESPACE },
      spec: {
        destinationCluster: { kubeconfigSecretRef: { name: "destination" } },
        persistentVolumeClaims: [{ name: pvc, namespace: BENCH_PVC_NAMESPACE, targetStorageClass: storageClass, targetAccessModes: ["ReadWriteOnce"] }],
        endpointType: "NodePort",
        runAsRoot: true,
      },
    },
  })) as { metadata: { uid: string; generation: number; resourceVersion: string } };
  return {
    uid: dvm.metadata.uid,
    namespace: BENCH_DVM_NAMESPACE,
    name,
    generation: dvm.metadata.generation,
    resourceVersion: dvm.metadata.resourceVersion,
  };
}
