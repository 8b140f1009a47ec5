/** Ledger errors are classes so the runner can branch on what happened (see STYLE.md, Powertools). */

import { ControllerError, type ErrorDisposition } from "../contracts/controllerError";
import { errorMessage } from "../lib/errorMessage";
import type { LedgerKey, LedgerState } from "./types";

/** Any ledger failure that is not one of the more specific classes below; never swallowed. */
export class LedgerError extends ControllerError {
  override readonly name: string = "LedgerError";
  readonly disposition: ErrorDisposition = "unexpected";
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** A key that can have no ledger entry; raised before anything is written. */
export class InvalidLedgerKeyError extends LedgerError {
  override readonly name: string = "InvalidLedgerKeyError";
  /** Derived from the object itself (e.g. a uid it cannot encode): no retry changes it. */
  override readonly disposition = "terminal";
  constructor(
    readonly field: "key" | "uid" | "phase" | "generation",
    readonly value: unknown,
    reason: string,
  ) {
    super(`invalid ledger key: ${field} ${reason} (got ${describe(value)})`);
  }
}

/** DynamoDB stayed unreachable or throttled through every retry. */
export class LedgerUnavailableError extends LedgerError {
  override readonly name: string = "LedgerUnavailableError";
  override readonly disposition = "retryable";
  constructor(
    readonly operation: string,
    readonly attempts: number,
    cause: unknown,
  ) {
    super(`ledger ${operation} failed after ${attempts} attempt(s): ${errorMessage(cause)}`, { cause });
  }
}

/**
 * The claim is no longer ours: its lease expired and another invocation took over (or the entry moved
 * on). The holder must stop and must not patch the status.
 */
export class LostClaimError extends LedgerError {
  override readonly name: string = "LostClaimError";
  override readonly disposition = "superseded";
  constructor(
    readonly key: LedgerKey,
    readonly attempt: number,
    /** The entry's attempt and state when the write was refused, when DynamoDB returned them. */
    readonly current: { attempt: number; state: LedgerState } | undefined,
  ) {
    super(
      `lost claim on ${key.uid}/${key.phase}/${key.generation}: attempt ${attempt} no longer holds it` +
        (current ? ` (now attempt ${current.attempt}, ${current.state})` : " (entry missing)"),
    );
  }
}

/**
 * A phase's outcome too large for a ledger item (DynamoDB's 400 KB): refused before the write, which
 * DynamoDB would refuse as not transient. The runner records a failure of the migration instead.
 */
export class OutcomeTooLargeError extends LedgerError {
  override readonly name: string = "OutcomeTooLargeError";
  override readonly disposition = "terminal";
  constructor(
    readonly bytes: number,
    readonly limit: number,
  ) {
    super(`the phase's outcome takes ${bytes} bytes, more than the ${limit} a ledger record holds`);
  }
}

function describe(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value);
  if (typeof value === "number" || typeof value === "boolean" || value == null) return String(value);
  return typeof value;
}
