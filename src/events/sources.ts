/**
 * Which event sources may ask for a migration (TRIGGER_ALLOWED_SOURCES): a comma-separated list of
 * exact sources, or prefixes ending in `*` ("https://ci.example.com/*"). Empty allows every source;
 * the trigger warns about that once per container. The source is what the sender claims: this is a
 * guard against mistakes and misrouted events, the route's IAM authorization is the access control.
 */
export interface SourceAllowList {
  /** True when no list was given: every source is allowed. */
  readonly allowsAll: boolean;
  readonly patterns: readonly string[];
  allows(source: string): boolean;
}

export function parseSourceAllowList(text: string | undefined): SourceAllowList {
  const patterns = (text ?? "")
    .split(",")
    .map((p) => p.trim())
    .filter((p) => p !== "");
  const allowsAll = patterns.length === 0;
  return {
    allowsAll,
    patterns,
    allows: (source) =>
      allowsAll || patterns.some((pattern) => (pattern.endsWith("*") ? source.startsWith(pattern.slice(0, -1)) : source === pattern)),
  };
}
