/**
 * The baseline's quiesce in the quiesce scenario: MTC's own (mig-controller,
 * pkg/controller/migmigration/quiesce.go), not ours, so the baseline stands for what upstream does.
 *   - quiesce: for every CronJob of the source namespaces, annotate preQuiesceSuspend "true" and suspend
 *     it (MTC's skip test compares the pointer spec.suspend with a new pointer to true, never equal, so
 *     every CronJob is annotated, the ones suspended before too); for every Deployment, StatefulSet and
 *     ReplicaSet without owner: skip it at 0 replicas, else record its replicas in preQuiesceReplicas and
 *     scale it to 0 (paused Deployments left out: none here is paused);
 *   - unquiesce: every CronJob with the annotation: remove it and set suspend false; every workload with
 *     preQuiesceReplicas: remove it and, when it is at 0, set the recorded count back.
 * Each write is client.Update of the object as read: resourceVersion included, so a copy older than the
 * object is refused (409) and the reconcile fails and is requeued. The reads come from the controller's
 * informer cache (MTC's cached client, EnableCachedClient) for the "baseline" target, by GET for
 * "fresh-get".
 *
 * So a stale copy cannot overwrite the record, and a repeat after the scale-down reads 0 and skips: the
 * record is made once, on the object. What MTC's body gets wrong is the CronJob suspended before the
 * migration: its restore sets every annotated CronJob's suspend to false.
 */
import type { KubeConfig } from "@kubernetes/client-node";
import type { ExecutablePhaseName } from "../../../src/dvm/itinerary";
import type { Cluster } from "../../../src/kube/cluster";
import { KubeApiError } from "../../../src/kube/errors";
import { KINDS, type KubeObject } from "../../../src/kube/objects";
import { PRE_QUIESCE_REPLICAS, PRE_QUIESCE_SUSPEND, quiesceEnabled, type Workload } from "../../../src/phases/quiesceRules";
import { advance, type PhaseBody, type PhaseContext } from "../../../src/phases/types";
import { Follow } from "./listWatch";

type ScaledKind = "Deployment" | "StatefulSet" | "ReplicaSet";
const SCALED: readonly ScaledKind[] = ["Deployment", "StatefulSet", "ReplicaSet"];
const CACHED_KINDS = ["CronJob", ...SCALED] as const;

/** Writes MTC's Update made that the API server refused (409: the copy read was older than the object). */
export interface MtcCounts {
  refusedWrites: number;
}

const namespacesOf = (ctx: PhaseContext) => [...new Set(ctx.volumes.map((v) => v.from.namespace))].sort();

/** client.Update of the object as read: the changed fields, guarded by the resourceVersion of that copy. */
async function update(cluster: Cluster, object: Workload, patch: Record<string, unknown>, counts: MtcCounts): Promise<void> {
  const ref = { apiVersion: object.apiVersion, kind: object.kind, namespace: object.metadata.namespace ?? "", name: object.metadata.name };
  try {
    await cluster.patchGuarded(ref, patch, object.metadata.resourceVersion ?? "");
  } catch (error) {
    if (error instanceof KubeApiError && error.isConflict) counts.refusedWrites++;
    throw error;
  }
}

export function mtcQuiesceBodies(counts: MtcCounts): Partial<Record<ExecutablePhaseName, PhaseBody>> {
  const quiesce: PhaseBody = async (ctx) => {
    if (!quiesceEnabled(ctx.spec)) return advance();
    const cluster = ctx.clusters.source;
    for (const namespace of namespacesOf(ctx)) {
      for (const cronJob of await cluster.list<Workload>(KINDS.CronJob, namespace, {}))
        await update(cluster, cronJob, { metadata: { annotations: { [PRE_QUIESCE_SUSPEND]: "true" } }, spec: { suspend: true } }, counts);
      for (const kind of SCALED) {
        for (const workload of await cluster.list<Workload>(KINDS[kind], namespace, {})) {
          if (kind === "ReplicaSet" && (workload.metadata.ownerReferences ?? []).length > 0) continue;
          const replicas = workload.spec?.replicas ?? 1;
          if (replicas === 0) continue;
          await update(cluster, workload, { metadata: { annotations: { [PRE_QUIESCE_REPLICAS]: String(replicas) } }, spec: { replicas: 0 } }, counts);
        }
      }
    }
    return advance();
  };

  const unquiesce: PhaseBody = async (ctx) => {
    if (!quiesceEnabled(ctx.spec)) return advance();
    const cluster = ctx.clusters.source;
    for (const namespace of namespacesOf(ctx)) {
      for (const cronJob of await cluster.list<Workload>(KINDS.CronJob, namespace, {})) {
        if (cronJob.metadata.annotations?.[PRE_QUIESCE_SUSPEND] === undefined) continue;
        await update(cluster, cronJob, { metadata: { annotations: { [PRE_QUIESCE_SUSPEND]: null } }, spec: { suspend: false } }, counts);
      }
      for (const kind of SCALED) {
        for (const workload of await cluster.list<Workload>(KINDS[kind], namespace, {})) {
          if (kind === "ReplicaSet" && (workload.metadata.ownerReferences ?? []).length > 0) continue;
          const recorded = workload.metadata.annotations?.[PRE_QUIESCE_REPLICAS];
          if (recorded === undefined) continue;
          const count = Number.parseInt(recorded, 10);
          if (!Number.isFinite(count)) throw new Error(`${kind} ${namespace}/${workload.metadata.name}: ${PRE_QUIESCE_REPLICAS} is "${recorded}"`);
          const atZero = (workload.spec?.replicas ?? 1) === 0;
          await update(
            cluster,
            workload,
            { metadata: { annotations: { [PRE_QUIESCE_REPLICAS]: null } }, ...(atZero ? { spec: { replicas: count } } : {}) },
            counts,
          );
        }
      }
    }
    return advance();
  };

  return { QuiesceApplications: quiesce, UnquiesceAfterFailure: unquiesce };
}

/**
 * An informer cache of the workload kinds MTC quiesces, in every namespace, as a controller-runtime
 * manager's cached client keeps one: updated by its watch, so it lags behind the controller's own writes.
 */
export class WorkloadInformers {
  private readonly objects = new Map<string, Workload>();
  private readonly follows: Follow[];

  constructor(kubeConfig: KubeConfig) {
    this.follows = CACHED_KINDS.map((kind) => {
      const group = KINDS[kind].apiVersion;
      const plural = kind === "CronJob" ? "cronjobs" : `${kind.toLowerCase()}s`;
      return new Follow(kubeConfig, { ...KINDS[kind], path: `/apis/${group}/${plural}` }, (event, raw) => {
        const object = { ...(raw as Workload), ...KINDS[kind] };
        const key = `${kind}/${object.metadata.namespace}/${object.metadata.name}`;
        if (event === "DELETED") this.objects.delete(key);
        else this.objects.set(key, object);
      });
    });
  }

  start(): this {
    for (const follow of this.follows) follow.start();
    return this;
  }

  stop(): Promise<void[]> {
    return Promise.all(this.follows.map((f) => f.stop()));
  }

  /** `cluster` with the workload kinds listed from this cache (after its first list, as the cached client waits). */
  cachedReads(cluster: Cluster): Cluster {
    const wrapped = Object.create(cluster) as Cluster;
    wrapped.list = async <T extends KubeObject>(kind: { apiVersion: string; kind: string }, namespace: string | undefined, labels: Record<string, string>) => {
      if (!(CACHED_KINDS as readonly string[]).includes(kind.kind) || Object.keys(labels).length > 0) return cluster.list<T>(kind, namespace, labels);
      await Promise.all(this.follows.map((f) => f.synced));
      const prefix = `${kind.kind}/${namespace ?? ""}`;
      return [...this.objects.entries()]
        .filter(([key]) => (namespace === undefined ? key.startsWith(`${kind.kind}/`) : key.startsWith(`${prefix}/`)))
        .map(([, o]) => structuredClone(o) as unknown as T);
    };
    return wrapped;
  }
}
