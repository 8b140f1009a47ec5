/**
 * The coordination.k8s.io/v1 Lease that relay replicas elect their leader on, as the election reads and
 * writes it. Every write is conditioned on what was read (create fails if it exists, update carries the
 * resourceVersion), so two candidates can never both believe their write won.
 */
import { CoordinationV1Api, type KubeConfig, type V1Lease, V1MicroTime } from "@kubernetes/client-node";
import { toKubeApiError } from "../kube/errors";
import { definedFields } from "../lib/definedFields";

/** What the election keeps in the Lease's spec. */
export interface LeaderLeaseRecord {
  /** Who leads; "" when the last leader released it on a clean stop. */
  holderIdentity: string;
  /** How long after the last renewal (as a candidate observes it) the lease counts as held. */
  leaseDurationSeconds: number;
  acquireTime?: Date;
  renewTime?: Date;
  /** How many times the holder changed. */
  leaseTransitions: number;
}

export interface StoredLeaderLease {
  record: LeaderLeaseRecord;
  resourceVersion: string;
}

/** Reads and conditional writes of one Lease. Failures reject with a KubeApiError (src/kube/errors.ts). */
export interface LeaderLeaseStore {
  /** Where the Lease is, "namespace/name", for logs and stats. */
  readonly where: string;
  /** The Lease, or undefined when it does not exist. */
  get(): Promise<StoredLeaderLease | undefined>;
  /** Creates it; rejects (isAlreadyExists) when another candidate was first. */
  create(record: LeaderLeaseRecord): Promise<StoredLeaderLease>;
  /** Replaces it if it is still at `resourceVersion`; rejects (isConflict) when someone wrote in between. */
  update(record: LeaderLeaseRecord, resourceVersion: string): Promise<StoredLeaderLease>;
}

export class KubeLeaderLeaseStore implements LeaderLeaseStore {
  readonly where: string;
  private readonly api: CoordinationV1Api;

  constructor(
    kubeConfig: KubeConfig,
    private readonly namespace: string,
    private readonly name: string,
  ) {
    this.api = kubeConfig.makeApiClient(CoordinationV1Api);
    this.where = `${namespace}/${name}`;
  }

  async get(): Promise<StoredLeaderLease | undefined> {
    try {
      return stored(await this.api.readNamespacedLease({ namespace: this.namespace, name: this.name }), this.where);
    } catch (error) {
      const failure = toKubeApiError(error, `get Lease ${this.where}`);
      if (failure.isNotFound) return undefined;
      throw failure;
    }
  }

  async create(record: LeaderLeaseRecord): Promise<StoredLeaderLease> {
    try {
      return stored(await this.api.createNamespacedLease({ namespace: this.namespace, body: this.body(record) }), this.where);
    } catch (error) {
      throw toKubeApiError(error, `create Lease ${this.where}`);
    }
  }

  async update(record: LeaderLeaseRecord, resourceVersion: string): Promise<StoredLeaderLease> {
    try {
      const body = this.body(record);
      body.metadata!.resourceVersion = resourceVersion;
      return stored(await this.api.replaceNamespacedLease({ namespace: this.namespace, name: this.name, body }), this.where);
    } catch (error) {
      throw toKubeApiError(error, `update Lease ${this.where}`);
    }
  }

  private body(record: LeaderLeaseRecord): V1Lease {
    return {
      apiVersion: "coordination.k8s.io/v1",
      kind: "Lease",
      metadata: { name: this.name, namespace: this.namespace },
      spec: {
        holderIdentity: record.holderIdentity,
        leaseDurationSeconds: record.leaseDurationSeconds,
        leaseTransitions: record.leaseTransitions,
        ...definedFields({
          acquireTime: record.acquireTime && new V1MicroTime(record.acquireTime.getTime()),
          renewTime: record.renewTime && new V1MicroTime(record.renewTime.getTime()),
        }),
      },
    };
  }
}

function stored(lease: V1Lease, where: string): StoredLeaderLease {
  const resourceVersion = lease.metadata?.resourceVersion;
  if (!resourceVersion) throw new Error(`Lease ${where} has no resourceVersion`);
  const spec = lease.spec ?? {};
  const time = (value: Date | string | undefined) => (value === undefined ? undefined : new Date(value));
  const acquireTime = time(spec.acquireTime);
  const renewTime = time(spec.renewTime);
  return {
    resourceVersion,
    record: {
      holderIdentity: spec.holderIdentity ?? "",
      leaseDurationSeconds: spec.leaseDurationSeconds ?? 0,
      leaseTransitions: spec.leaseTransitions ?? 0,
      ...definedFields({ acquireTime, renewTime }),
    },
  };
}
