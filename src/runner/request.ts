/**
 * What the relay sends and a phase function receives. Only the identity matters: the runner decides from
 * the object it reads fresh, never from the request's copy of generation, resourceVersion or phase.
 */
import { z } from "zod";

export const ReconcileRequestSchema = z.object({
  uid: z.string().min(1),
  namespace: z.string().min(1),
  name: z.string().min(1),
  generation: z.number().int().min(0).optional(),
  resourceVersion: z.string().optional(),
  /** Why the relay sent it (watch event, requeue, resync): for logs only. */
  reason: z.string().optional(),
});
export type ReconcileRequest = z.infer<typeof ReconcileRequestSchema>;

/** What one invocation did besides its outcome, for metrics and logs. */
export interface RunStats {
  durationMs: number;
  /** The ledger attempt this invocation held (absent when it claimed nothing). */
  attempt?: number;
  /** It took over a lease that had expired (the previous holder crashed or stalled). */
  takeover?: boolean;
  /** Status writes refused with 409 and redone after a re-read. */
  statusConflicts: number;
}

export type RunResult =
  /** The phase ran to completion; the DVM moved to `next`. */
  | { kind: "advanced"; phase: string; next: string; requeueAfterMs: number }
  /** A wait phase said "not yet". */
  | { kind: "waiting"; phase: string; reason: string; requeueAfterMs: number }
  /** The ledger already records this phase as completed: its body was not run again. */
  | { kind: "duplicate"; phase: string; next: string; statusRepaired: boolean; requeueAfterMs: number }
  /** Another invocation holds the phase; it will move the DVM on. */
  | { kind: "busy"; phase: string; retryAfterMs: number }
  /** A transient error; the same phase will be tried again. */
  | { kind: "retry"; phase: string; error: string; retryAfterMs: number }
  /** The migration is finished (Completed). */
  | { kind: "finished"; phase: string }
  /** The DVM no longer exists (or was recreated under another uid). */
  | { kind: "gone" }
  /** The DVM cannot go on without a human (its status does not parse); nothing runs until it is fixed. */
  | { kind: "stopped"; reason: string };
