/** Polling with a deadline, for services that have no "ready" event to wait on. */

/** Thrown from a check to stop waiting at once (e.g. the process being waited on has died). */
export class GiveUp extends Error {}

/** Polls `check` until it returns true; on timeout the error carries `context()` (e.g. a log tail). */
export async function waitFor(
  what: string,
  check: () => Promise<boolean>,
  timeoutMs: number,
  context: () => string = () => "",
  intervalMs = 100,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  while (Date.now() < deadline) {
    try {
      if (await check()) return;
    } catch (err) {
      if (err instanceof GiveUp) throw err;
      lastError = err; // not up yet (connection refused, 503, ...): try again
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
  const detail = lastError instanceof Error ? ` (last error: ${lastError.message})` : "";
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${detail}\n${context()}`);
}
