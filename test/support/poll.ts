/**
 * The tests' one poller: vitest's `vi.waitFor` (its timeout and interval), with what a failure needs to be
 * read: the error names what was awaited, shows the last value read (or the last error) and any context
 * (a log tail, a transcript). Test files only: `vi` exists inside a vitest worker alone, so modules that
 * benches or global setups import (datapath, relayProcess, migration) do not use it.
 */
import { vi } from "vitest";

export interface PollOptions<T> {
  /** How long to wait in all. */
  timeoutMs: number;
  /** The pause between two reads; default 500 ms. */
  intervalMs?: number;
  /** Keep polling when `read` throws (a service not up yet); by default an error ends the wait at once. */
  retryErrors?: boolean;
  /** How the last value shows in the timeout error; default JSON. */
  show?: (value: T) => string;
  /** Appended to the timeout error. */
  context?: () => string;
}

type Answer<T> = { value: T } | { error: unknown };

/** Signals vi.waitFor to read again; the timeout error is built from `last`, not from this. */
class NotYet extends Error {}

/** Reads until `done` accepts the value read, and returns that value. */
export async function until<T>(what: string, read: () => T | Promise<T>, done: (value: T) => boolean, options: PollOptions<T>): Promise<T> {
  const show = options.show ?? ((value: T) => JSON.stringify(value));
  let last = "no answer yet";
  const answer = await vi
    .waitFor(
      async (): Promise<Answer<T>> => {
        let value: T;
        try {
          value = await read();
        } catch (error) {
          if (!options.retryErrors) return { error };
          last = `last error: ${error instanceof Error ? error.message : String(error)}`;
          throw new NotYet();
        }
        if (done(value)) return { value };
        last = `last: ${show(value)}`;
        throw new NotYet();
      },
      { timeout: options.timeoutMs, interval: options.intervalMs ?? 500 },
    )
    .catch(() => {
      const context = options.context?.() ?? "";
      throw new Error(`timed out after ${options.timeoutMs} ms waiting for ${what}; ${last}${context ? `\n${context}` : ""}`);
    });
  if ("error" in answer) throw answer.error;
  return answer.value;
}

/** Reads until `check` finds something (neither undefined nor false), and returns it. */
export function found<T>(
  what: string,
  check: () => T | undefined | false | Promise<T | undefined | false>,
  options: PollOptions<T | undefined | false>,
): Promise<T> {
  return until(what, check, (value) => value !== undefined && value !== false, options) as Promise<T>;
}
