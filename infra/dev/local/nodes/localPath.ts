/**
 * Storage as kind ships it: rancher's local-path-provisioner as the default StorageClass `standard`,
 * WaitForFirstConsumer, every PV a host path on one node with node affinity to it. It runs as a pod
 * (Deployment, ServiceAccount and RBAC as its own deploy/local-path-storage.yaml has them) from the image
 * infra/dev/nodes/images.sh builds; it creates and removes each volume's folder with a helper pod on the
 * volume's node, which runs the transfer image as root (imagePullPolicy Never: nothing is ever pulled).
 *
 * Volumes go under /tmp/local-path-provisioner of their node: the node's private /tmp (infra/dev/local/nodes/node.ts),
 * so two nodes of one machine really have separate disks, and the slot's teardown removes them.
 *
 * The one difference from kind: the control plane here runs without the ServiceAccount admission plugin
 * (no token is mounted into pods), so the provisioner gets its ServiceAccount's token in a kubeconfig
 * Secret (TokenRequest API, bound to the ServiceAccount) and is started with --kubeconfig.
 */
import { AppsV1Api, CoreV1Api, type KubeConfig, RbacAuthorizationV1Api, StorageV1Api } from "@kubernetes/client-node";
import { stringify } from "yaml";
import { waitFor } from "../wait";

export const LOCAL_PATH_NAMESPACE = "local-path-storage";
export const LOCAL_PATH_PROVISIONER = "rancher.io/local-path";
/** Inside each node's private /tmp. */
export const LOCAL_PATH_ROOT = "/tmp/local-path-provisioner";
const NAME = "local-path-provisioner";
const SERVICE_ACCOUNT = "local-path-provisioner-service-account";
const ROLE = "local-path-provisioner-role";
const BINDING = "local-path-provisioner-bind";
const CONFIG_MAP = "local-path-config";
const KUBECONFIG_SECRET = "local-path-kubeconfig";
/** The token's life: longer than any test run or `npm start` session is expected to last. */
const TOKEN_SECONDS = 7 * 24 * 3600;

export interface LocalPathOptions {
  /** The cluster's admin access. */
  kubeConfig: KubeConfig;
  /** The API server as the pods reach it (the fabric bridge's address). */
  server: string;
  /** The provisioner's image (localhost/dvm-local-path:<tag>). */
  image: string;
  /** The helper pods' image: the transfer image (sh, mkdir, rm). */
  helperImage: string;
  /** The name of the default StorageClass it serves. */
  storageClass: string;
}

/**
 * What the scheduler writes on a WaitForFirstConsumer claim when it places the claim's first pod: set at
 * creation, it has the provisioner make the volume on that node at once, with no pod (data seeded from
 * this machine, a volume bound to a node and mounted by nobody).
 */
const SELECTED_NODE_ANNOTATION = "volume.kubernetes.io/selected-node";

export function provisionedOn(nodeName: string): Record<string, string> {
  return { [SELECTED_NODE_ANNOTATION]: nodeName };
}

const ignoreExisting = (error: { code?: number }) => {
  if (error.code !== 409) throw error;
};

/** Installs the provisioner and its StorageClass, and waits until its pod is ready. */
export async function installLocalPath(options: LocalPathOptions): Promise<void> {
  const kc = options.kubeConfig;
  const core = kc.makeApiClient(CoreV1Api);
  const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
  const namespace = LOCAL_PATH_NAMESPACE;
  await core.createNamespace({ body: { metadata: { name: namespace } } }).catch(ignoreExisting);
  await core.createNamespacedServiceAccount({ namespace, body: { metadata: { name: SERVICE_ACCOUNT } } }).catch(ignoreExisting);
  const subjects = [{ kind: "ServiceAccount", name: SERVICE_ACCOUNT, namespace }];
  await rbac
    .createNamespacedRole({
      namespace,
      body: {
        metadata: { name: ROLE },
        rules: [{ apiGroups: [""], resources: ["pods"], verbs: ["get", "list", "watch", "create", "patch", "update", "delete"] }],
      },
    })
    .catch(ignoreExisting);
  await rbac
    .createNamespacedRoleBinding({
      namespace,
      body: { metadata: { name: BINDING }, roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: ROLE }, subjects },
    })
    .catch(ignoreExisting);
  await rbac
    .createClusterRole({
      body: {
        metadata: { name: ROLE },
        rules: [
          { apiGroups: [""], resources: ["nodes", "persistentvolumeclaims", "configmaps", "pods", "pods/log"], verbs: ["get", "list", "watch"] },
          { apiGroups: [""], resources: ["persistentvolumes"], verbs: ["get", "list", "watch", "create", "patch", "update", "delete"] },
          { apiGroups: [""], resources: ["events"], verbs: ["create", "patch"] },
          { apiGroups: ["storage.k8s.io"], resources: ["storageclasses"], verbs: ["get", "list", "watch"] },
        ],
      },
    })
    .catch(ignoreExisting);
  await rbac
    .createClusterRoleBinding({
      body: { metadata: { name: BINDING }, roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: ROLE }, subjects },
    })
    .catch(ignoreExisting);

  const token = await core.createNamespacedServiceAccountToken({
    namespace,
    name: SERVICE_ACCOUNT,
    body: { spec: { audiences: [], expirationSeconds: TOKEN_SECONDS } },
  });
  const caData = kc.getCurrentCluster()?.caData;
  if (!token.status?.token || !caData) throw new Error("local-path: no ServiceAccount token or cluster CA to give the provisioner");
  await core
    .createNamespacedSecret({
      namespace,
      body: { metadata: { name: KUBECONFIG_SECRET }, stringData: { kubeconfig: podKubeconfig(options.server, caData, token.status.token) } },
    })
    .catch(ignoreExisting);
  await core
    .createNamespacedConfigMap({ namespace, body: { metadata: { name: CONFIG_MAP }, data: localPathConfig(options.helperImage) } })
    .catch(ignoreExisting);

  await kc
    .makeApiClient(AppsV1Api)
    .createNamespacedDeployment({ namespace, body: provisionerDeployment(options.image) })
    .catch(ignoreExisting);
  await kc
    .makeApiClient(StorageV1Api)
    .createStorageClass({
      body: {
        metadata: { name: options.storageClass, annotations: { "storageclass.kubernetes.io/is-default-class": "true" } },
        provisioner: LOCAL_PATH_PROVISIONER,
        reclaimPolicy: "Delete",
        volumeBindingMode: "WaitForFirstConsumer",
      },
    })
    .catch(ignoreExisting);

  let pods = "";
  await waitFor(
    "local-path-provisioner ready",
    async () => {
      const listed = await core.listNamespacedPod({ namespace, labelSelector: `app=${NAME}` });
      pods = JSON.stringify(
        listed.items.map((p) => ({ name: p.metadata?.name, node: p.spec?.nodeName, status: p.status?.containerStatuses ?? p.status?.conditions })),
      );
      return listed.items.some((p) => p.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True"));
    },
    120_000,
    () => pods,
    250,
  );
}

function podKubeconfig(server: string, caData: string, token: string): string {
  return stringify({
    apiVersion: "v1",
    kind: "Config",
    clusters: [{ name: "cluster", cluster: { server, "certificate-authority-data": caData } }],
    users: [{ name: SERVICE_ACCOUNT, user: { token } }],
    contexts: [{ name: "provisioner", context: { cluster: "cluster", user: SERVICE_ACCOUNT } }],
    "current-context": "provisioner",
  });
}

/** The ConfigMap of upstream's manifest, with each node's private /tmp and a local helper image. */
function localPathConfig(helperImage: string): Record<string, string> {
  const helperPod = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "helper-pod" },
    spec: {
      priorityClassName: "system-node-critical",
      tolerations: [{ key: "node.kubernetes.io/disk-pressure", operator: "Exists", effect: "NoSchedule" }],
      automountServiceAccountToken: false,
      containers: [
        {
          name: "helper-pod",
          image: helperImage,
          imagePullPolicy: "Never",
          // The transfer image's default user is nobody; the folders are made on the node as root.
          securityContext: { runAsUser: 0, runAsGroup: 0 },
        },
      ],
    },
  };
  return {
    "config.json": JSON.stringify({ nodePathMap: [{ node: "DEFAULT_PATH_FOR_NON_LISTED_NODES", paths: [LOCAL_PATH_ROOT] }] }, null, 2),
    setup: '#!/bin/sh\nset -eu\nmkdir -m 0777 -p "$VOL_DIR"\n',
    teardown: '#!/bin/sh\nset -eu\nrm -rf "$VOL_DIR"\n',
    "helperPod.yaml": stringify(helperPod),
  };
}

function provisionerDeployment(image: string) {
  return {
    metadata: { name: NAME },
    spec: {
      replicas: 1,
      selector: { matchLabels: { app: NAME } },
      template: {
        metadata: { labels: { app: NAME } },
        spec: {
          serviceAccountName: SERVICE_ACCOUNT,
          automountServiceAccountToken: false,
          containers: [
            {
              name: NAME,
              image,
              imagePullPolicy: "Never",
              command: ["local-path-provisioner", "--debug", "start", "--config", "/etc/config/config.json", "--kubeconfig", "/etc/kube/kubeconfig"],
              env: [
                { name: "POD_NAMESPACE", valueFrom: { fieldRef: { fieldPath: "metadata.namespace" } } },
                { name: "CONFIG_MOUNT_PATH", value: "/etc/config/" },
              ],
              resources: { requests: { cpu: "10m", memory: "16Mi" } },
              securityContext: { allowPrivilegeEscalation: false, runAsNonRoot: true },
              volumeMounts: [
                { name: "config-volume", mountPath: "/etc/config/" },
                { name: "kubeconfig", mountPath: "/etc/kube/", readOnly: true },
              ],
            },
          ],
          volumes: [
            { name: "config-volume", configMap: { name: CONFIG_MAP } },
            { name: "kubeconfig", secret: { secretName: KUBECONFIG_SECRET } },
          ],
        },
      },
    },
  };
}
