/**
 * spec.quiesce: before the final sync of a CutOver, the applications that use the source volumes stop.
 *   QuiesceApplications          scales to 0 every Deployment, StatefulSet and ReplicaSet (not a
 *                                Deployment's) whose pods mount a source PVC, suspends every CronJob
 *                                whose jobs do, and records what each had on the object (quiesceRules.ts)
 *                                and in status.quiescedApplications (the ledger records it with the
 *                                phase's completion);
 *   WaitForApplicationsQuiesced  waits until no pod mounts a source PVC;
 *   UnquiesceApplications        on the failure itinerary, and at the end of a Rollback, sets each back
 *                                to what it had; deleting an unfinished DVM does the same (deletion.ts).
 * On success the source stays quiesced: its data now lives on the destination.
 * Workloads are looked for in the source PVCs' namespaces only, and a tenant's DVM (outside an admin
 * namespace) acts in its own namespace only, whatever its spec names.
 */
import { LABEL } from "../contracts/labels";
import { CONDITION } from "../dvm/conditions";
import { MAX_QUIESCED_APPLICATIONS } from "../dvm/limits";
import type { QuiescedApplication } from "../dvm/types";
import type { Cluster } from "../kube/cluster";
import { KubeApiError } from "../kube/errors";
import { KINDS, type ObjectRef, type PodObject } from "../kube/objects";
import { inUseValue } from "./pvcUse";
import {
  type Found,
  keyOf,
  quiesceEnabled,
  quiescePatch,
  recordedState,
  restorePatch,
  WORKLOAD_KINDS,
  type Workload,
  workloadsToQuiesce,
} from "./quiesceRules";
import { podFinished, podMountsClaim } from "./sourcePlacement";
import { advance, type PhaseBody, type PhaseContext, type PhaseOutcome, wait } from "./types";
import type { PvcName } from "./volumes";

const GUARDED_WRITE_ATTEMPTS = 5;
/** Pods named in a wait's reason. */
const NAMED_PODS = 10;

/** The claims to look for, by namespace; errors for namespaces a tenant's DVM may not act in. */
export function quiesceScope(ctx: Pick<PhaseContext, "dvm" | "adminNamespace">, claims: readonly PvcName[]) {
  const byNamespace = new Map<string, Set<string>>();
  const errors: string[] = [];
  for (const claim of claims) {
    if (!ctx.adminNamespace && claim.namespace !== ctx.dvm.namespace) {
      errors.push(
        `spec.quiesce: the workloads of namespace "${claim.namespace}" cannot be quiesced by a DirectVolumeMigration in "${ctx.dvm.namespace}": only DVMs in an admin namespace act outside their own namespace`,
      );
      continue;
    }
    byNamespace.set(claim.namespace, (byNamespace.get(claim.namespace) ?? new Set()).add(claim.name));
  }
  return { byNamespace, errors: [...new Set(errors)] };
}

async function findWorkloads(cluster: Cluster, byNamespace: ReadonlyMap<string, ReadonlySet<string>>): Promise<Found[]> {
  const found: Found[] = [];
  for (const namespace of [...byNamespace.keys()].sort()) {
    for (const kind of WORKLOAD_KINDS) {
      for (const object of await cluster.list<Workload>(KINDS[kind], namespace, {})) found.push({ kind, object: { ...object, ...KINDS[kind] } });
    }
  }
  return workloadsToQuiesce(found, byNamespace);
}

const refOfFound = ({ kind, object }: Found): ObjectRef => ({ ...KINDS[kind], namespace: object.metadata.namespace ?? "", name: object.metadata.name });

/**
 * Reads the workload, asks `decide` for a merge patch and writes it guarded by the resourceVersion just
 * read; a conflict (someone wrote it since, or the read was stale) reads and decides again. "Nothing to
 * do" is confirmed the same way, by an empty patch guarded by that resourceVersion (the API server writes
 * nothing for it): a read that lags behind the object (a cache, a replica behind) must not decide that
 * a record is absent. Returns the object as it is after the write, or undefined when it is gone.
 */
async function guardedUpdate(
  cluster: Cluster,
  found: Found,
  decide: (current: Workload) => Record<string, unknown> | undefined,
): Promise<Workload | undefined> {
  const ref = refOfFound(found);
  for (let attempt = 1; ; attempt++) {
    const current = await cluster.get<Workload>(ref);
    if (!current) return undefined;
    const patch = decide(current);
    try {
      return await cluster.patchGuarded<Workload>(ref, patch ?? {}, current.metadata.resourceVersion ?? "");
    } catch (error) {
      if (error instanceof KubeApiError && error.isNotFound) return undefined;
      if (!(error instanceof KubeApiError && error.isConflict) || attempt >= GUARDED_WRITE_ATTEMPTS) throw error;
    }
  }
}

export const quiesceApplications: PhaseBody = async (ctx) => {
  if (!quiesceEnabled(ctx.spec)) return advance();
  const { byNamespace, errors } = quiesceScope(
    ctx,
    ctx.volumes.map((v) => v.from),
  );
  if (errors.length > 0) return { kind: "fail", category: "Critical", errors };
  const workloads = await findWorkloads(ctx.clusters.source, byNamespace);
  if (workloads.length > MAX_QUIESCED_APPLICATIONS) {
    return {
      kind: "fail",
      category: "Critical",
      errors: [
        `spec.quiesce: ${workloads.length} workloads mount the source volumes, more than the ${MAX_QUIESCED_APPLICATIONS} a DirectVolumeMigration quiesces (${workloads.slice(0, 5).map(keyOf).join(", ")}, ...); scale them down yourself and set spec.quiesce to false`,
      ],
    };
  }
  const holder = inUseValue(ctx.dvm);
  const quiesced: QuiescedApplication[] = [];
  for (const found of workloads) {
    const after = await guardedUpdate(ctx.clusters.source, found, (current) => quiescePatch(found.kind, current, holder));
    const recorded = after && recordedState(found.kind, after);
    if (!recorded) continue;
    quiesced.push(recorded);
    ctx.log.info("application quiesced", { workload: keyOf(found), recorded: recorded.replicas ?? recorded.suspend });
  }
  return advance({ quiescedApplications: quiesced });
};

export const waitForApplicationsQuiesced: PhaseBody = async (ctx) => {
  if (!quiesceEnabled(ctx.spec)) return advance();
  const { byNamespace } = quiesceScope(
    ctx,
    ctx.volumes.map((v) => v.from),
  );
  const holding: string[] = [];
  for (const [namespace, claims] of byNamespace) {
    for (const pod of await ctx.clusters.source.list<PodObject>(KINDS.Pod, namespace, {})) {
      // This DVM's own pods (none should exist yet) never hold the wait.
      if (podFinished(pod) || pod.metadata.labels?.[LABEL.dvmUid] === ctx.dvm.uid) continue;
      if ([...claims].some((claim) => podMountsClaim(pod, claim))) holding.push(`${namespace}/${pod.metadata.name}`);
    }
  }
  if (holding.length === 0) return advance();
  holding.sort();
  const named = holding.slice(0, NAMED_PODS).join(", ");
  return wait(`${holding.length} pods still mount the source volumes: ${named}${holding.length > NAMED_PODS ? ", ..." : ""}`);
};

/**
 * Restores the workloads that mount `claims` on `cluster` from their records (only `onlyHolder`'s when
 * given). Returns what was restored now, and the keys of those that carry no such record any more
 * (restored now or by an earlier run).
 */
export async function restoreApplications(
  ctx: Pick<PhaseContext, "dvm" | "adminNamespace" | "log">,
  cluster: Cluster,
  claims: readonly PvcName[],
  onlyHolder: string | undefined,
): Promise<{ restored: QuiescedApplication[]; unrecorded: Set<string>; problems: string[] }> {
  const { byNamespace, errors } = quiesceScope(ctx, claims);
  const restored: QuiescedApplication[] = [];
  const unrecorded = new Set<string>();
  const problems = [...errors];
  for (const found of await findWorkloads(cluster, byNamespace)) {
    let before: QuiescedApplication | undefined;
    const after = await guardedUpdate(cluster, found, (current) => {
      const decision = restorePatch(found.kind, current, onlyHolder);
      if (decision.kind === "unreadable") problems.push(`${keyOf(found)}: ${decision.problem}; restore it by hand`);
      if (decision.kind !== "patch") return undefined;
      before = recordedState(found.kind, current);
      return decision.patch;
    });
    if (!after || restorePatch(found.kind, after, onlyHolder).kind === "none") unrecorded.add(keyOf(found));
    if (after && before && restorePatch(found.kind, after, onlyHolder).kind === "none") {
      restored.push({ ...before, restored: true });
      ctx.log.info("application restored", { workload: keyOf(found), restored: before.replicas ?? before.suspend });
    }
  }
  return { restored, unrecorded, problems };
}

/** The status list after a restore: the earlier entries marked, and any restored entry not listed yet. */
function restoredList(listed: readonly QuiescedApplication[], restored: readonly QuiescedApplication[], unrecorded: ReadonlySet<string>) {
  const key = (a: QuiescedApplication) => `${a.kind} ${a.namespace}/${a.name}`;
  const marked = listed.map((a) => (unrecorded.has(key(a)) ? { ...a, restored: true } : a));
  const added = restored.filter((r) => !listed.some((a) => key(a) === key(r)));
  return [...marked, ...added].slice(0, MAX_QUIESCED_APPLICATIONS);
}

/**
 * Failure: this DVM's own records on the source. Rollback: whichever CutOver's records are on the
 * original source (the rollback's destination), once the data is back.
 */
export const unquiesceApplications: PhaseBody = async (ctx): Promise<PhaseOutcome> => {
  if (!quiesceEnabled(ctx.spec)) return advance();
  const rollback = ctx.itinerary === "VolumeMigrationRollback";
  if (!rollback && ctx.spec.migrationType !== "CutOver") return advance();
  const { restored, unrecorded, problems } = rollback
    ? await restoreApplications(
        ctx,
        ctx.clusters.destination,
        ctx.volumes.map((v) => v.to),
        undefined,
      )
    : await restoreApplications(
        ctx,
        ctx.clusters.source,
        ctx.volumes.map((v) => v.from),
        inUseValue(ctx.dvm),
      );
  const status = { quiescedApplications: restoredList(ctx.status.quiescedApplications ?? [], restored, unrecorded) };
  if (problems.length === 0) return advance(status);
  return {
    kind: "advance",
    status,
    warnings: [
      {
        type: CONDITION.ApplicationsNotRestored,
        status: "True",
        category: "Warn",
        reason: "QuiesceRecordUnreadable",
        message: problems.slice(0, 10).join("; "),
        durable: true,
      },
    ],
  };
};
