/**
 * How a phase function reaches the source and destination clusters: spec.sourceCluster and
 * spec.destinationCluster name a Secret (in the DVM's namespace unless set) holding a kubeconfig;
 * absent means the host cluster itself. A kubeconfig that is not usable is bad input, named by field; a
 * Secret or key that is missing may be a rotation by delete and re-create, so it is its own error
 * (ClusterCredentialsUnavailableError), which the runner retries for a bounded time before it fails the
 * migration (src/runner/credentialGrace.ts). Which namespaces a DVM may name is the migration policy's question (src/dvm/policy.ts), answered
 * before this runs. The kubeconfig may carry static credentials only (staticKubeConfig.ts).
 */

import { MigrationInputError } from "../contracts/inputError";
import type { ClusterRef, DvmSpec } from "../dvm/types";
import { VersionedClientCache } from "./clientCache";
import type { Cluster, MigrationClusters } from "./cluster";
import { KubeCluster } from "./kubeCluster";
import type { KubeConfig } from "./kubeConfig";
import { KINDS, type KubeObject } from "./objects";
import { parseStaticKubeConfig } from "./staticKubeConfig";

/**
 * A kubeconfig Secret, or its key, is not there (yet). Still a MigrationInputError for callers that
 * cannot wait (a DVM's deletion); the runner retries it within its grace period first.
 */
export class ClusterCredentialsUnavailableError extends MigrationInputError {}

interface SecretObject extends KubeObject {
  data?: Record<string, string>;
}

/** The errors below that a Secret re-created a moment later would clear. */
const MISSING = [/\.kubeconfigSecretRef\.name: Secret \S+ not found$/, /\.kubeconfigSecretRef\.key: Secret \S+ has no key "[^"]*"$/];

/** Bound of the client cache: a warm container serving many DVMs keeps the most recent ones. */
const MAX_CACHED_CLIENTS = 64;

export interface ClusterResolver {
  resolve(dvmNamespace: string, spec: Pick<DvmSpec, "sourceCluster" | "destinationCluster">): Promise<MigrationClusters>;
}

function serverOf(kubeConfig: KubeConfig): string | undefined {
  return kubeConfig.getCurrentCluster()?.server;
}

export class SecretClusterResolver implements ClusterResolver {
  /**
   * Clients are reused across invocations of a warm container (bounded, one version per Secret and key).
   * The Secret itself is still read on every invocation: a rotated or revoked kubeconfig is never used
   * once the API server has the change.
   */
  private readonly cache = new VersionedClientCache<KubeCluster>(MAX_CACHED_CLIENTS);
  readonly host: KubeCluster;
  /**
   * The host cluster under the name of a role (a DVM without a Secret reference), one client per role for
   * the resolver's life: its discovery answers and kept connections carry over to the next invocation.
   */
  private readonly hostAs = new Map<string, KubeCluster>();

  constructor(hostKubeConfig: KubeConfig) {
    this.host = new KubeCluster("host", hostKubeConfig);
  }

  async resolve(dvmNamespace: string, spec: Pick<DvmSpec, "sourceCluster" | "destinationCluster">): Promise<MigrationClusters> {
    // Both Secrets at once; errors in field order either way.
    const sourceErrors: string[] = [];
    const destinationErrors: string[] = [];
    const [source, destination] = await Promise.all([
      this.clusterFor("source", "spec.sourceCluster", dvmNamespace, spec.sourceCluster, sourceErrors),
      this.clusterFor("destination", "spec.destinationCluster", dvmNamespace, spec.destinationCluster, destinationErrors),
    ]);
    const errors = [...sourceErrors, ...destinationErrors];
    if (errors.length > 0 || !source || !destination) {
      const missingOnly = errors.length > 0 && errors.every((e) => MISSING.some((pattern) => pattern.test(e)));
      throw missingOnly ? new ClusterCredentialsUnavailableError(errors) : new MigrationInputError(errors);
    }
    return {
      host: this.host,
      source,
      destination,
      sameCluster: serverOf(source.kubeConfig) === serverOf(destination.kubeConfig),
    };
  }

  private async clusterFor(role: string, field: string, dvmNamespace: string, ref: ClusterRef | undefined, errors: string[]): Promise<KubeCluster | undefined> {
    if (!ref) {
      let cluster = this.hostAs.get(role);
      if (!cluster) this.hostAs.set(role, (cluster = new KubeCluster(role, this.host.kubeConfig)));
      return cluster;
    }
    const { name, key } = ref.kubeconfigSecretRef;
    const namespace = ref.kubeconfigSecretRef.namespace ?? dvmNamespace;
    const secret = await this.host.get<SecretObject>({ ...KINDS.Secret, namespace, name });
    if (!secret) {
      errors.push(`${field}.kubeconfigSecretRef.name: Secret ${namespace}/${name} not found`);
      return undefined;
    }
    const cacheKey = `${role}/${namespace}/${name}/${key}`;
    const resourceVersion = secret.metadata.resourceVersion;
    const cached = this.cache.get(cacheKey, resourceVersion);
    if (cached) return cached;
    const encoded = secret.data?.[key];
    if (!encoded) {
      errors.push(`${field}.kubeconfigSecretRef.key: Secret ${namespace}/${name} has no key "${key}"`);
      return undefined;
    }
    // Checked as data before client-node sees it: no plugin runs and no file is read for a user's kubeconfig.
    const parsed = parseStaticKubeConfig(Buffer.from(encoded, "base64").toString("utf8"));
    if (!parsed.ok) {
      for (const issue of parsed.issues) {
        errors.push(`${field}.kubeconfigSecretRef.key: key "${key}" of Secret ${namespace}/${name}: ${issue.path}: ${issue.message}`);
      }
      return undefined;
    }
    const cluster = new KubeCluster(role, parsed.kubeConfig);
    this.cache.set(cacheKey, resourceVersion, cluster);
    return cluster;
  }
}

/** Stand-in for a cluster that cannot be reached during failure cleanup: nothing was created there. */
export function unreachableCluster(name: string): Cluster {
  return {
    name,
    get: async () => undefined,
    ensure: async () => {
      throw new Error(`${name} cluster is not reachable`);
    },
    list: async () => [],
    delete: async () => "absent",
    patchAnnotations: async () => {
      throw new Error(`${name} cluster is not reachable`);
    },
    patchGuarded: async () => {
      throw new Error(`${name} cluster is not reachable`);
    },
    patchStatus: async () => {},
    podLogs: async () => "",
    serves: async () => false,
  };
}
