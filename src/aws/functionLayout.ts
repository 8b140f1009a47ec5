/**
 * How phases map to Lambda functions (serverless.yml custom.functionLayout). One rule, used by the
 * generated functions block (infra/deploy/serverless/functions.cjs), the relay's routing and local runs:
 *   shared     one function, key `phase`, runs every phase;
 *   per-phase  one function per executable phase, key `phase<PhaseName>`.
 * Every function has the same code and acts on the phase it reads fresh, so a request that reaches the
 * "wrong" function is still handled correctly.
 */
import { EXECUTABLE_PHASES, type PhaseName } from "../dvm/itinerary";

export const FUNCTION_LAYOUTS = ["shared", "per-phase"] as const;
export type FunctionLayout = (typeof FUNCTION_LAYOUTS)[number];
export const DEFAULT_FUNCTION_LAYOUT: FunctionLayout = "shared";

const SHARED_KEY = "phase";

/** @public (read at run time by infra/deploy/serverless/functions.cjs, which knip cannot follow) */
export function isFunctionLayout(value: unknown): value is FunctionLayout {
  return typeof value === "string" && (FUNCTION_LAYOUTS as readonly string[]).includes(value);
}

/** The Serverless function key that serves `phase` (the Lambda name is `<service>-<stage>-<key>`). */
export function phaseFunctionKey(layout: FunctionLayout, phase: PhaseName): string {
  return layout === "shared" ? SHARED_KEY : `${SHARED_KEY}${phase}`;
}

/** Every function key of a layout, in itinerary-table order. */
export function phaseFunctionKeys(layout: FunctionLayout): string[] {
  return layout === "shared" ? [SHARED_KEY] : EXECUTABLE_PHASES.map((phase) => phaseFunctionKey(layout, phase));
}

/** The deployed Lambda function name (Serverless's default naming). */
export function phaseFunctionName(service: string, stage: string, layout: FunctionLayout, phase: PhaseName): string {
  return `${service}-${stage}-${phaseFunctionKey(layout, phase)}`;
}
