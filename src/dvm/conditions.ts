/**
 * Conditions as upstream models them: a category says what a condition blocks, `durable` ones survive
 * phase changes, and lastTransitionTime moves whenever anything about the condition changes.
 */
import { truncateUtf8 } from "../lib/textBounds";
import { MAX_CONDITION_MESSAGE_BYTES } from "./limits";
import type { Condition, ConditionCategory } from "./types";

export const CONDITION = {
  Running: "Running",
  Ready: "Ready",
  Succeeded: "Succeeded",
  Failed: "Failed",
  InvalidSpec: "InvalidSpec",
  PhaseRetrying: "PhaseRetrying",
  /** The stored status does not parse: the DVM is stopped rather than started again from the beginning. */
  StatusUnreadable: "StatusUnreadable",
  /** rsync finished but some source files vanished while it ran (exit code 24): a warning, not a failure. */
  RsyncFilesVanished: "RsyncFilesVanished",
  /** rsync copied everything but the times or mode of a destination volume's root folder, which its unprivileged daemon may not set. */
  RsyncRootFolderAttributesNotSet: "RsyncRootFolderAttributesNotSet",
  RsyncEndpointNotReady: "RsyncEndpointNotReady",
  RsyncTransferPodsPending: "RsyncTransferPodsPending",
  RsyncClientPodsPending: "RsyncClientPodsPending",
  /** A kubeconfig Secret is missing or its credential refused; since when (src/runner/credentialGrace.ts). */
  ClusterCredentialsUnavailable: "ClusterCredentialsUnavailable",
  /** Cleanup could not reach a cluster and names what it left there. */
  CleanupIncomplete: "CleanupIncomplete",
  /** spec.quiesce: a workload's record could not be read back, so it was left for someone to restore. */
  ApplicationsNotRestored: "ApplicationsNotRestored",
} as const;

export type ConditionInput = Omit<Condition, "lastTransitionTime">;

function sameCondition(a: Condition, b: ConditionInput): boolean {
  return a.status === b.status && a.category === b.category && a.reason === b.reason && a.message === b.message && Boolean(a.durable) === Boolean(b.durable);
}

/**
 * Sets (or replaces) the condition of that type, keeping its timestamp when nothing changed. Its message
 * is cut to MAX_CONDITION_MESSAGE_BYTES: one that lists PVCs or quotes an error cannot grow the DVM.
 */
export function setCondition(conditions: readonly Condition[], raw: ConditionInput, nowIso: string): Condition[] {
  const input = raw.message === undefined ? raw : { ...raw, message: truncateUtf8(raw.message, MAX_CONDITION_MESSAGE_BYTES) };
  const existing = conditions.find((c) => c.type === input.type);
  const next: Condition = existing && sameCondition(existing, input) ? existing : { ...input, lastTransitionTime: nowIso };
  return [...conditions.filter((c) => c.type !== input.type), next];
}

export function removeCondition(conditions: readonly Condition[], type: string): Condition[] {
  return conditions.filter((c) => c.type !== type);
}

export function findCondition(conditions: readonly Condition[] | undefined, type: string): Condition | undefined {
  return conditions?.find((c) => c.type === type);
}

const BLOCKERS: ReadonlySet<ConditionCategory> = new Set(["Critical", "Error"]);

export function hasBlocker(conditions: readonly Condition[] | undefined): boolean {
  return (conditions ?? []).some((c) => c.status === "True" && BLOCKERS.has(c.category));
}

/** On a phase change the previous phase's warnings are dropped; durable conditions stay. */
export function keepDurable(conditions: readonly Condition[]): Condition[] {
  return conditions.filter((c) => c.durable);
}
