/**
 * The phase the relay last saw each pod of one migration in, so that a pod arriving in a phase a wait
 * ends on (a milestone) is told apart from the many other changes of a pod: a real kubelet writes a
 * starting pod's status five or six times before Running, and a tenant can relabel its own pods as its
 * DVM's without end. A milestone is forwarded after the fast delay whatever came before it; the rest keep
 * the doubling spacing (src/relay/schedule.ts). Each pod has at most three milestones (Running, then
 * Succeeded or Failed, then gone), so milestones cannot drive a hot loop.
 */

/** Pods remembered per DVM: a migration has a client pod per volume and attempt and a server pod per 16 volumes. */
export const MAX_TRACKED_PODS_PER_DVM = 256;

/** The pod phases a wait waits for: Running (the transfer pods up), Succeeded or Failed (a client pod done). */
const MILESTONE_POD_PHASES: ReadonlySet<string> = new Set(["Running", "Succeeded", "Failed"]);

function podPhaseOf(pod: unknown): string | undefined {
  const phase = (pod as { status?: { phase?: unknown } } | null | undefined)?.status?.phase;
  return typeof phase === "string" ? phase : undefined;
}

export class PodPhases {
  private readonly phases = new Map<string, string>();

  /**
   * Records one watch event of the pod at `key` (cluster and namespace/name) and says whether it is a
   * milestone: the pod gone, or seen for the first time in Running, Succeeded or Failed. Past
   * MAX_TRACKED_PODS_PER_DVM pods a new one is not remembered, and its changes are no milestones.
   */
  observe(key: string, type: string, pod: unknown): boolean {
    if (type === "DELETED") {
      this.phases.delete(key);
      return true;
    }
    const phase = podPhaseOf(pod);
    if (phase === undefined || this.phases.get(key) === phase) return false;
    if (!this.phases.has(key) && this.phases.size >= MAX_TRACKED_PODS_PER_DVM) return false;
    this.phases.set(key, phase);
    return MILESTONE_POD_PHASES.has(phase);
  }

  /** @internal How many pods are remembered. */
  get size(): number {
    return this.phases.size;
  }
}
