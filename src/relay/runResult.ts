/**
 * Parses a RunResult that crossed a process boundary (a Lambda response payload) with the schema its
 * type is inferred from (src/contracts/request.ts), naming the first field that does not fit.
 */
import { type RunResult, RunResultSchema } from "../contracts/request";
import { fieldIssues, formatIssue } from "../lib/issues";

export type RunResultParse = { ok: true; result: RunResult } | { ok: false; error: string };

export function parseRunResult(value: unknown): RunResultParse {
  const parsed = RunResultSchema.safeParse(value);
  if (parsed.success) return { ok: true, result: parsed.data };
  const [issue] = fieldIssues("", parsed.error, "(root)");
  return { ok: false, error: issue ? formatIssue(issue) : "not a RunResult" };
}
