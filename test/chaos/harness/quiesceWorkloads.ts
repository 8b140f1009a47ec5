/**
 * The quiesce scenario's applications and what became of them. Each source namespace gets a Deployment
 * (2 replicas), a StatefulSet (3), a CronJob and a CronJob suspended before the migration, all mounting
 * the migration's PVCs. kwok runs no controller-manager, so no pod ever exists: what is judged is the
 * objects themselves, every version of them the API server's watch delivered (an instrument of its own,
 * not the bodies' reads):
 *   - wrong records: a count recorded (annotation, or the DVM's status.quiescedApplications) other than
 *     the one the workload had before the migration, 0 above all;
 *   - wrong restores: a workload not back to what it had at the end, or restored more than once (its
 *     record removed twice, or its count written back twice), or never restored.
 */
import type { KubeConfig } from "@kubernetes/client-node";
import type { QuiescedApplication } from "../../../src/dvm/types";
import { KubeCluster } from "../../../src/kube/kubeCluster";
import { KINDS, type KubeObject } from "../../../src/kube/objects";
import { PRE_QUIESCE_REPLICAS, PRE_QUIESCE_SUSPEND, type Workload } from "../../../src/phases/quiesceRules";
import { Follow } from "./listWatch";

/** Set on the scenario's workloads, so the watch sees nothing else. */
export const QUIESCE_FIXTURE_LABEL = "dvm.test/chaos-quiesce";

type AppKind = "Deployment" | "StatefulSet" | "CronJob";

export interface Application {
  kind: AppKind;
  name: string;
  /** The PVC its pods mount (the fixture's PVCs are vol-0, vol-1, ...). */
  claim: string;
  /** What it has before the migration: replicas, or a CronJob's spec.suspend. */
  replicas?: number;
  suspend?: boolean;
}

export const QUIESCE_APPLICATIONS: readonly Application[] = [
  { kind: "Deployment", name: "app", claim: "vol-0", replicas: 2 },
  { kind: "StatefulSet", name: "db", claim: "vol-1", replicas: 3 },
  { kind: "CronJob", name: "report", claim: "vol-0", suspend: false },
  // Suspended by its owner before the migration: a restore must leave it suspended.
  { kind: "CronJob", name: "paused-report", claim: "vol-1", suspend: true },
];

function manifest(app: Application, namespace: string): KubeObject {
  const labels = { app: app.name };
  const metadata = { name: app.name, namespace, labels: { ...labels, [QUIESCE_FIXTURE_LABEL]: "true" } };
  const podSpec = {
    containers: [{ name: "app", image: "registry.example/app:1" }],
    volumes: [{ name: "data", persistentVolumeClaim: { claimName: app.claim } }],
  };
  const template = { metadata: { labels }, spec: podSpec };
  if (app.kind === "CronJob")
    return {
      ...KINDS.CronJob,
      metadata,
      spec: { schedule: "0 3 * * *", suspend: app.suspend, jobTemplate: { spec: { template: { spec: { ...podSpec, restartPolicy: "Never" } } } } },
    };
  const spec = { replicas: app.replicas, selector: { matchLabels: labels }, template };
  return app.kind === "StatefulSet" ? { ...KINDS.StatefulSet, metadata, spec: { ...spec, serviceName: app.name } } : { ...KINDS.Deployment, metadata, spec };
}

/** Creates the applications in each namespace (the source namespaces need PVCs vol-0 and vol-1). */
export async function createApplications(kubeConfig: KubeConfig, namespaces: readonly string[]): Promise<void> {
  const cluster = new KubeCluster("source", kubeConfig);
  for (const namespace of namespaces) for (const app of QUIESCE_APPLICATIONS) await cluster.ensure(manifest(app, namespace));
}

export interface Seen {
  resourceVersion: number;
  /** Replicas (absent: 1, as the API server defaults it), or a CronJob's spec.suspend. */
  value: number | boolean;
  /** The record annotation (preQuiesceReplicas / preQuiesceSuspend), when present. */
  record?: string;
}

const keyOf = (kind: string, namespace: string, name: string) => `${kind} ${namespace}/${name}`;
const recordKey = (kind: AppKind) => (kind === "CronJob" ? PRE_QUIESCE_SUSPEND : PRE_QUIESCE_REPLICAS);

/** Every version of the fixture's workloads, by object, ordered by resourceVersion. */
export class WorkloadHistory {
  private readonly seen = new Map<string, Map<number, Seen>>();
  private readonly follows: Follow[];

  constructor(private readonly kubeConfig: KubeConfig) {
    const collection = (kind: AppKind, group: string) => ({
      ...KINDS[kind],
      path: `/apis/${group}/${kind === "CronJob" ? "cronjobs" : `${kind.toLowerCase()}s`}`,
      labelSelector: `${QUIESCE_FIXTURE_LABEL}=true`,
    });
    this.follows = [collection("Deployment", "apps/v1"), collection("StatefulSet", "apps/v1"), collection("CronJob", "batch/v1")].map(
      (c) => new Follow(kubeConfig, c, (event, object) => event !== "DELETED" && this.record(c.kind as AppKind, object as Workload)),
    );
  }

  async start(): Promise<void> {
    for (const follow of this.follows) follow.start();
    await Promise.all(this.follows.map((f) => f.synced));
  }

  /** Stops watching after one last list: the final versions are in, whatever the watch still had in flight. */
  async stop(): Promise<void> {
    const cluster = new KubeCluster("source", this.kubeConfig);
    for (const kind of ["Deployment", "StatefulSet", "CronJob"] as const)
      for (const object of await cluster.list<Workload>(KINDS[kind], undefined, { [QUIESCE_FIXTURE_LABEL]: "true" })) this.record(kind, object);
    await Promise.all(this.follows.map((f) => f.stop()));
  }

  private record(kind: AppKind, object: Workload): void {
    const key = keyOf(kind, object.metadata.namespace ?? "", object.metadata.name);
    const versions = this.seen.get(key) ?? new Map<number, Seen>();
    const resourceVersion = Number(object.metadata.resourceVersion);
    const value = kind === "CronJob" ? object.spec?.suspend === true : (object.spec?.replicas ?? 1);
    const record = object.metadata.annotations?.[recordKey(kind)];
    versions.set(resourceVersion, { resourceVersion, value, ...(record !== undefined ? { record } : {}) });
    this.seen.set(key, versions);
  }

  versions(kind: AppKind, namespace: string, name: string): Seen[] {
    return [...(this.seen.get(keyOf(kind, namespace, name))?.values() ?? [])].sort((a, b) => a.resourceVersion - b.resourceVersion);
  }
}

/**
 * Why the cached baseline shows no wrong record and no double restore under the repeats, printed with
 * its figures: MTC keeps its record where ours does.
 */
export const QUIESCE_BASELINE_NOTE =
  "the cached baseline cannot record 0 or restore twice from a repeat: MTC, like ours, records the count on the object itself, skips a workload already at 0, " +
  "and writes with Update (guarded by the resourceVersion it read), so a repeat after the scale-down reads 0 and records nothing, a stale cached copy is refused (409), " +
  "and a restore removes the record in the same write; the hazard needs a body that keeps the count it read elsewhere (test/unit/phases/quiesceInterleavings.test.ts). " +
  "What MTC's body gets wrong with or without faults: it restores every CronJob it annotated to suspend false, one suspended before the migration too";

export interface QuiesceTally {
  /** Workloads of the target's migrations (4 per source namespace). */
  workloads: number;
  /** Workloads seen quiesced (0 replicas, or suspended with a record). */
  quiesced: number;
  /** Restores seen: writes that removed a record. */
  restores: number;
  wrongRecords: string[];
  wrongRestores: string[];
  /** Quiesce or restore writes refused because the object changed since it was read (409): the baseline's stale cached copies. */
  refusedWrites?: number;
}

/**
 * Judges each application of `namespaces` from its versions; `statuses` has each namespace's
 * status.quiescedApplications when the target keeps one (ours), absent for one that keeps none (MTC).
 */
export function judgeQuiesce(
  history: Pick<WorkloadHistory, "versions">,
  namespaces: readonly string[],
  statuses?: ReadonlyMap<string, readonly QuiescedApplication[]>,
): QuiesceTally {
  const tally: QuiesceTally = { workloads: 0, quiesced: 0, restores: 0, wrongRecords: [], wrongRestores: [] };
  for (const namespace of namespaces) {
    for (const app of QUIESCE_APPLICATIONS) {
      tally.workloads++;
      const key = keyOf(app.kind, namespace, app.name);
      const original = app.kind === "CronJob" ? app.suspend === true : app.replicas!;
      const versions = history.versions(app.kind, namespace, app.name);
      const last = versions.at(-1);
      if (!last) {
        tally.wrongRestores.push(`${key}: never seen`);
        continue;
      }
      // The replica counts recorded on the object (a CronJob's record is judged by its restore: MTC's
      // "true" means "suspended by the migration", not what it had).
      if (app.kind !== "CronJob")
        for (const record of new Set(versions.map((v) => v.record).filter((r) => r !== undefined)))
          if (record !== String(original)) tally.wrongRecords.push(`${key}: recorded ${record} on the object, had ${original}`);
      const listed = statuses?.get(namespace)?.find((a) => a.kind === app.kind && a.name === app.name);
      if (statuses && !listed) tally.wrongRecords.push(`${key}: not in status.quiescedApplications`);
      if (listed && (app.kind === "CronJob" ? listed.suspend : listed.replicas) !== original)
        tally.wrongRecords.push(
          `${key}: status.quiescedApplications says ${app.kind === "CronJob" ? `suspend ${listed.suspend}` : listed.replicas}, had ${original}`,
        );

      const quiescedAt = versions.findIndex((v) => (app.kind === "CronJob" ? v.value === true && v.record !== undefined : v.value === 0));
      if (quiescedAt >= 0) tally.quiesced++;
      else tally.wrongRestores.push(`${key}: never quiesced`);
      let removals = 0;
      let writtenBack = 0;
      for (let i = 1; i < versions.length; i++) {
        const [before, after] = [versions[i - 1]!, versions[i]!];
        if (before.record !== undefined && after.record === undefined) removals++;
        if (i > quiescedAt && quiescedAt >= 0 && before.value !== after.value) writtenBack++;
      }
      tally.restores += removals;
      if (removals === 0 && quiescedAt >= 0) tally.wrongRestores.push(`${key}: never restored`);
      if (removals > 1) tally.wrongRestores.push(`${key}: restored ${removals} times (record removed ${removals} times)`);
      if (writtenBack > 1) tally.wrongRestores.push(`${key}: its count was written back ${writtenBack} times after the scale-down`);
      if (last.value !== original)
        tally.wrongRestores.push(
          app.kind === "CronJob"
            ? `${key}: left ${last.value ? "suspended" : "unsuspended"}, had suspend ${original}`
            : `${key}: left at ${last.value} replicas, had ${original}`,
        );
      if (last.record !== undefined) tally.wrongRestores.push(`${key}: its record ${last.record} is still on the object`);
    }
  }
  return tally;
}
