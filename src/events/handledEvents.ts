/**
 * The trigger's memory of the events it handled, kept beyond the life of the DVMs they created. The DVM's
 * name (derived from the event's source and id) makes a redelivery idempotent only while that DVM exists;
 * once it is deleted, a replayed CutOver (--delete) or Rollback would migrate again and overwrite what was
 * written since. So each handled event is recorded (in the ledger table, src/ledger/handledEventRecords.ts)
 * for longer than the trigger accepts an event's age, and a replay is answered from the record.
 */
import { createHash } from "node:crypto";

/** What names an event: CloudEvents' source + id is unique per event (the spec's own rule). */
export interface EventIdentity {
  source: string;
  id: string;
}

export interface HandledEvent {
  namespace: string;
  name: string;
  /** The uid of the DVM the event created. */
  uid: string;
  /** When the event was first handled, ISO 8601. */
  handledAt: string;
}

export interface HandledEvents {
  /** The record of `event`, if it was handled before (and the record has not expired). */
  recall(event: EventIdentity): Promise<HandledEvent | undefined>;
  /** Records that `event` created `dvm`; keeps the first record when one exists. */
  remember(event: EventIdentity, dvm: HandledEvent): Promise<void>;
}

/** A fixed-length key that no DVM uid can equal (uids have no '#'), whatever the source and id hold. */
export function handledEventKey(event: EventIdentity): string {
  return `event#${createHash("sha256").update(event.source).update("\0").update(event.id).digest("hex")}`;
}
