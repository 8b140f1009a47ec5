/**
 * What the relay takes from the objects it watches. Objects enter as `unknown`; only identity and the
 * phase are read. The relay never judges the status beyond that: a DVM with a garbage status is still
 * forwarded, because the function reads it fresh and records what is wrong in its conditions.
 */

import { z } from "zod";
import { LABEL } from "../contracts/labels";
import { fieldIssues, formatIssue } from "../lib/issues";

/** A DVM as the relay indexes it: enough to build a request and to pick a requeue delay. */
export interface ObservedDvm {
  uid: string;
  namespace: string;
  name: string;
  generation?: number;
  resourceVersion: string;
  /** status.phase when it is a string; any other status is left for the function to judge. */
  phase?: string;
  /** metadata.deletionTimestamp is set: the function must clean up and release the finalizer. */
  deleting?: boolean;
}

const DvmIdentitySchema = z.object({
  metadata: z.object({
    uid: z.string().min(1),
    namespace: z.string().min(1),
    name: z.string().min(1),
    resourceVersion: z.string().min(1),
    generation: z.number().int().min(0).optional(),
    deletionTimestamp: z.string().optional(),
  }),
});

export type ObservedDvmParse = { ok: true; dvm: ObservedDvm; statusProblem?: string } | { ok: false; error: string };

/** Reads a DVM from a watch event or list item; fails (naming the field) only when identity is missing. */
export function parseObservedDvm(object: unknown): ObservedDvmParse {
  const parsed = DvmIdentitySchema.safeParse(object);
  if (!parsed.success) {
    const [issue] = fieldIssues("", parsed.error, "(object)");
    return { ok: false, error: issue ? formatIssue(issue) : "not an object" };
  }
  const { uid, namespace, name, resourceVersion, generation, deletionTimestamp } = parsed.data.metadata;
  const status = (object as { status?: unknown }).status;
  const dvm: ObservedDvm = {
    uid,
    namespace,
    name,
    resourceVersion,
    ...(generation !== undefined ? { generation } : {}),
    ...(deletionTimestamp !== undefined ? { deleting: true } : {}),
  };
  if (status === undefined || status === null) return { ok: true, dvm };
  if (typeof status !== "object" || Array.isArray(status)) return { ok: true, dvm, statusProblem: "status is not an object" };
  const phase = (status as { phase?: unknown }).phase;
  if (phase === undefined) return { ok: true, dvm };
  if (typeof phase !== "string") return { ok: true, dvm, statusProblem: "status.phase is not a string" };
  return { ok: true, dvm: { ...dvm, phase } };
}

/** The DVM uid an owned object (pod, progress record) carries in its label, if any. */
export function ownerUidOf(object: unknown): string | undefined {
  const labels = (object as { metadata?: { labels?: unknown } } | null | undefined)?.metadata?.labels;
  if (typeof labels !== "object" || labels === null) return undefined;
  const uid = (labels as Record<string, unknown>)[LABEL.dvmUid];
  return typeof uid === "string" && uid.length > 0 ? uid : undefined;
}

/** "namespace/name" of any object, for logs and request reasons. */
export function objectKey(object: unknown): string {
  const metadata = (object as { metadata?: { namespace?: unknown; name?: unknown } } | null | undefined)?.metadata;
  const name = typeof metadata?.name === "string" ? metadata.name : "?";
  return typeof metadata?.namespace === "string" ? `${metadata.namespace}/${name}` : name;
}

/** A DVM's overall progress (status.progress): three numbers, for the relay's metrics; nothing else is kept. */
export interface DvmProgress {
  bytesTransferred?: number;
  totalBytes?: number;
  bytesPerSecond?: number;
}

/** status.progress's numbers from a watch event's DVM; a field that is not a finite number >= 0 is left out. */
export function dvmProgressOf(object: unknown): DvmProgress | undefined {
  const progress = (object as { status?: { progress?: unknown } } | null | undefined)?.status?.progress;
  if (typeof progress !== "object" || progress === null) return undefined;
  const read = (field: keyof DvmProgress) => {
    const value = (progress as Record<string, unknown>)[field];
    return typeof value === "number" && Number.isFinite(value) && value >= 0 ? { [field]: value } : {};
  };
  return { ...read("bytesTransferred"), ...read("totalBytes"), ...read("bytesPerSecond") };
}
