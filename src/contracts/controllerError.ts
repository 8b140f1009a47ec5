/**
 * The one base of the project's errors: each says what its readers should do with it, so the phase
 * function's handler, the runner and the trigger read one marker instead of sorting classes.
 *   - retryable: a later try of the same request can succeed (throttling, a server error, a conflict a
 *     re-read resolves, a lease deadline).
 *   - terminal: the request can never succeed as it is; a retry would only repeat the failure.
 *   - input: what the user asked for cannot be done; the migration fails with errors naming the fields.
 *   - superseded: another invocation owns the work now; stop without writing.
 *   - unexpected: a bug, a refused permission, a missing setting: surfaced, never swallowed.
 */
export type ErrorDisposition = "retryable" | "terminal" | "input" | "superseded" | "unexpected";

export abstract class ControllerError extends Error {
  abstract readonly disposition: ErrorDisposition;
}

/** What to do with any thrown value: its marker, or "unexpected" for an error from outside the project. */
export function dispositionOf(error: unknown): ErrorDisposition {
  return error instanceof ControllerError ? error.disposition : "unexpected";
}
