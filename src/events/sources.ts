/**
 * Which event sources may ask for a migration (TRIGGER_ALLOWED_SOURCES): a comma-separated list of
 * exact sources, or prefixes ending in `*` ("https://ci.example.com/*"). Empty refuses every event (the
 * trigger warns about that once per container); "*" accepts any source and must be written out. The
 * source is what the sender claims: the route's IAM authorization and the EventBridge rule's source
 * pattern (serverless.yml) are the access control, this list the second check inside the function.
 */
import { type AllowList, parseAllowList } from "../lib/allowList";

export interface SourceAllowList extends AllowList {
  /** True when the list is empty: every event is refused. */
  readonly refusesAll: boolean;
}

export function parseSourceAllowList(text: string | undefined): SourceAllowList {
  const list = parseAllowList(text);
  return { ...list, refusesAll: list.patterns.length === 0 };
}

/** An EventBridge pattern value for `source`: exact strings, and { prefix } for "prefix*". */
export type EventBridgeSourceMatch = (string | { prefix: string })[];

/**
 * What the trigger's EventBridge rule matches on the event's source, so an event the function would
 * refuse never invokes it: "none" (empty list: the rule is disabled), "any" (a "*" entry), or the list.
 * @internal exported for its tests
 */
export function eventBridgeSourceMatch(list: SourceAllowList): "none" | "any" | EventBridgeSourceMatch {
  if (list.refusesAll) return "none";
  if (list.patterns.includes("*")) return "any";
  return list.patterns.map((pattern) => (pattern.endsWith("*") ? { prefix: pattern.slice(0, -1) } : pattern));
}
