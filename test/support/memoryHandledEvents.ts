/** The trigger's handled-event records in memory, for unit tests of the trigger's decisions. */
import { type EventIdentity, type HandledEvent, type HandledEvents, handledEventKey } from "../../src/events/handledEvents";

export class MemoryHandledEvents implements HandledEvents {
  readonly records = new Map<string, HandledEvent>();

  async recall(event: EventIdentity): Promise<HandledEvent | undefined> {
    return this.records.get(handledEventKey(event));
  }

  async remember(event: EventIdentity, dvm: HandledEvent): Promise<void> {
    const key = handledEventKey(event);
    if (!this.records.has(key)) this.records.set(key, dvm);
  }
}
