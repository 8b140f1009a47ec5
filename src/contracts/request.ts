/**
 * What the relay sends and a phase function receives. The runner decides from the object it reads fresh,
 * never from the request's copy of generation, resourceVersion or phase: phase and generation are only a
 * guess of which ledger entry to claim first, and nothing runs unless the read that follows the claim
 * agrees (runner.ts).
 */
import { z } from "zod";

export const ReconcileRequestSchema = z.object({
  uid: z.string().min(1),
  namespace: z.string().min(1),
  name: z.string().min(1),
  generation: z.number().int().min(0).optional(),
  resourceVersion: z.string().optional(),
  /** status.phase as the sender last saw it (or as the last invocation reported moving it to). */
  phase: z.string().optional(),
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

const delay = z.number().finite().min(0);

/**
 * What one invocation did, as the phase function returns it and the relay parses it back (its requeue
 * delay drives the relay's schedule). The type is inferred from this schema: one definition for both.
 */
export const RunResultSchema = z.discriminatedUnion("kind", [
  /** The phase ran to completion; the DVM moved to `next`. */
  z.object({ kind: z.literal("advanced"), phase: z.string(), next: z.string(), requeueAfterMs: delay }),
  /** A wait phase said "not yet". */
  z.object({ kind: z.literal("waiting"), phase: z.string(), reason: z.string(), requeueAfterMs: delay }),
  /** The ledger already records this phase as completed: its body was not run again. */
  z.object({ kind: z.literal("duplicate"), phase: z.string(), next: z.string(), statusRepaired: z.boolean(), requeueAfterMs: delay }),
  /** Another invocation holds the phase; it will move the DVM on. */
  z.object({ kind: z.literal("busy"), phase: z.string(), retryAfterMs: delay }),
  /** A transient error; the same phase will be tried again. */
  z.object({ kind: z.literal("retry"), phase: z.string(), error: z.string(), retryAfterMs: delay }),
  /** The migration is finished (Completed). */
  z.object({ kind: z.literal("finished"), phase: z.string() }),
  /** The DVM no longer exists (or was recreated under another uid). */
  z.object({ kind: z.literal("gone") }),
  /** The DVM cannot go on without a human (its status does not parse); nothing runs until it is fixed. */
  z.object({ kind: z.literal("stopped"), reason: z.string() }),
]);
export type RunResult = z.infer<typeof RunResultSchema>;
