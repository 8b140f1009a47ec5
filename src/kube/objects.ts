import { definedFields } from "../lib/definedFields";

/** The shape of Kubernetes objects as phases handle them: plain JSON with typed metadata. */
export interface ObjectMeta {
  name: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  ownerReferences?: OwnerReference[];
  creationTimestamp?: string;
  deletionTimestamp?: string;
  finalizers?: string[];
}

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: ObjectMeta;
  [field: string]: unknown;
}

/** Identifies one object: enough to read or delete it. */
export interface ObjectRef {
  apiVersion: string;
  kind: string;
  namespace?: string;
  name: string;
}

/** The object kinds the phases touch, as apiVersion + kind pairs. */
export const KINDS = {
  Namespace: { apiVersion: "v1", kind: "Namespace" },
  Pod: { apiVersion: "v1", kind: "Pod" },
  Secret: { apiVersion: "v1", kind: "Secret" },
  ConfigMap: { apiVersion: "v1", kind: "ConfigMap" },
  Service: { apiVersion: "v1", kind: "Service" },
  PersistentVolumeClaim: { apiVersion: "v1", kind: "PersistentVolumeClaim" },
  Node: { apiVersion: "v1", kind: "Node" },
  StorageClass: { apiVersion: "storage.k8s.io/v1", kind: "StorageClass" },
  Deployment: { apiVersion: "apps/v1", kind: "Deployment" },
  StatefulSet: { apiVersion: "apps/v1", kind: "StatefulSet" },
  ReplicaSet: { apiVersion: "apps/v1", kind: "ReplicaSet" },
  CronJob: { apiVersion: "batch/v1", kind: "CronJob" },
  Route: { apiVersion: "route.openshift.io/v1", kind: "Route" },
  DirectVolumeMigration: { apiVersion: "migration.openshift.io/v1alpha1", kind: "DirectVolumeMigration" },
  DirectVolumeMigrationProgress: { apiVersion: "migration.openshift.io/v1alpha1", kind: "DirectVolumeMigrationProgress" },
} as const;

export type KindName = keyof typeof KINDS;

/** The reference of an object in hand (a cluster-scoped one has no namespace). */
export function refOfObject(object: KubeObject): ObjectRef {
  return definedFields({ apiVersion: object.apiVersion, kind: object.kind, namespace: object.metadata.namespace, name: object.metadata.name });
}

export function refOf(kind: KindName, namespace: string | undefined, name: string): ObjectRef {
  return { ...KINDS[kind], ...(namespace ? { namespace } : {}), name };
}

export function labelSelector(labels: Record<string, string>): string {
  return Object.entries(labels)
    .map(([k, v]) => `${k}=${v}`)
    .join(",");
}

/** The few fields of core objects that phases read; everything else passes through untouched. */
export interface PvcObject extends KubeObject {
  spec?: {
    storageClassName?: string;
    accessModes?: string[];
    volumeMode?: string;
    resources?: { requests?: { storage?: string } };
  };
  /** accessModes: what the bound PV grants (may be more than the claim asked for). */
  status?: { phase?: string; accessModes?: string[]; capacity?: { storage?: string } };
}

export interface ContainerStatus {
  name: string;
  state?: {
    running?: { startedAt?: string };
    terminated?: { exitCode: number; reason?: string; message?: string; startedAt?: string; finishedAt?: string };
    waiting?: { reason?: string; message?: string };
  };
}

export interface PodObject extends KubeObject {
  spec?: { nodeName?: string; restartPolicy?: string; [field: string]: unknown };
  status?: {
    phase?: string;
    reason?: string;
    message?: string;
    containerStatuses?: ContainerStatus[];
    conditions?: { type: string; status: string; reason?: string; message?: string }[];
  };
}

export interface ServiceObject extends KubeObject {
  spec?: {
    type?: string;
    clusterIP?: string;
    selector?: Record<string, string>;
    ports?: { name?: string; port: number; targetPort?: number; protocol?: string; nodePort?: number }[];
  };
  status?: { loadBalancer?: { ingress?: { ip?: string; hostname?: string }[] } };
}

export interface NamespaceObject extends KubeObject {
  status?: { phase?: string };
}
