/**
 * No quiet skips. A suite that needs a service or a tool asks here instead of calling skipIf on its own:
 *   - missing(what, present, hint): when `what` is absent the suite FAILS under CI (CI is set: there
 *     everything is installed, so absence is a broken setup); elsewhere (a laptop narrowing the run
 *     with DVM_TEST_SERVICES) it is skipped, and the skip prints what is missing and how to get it;
 *   - otherEnvironment(environment, matches, why): a test that is explicitly about another environment
 *     (e.g. clusters this run started itself) is skipped elsewhere, always with a printed reason.
 * Both return true when the suite should be skipped: `describe.skipIf(missing(...))(...)`.
 */

export function inCi(env: NodeJS.ProcessEnv = process.env): boolean {
  const ci = env.CI?.trim().toLowerCase();
  return ci !== undefined && ci !== "" && ci !== "false" && ci !== "0";
}

export function missing(what: string, present: unknown, hint: string, env: NodeJS.ProcessEnv = process.env): boolean {
  if (present) return false;
  if (inCi(env)) throw new Error(`${what} is missing in CI, where every test must run (${hint})`);
  console.warn(`[skipped] ${what} is missing: ${hint}`);
  return true;
}

export function otherEnvironment(environment: string, matches: unknown, why: string): boolean {
  if (matches) return false;
  console.warn(`[skipped] only for ${environment}: ${why}`);
  return true;
}
