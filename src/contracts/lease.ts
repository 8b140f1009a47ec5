/** What a phase body sees of the lease it runs under (PhaseContext.lease; the runner's BodyLease implements it). */
export interface PhaseLease {
  /** Aborted at the deadline or when the claim is lost; long-running work should pass it on. */
  readonly signal: AbortSignal;
  /** Heartbeat: extend the lease (and the deadline). Throws the abort reason once the lease is lost. */
  renew(): Promise<void>;
}
