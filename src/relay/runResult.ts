/**
 * Parses a RunResult that crossed a process boundary (a Lambda response payload). The type lives in
 * src/runner/request.ts; this schema must accept exactly its cases, which the `satisfies` check below
 * keeps honest.
 */
import { z } from "zod";
import type { RunResult } from "../runner/request";

const delay = z.number().finite().min(0);

export const RunResultSchema = z.discriminatedUnion("kind", [
  z.object({ kind: z.literal("advanced"), phase: z.string(), next: z.string(), requeueAfterMs: delay }),
  z.object({ kind: z.literal("waiting"), phase: z.string(), reason: z.string(), requeueAfterMs: delay }),
  z.object({ kind: z.literal("duplicate"), phase: z.string(), next: z.string(), statusRepaired: z.boolean(), requeueAfterMs: delay }),
  z.object({ kind: z.literal("busy"), phase: z.string(), retryAfterMs: delay }),
  z.object({ kind: z.literal("retry"), phase: z.string(), error: z.string(), retryAfterMs: delay }),
  z.object({ kind: z.literal("finished"), phase: z.string() }),
  z.object({ kind: z.literal("gone") }),
  z.object({ kind: z.literal("stopped"), reason: z.string() }),
]);

// Fails to compile if the schema and the RunResult type drift apart (in either direction).
type Parsed = z.infer<typeof RunResultSchema>;
const _schemaCoversType: (r: RunResult) => Parsed = (r) => r;
const _typeCoversSchema: (r: Parsed) => RunResult = (r) => r;
void _schemaCoversType;
void _typeCoversSchema;

export type RunResultParse = { ok: true; result: RunResult } | { ok: false; error: string };

export function parseRunResult(value: unknown): RunResultParse {
  const parsed = RunResultSchema.safeParse(value);
  if (parsed.success) return { ok: true, result: parsed.data };
  const issue = parsed.error.issues[0];
  return { ok: false, error: issue ? `${issue.path.join(".") || "(root)"}: ${issue.message}` : "not a RunResult" };
}
