/** Ledger keys: validated before any write, and encoded so one DVM's entries sort by generation. */
import { isPhaseName, type PhaseName, phaseSpec } from "../dvm/itinerary";
import { InvalidLedgerKeyError } from "./errors";
import type { LedgerKey } from "./types";

/** Generations are zero-padded to this many digits in the sort key so string order is numeric order. */
const GENERATION_DIGITS = 10;
export const MAX_GENERATION = 10 ** GENERATION_DIGITS - 1;
/** Kubernetes UIDs are 36 characters; the bound keeps a bad value from filling a 2 KB partition key. */
export const MAX_UID_LENGTH = 128;

/** Returns the key as a clean LedgerKey or throws InvalidLedgerKeyError naming the bad field. */
export function validateLedgerKey(key: unknown): LedgerKey {
  if (typeof key !== "object" || key === null) {
    throw new InvalidLedgerKeyError("key", key, "must be an object with uid, phase and generation");
  }
  const { uid, phase, generation } = key as Record<string, unknown>;
  validateUid(uid);
  if (!isPhaseName(phase)) {
    throw new InvalidLedgerKeyError("phase", phase, "is not a phase of any itinerary");
  }
  if (phaseSpec(phase).terminal) {
    throw new InvalidLedgerKeyError("phase", phase, "is terminal and has no ledger entry");
  }
  if (typeof generation !== "number" || !Number.isInteger(generation)) {
    throw new InvalidLedgerKeyError("generation", generation, "must be an integer");
  }
  if (generation < 0 || generation > MAX_GENERATION) {
    throw new InvalidLedgerKeyError("generation", generation, `must be between 0 and ${MAX_GENERATION}`);
  }
  return { uid: uid as string, phase, generation };
}

export function validateUid(uid: unknown): string {
  if (typeof uid !== "string" || uid.length === 0) {
    throw new InvalidLedgerKeyError("uid", uid, "must be a non-empty string");
  }
  if (uid.length > MAX_UID_LENGTH || uid.trim() !== uid) {
    throw new InvalidLedgerKeyError("uid", uid, `must have no surrounding spaces and at most ${MAX_UID_LENGTH} characters`);
  }
  return uid;
}

/** Sort key within a DVM's partition: `0000000003#CreateDestinationPVCs`. */
export function phaseKeyOf(key: Pick<LedgerKey, "phase" | "generation">): string {
  return `${String(key.generation).padStart(GENERATION_DIGITS, "0")}#${key.phase}`;
}

export function parsePhaseKey(phaseKey: string): { phase: PhaseName; generation: number } | undefined {
  const match = /^(\d+)#(.+)$/.exec(phaseKey);
  if (!match || !isPhaseName(match[2])) return undefined;
  return { generation: Number(match[1]), phase: match[2] };
}
