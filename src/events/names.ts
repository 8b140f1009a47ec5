/**
 * The name of the DVM an event asks for, derived from the event's identity only. CloudEvents says
 * `source` + `id` identify an event; a redelivery carries the same pair, so it maps to the same name
 * and the API server's AlreadyExists is what makes creation idempotent (no lookup table, no race).
 */
import { createHash } from "node:crypto";
import { DEFAULT_NAME_PREFIX } from "./schema";

/** Hex digits of the hash in the name: 40 bits, so a collision needs ~10^6 events under one prefix. */
export const NAME_HASH_LENGTH = 10;

/** The annotations that record which event a DVM was created for (and tell a collision from a redelivery). */
export const EVENT_ANNOTATION = {
  source: "events.dvm-serverless.io/source",
  id: "events.dvm-serverless.io/id",
  type: "events.dvm-serverless.io/type",
} as const;

export interface EventIdentity {
  source: string;
  id: string;
}

/**
 * `<prefix>-<first 10 hex of sha256(source + "\n" + id)>`. The newline separates the two without
 * ambiguity because a source is a URI reference, which cannot contain one (the SDK's validation refuses it).
 */
export function dvmNameForEvent(event: EventIdentity, prefix: string = DEFAULT_NAME_PREFIX): string {
  const digest = createHash("sha256").update(`${event.source}\n${event.id}`, "utf8").digest("hex");
  return `${prefix}-${digest.slice(0, NAME_HASH_LENGTH)}`;
}

/** Whether an existing DVM's annotations say it was created for this very event. */
export function createdForEvent(annotations: Record<string, string> | undefined, event: EventIdentity): boolean {
  return annotations?.[EVENT_ANNOTATION.source] === event.source && annotations?.[EVENT_ANNOTATION.id] === event.id;
}
