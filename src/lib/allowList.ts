/**
 * An operator's allow-list: exact values, or prefixes ending in `*` ("quay.io/konveyor/*"). One reading
 * for every list the controller takes (event sources, admin namespaces, transfer images), so `*` means
 * the same thing everywhere. An empty list allows nothing: allowing everything must be asked for ("*").
 */
export interface AllowList {
  readonly patterns: readonly string[];
  allows(value: string): boolean;
}

/** From a comma-separated setting; blanks around and between entries are ignored. */
export function parseAllowList(text: string | undefined): AllowList {
  return allowList((text ?? "").split(","));
}

export function allowList(patterns: readonly string[]): AllowList {
  const kept = patterns.map((p) => p.trim()).filter((p) => p !== "");
  return {
    patterns: kept,
    allows: (value) => kept.some((pattern) => (pattern.endsWith("*") ? value.startsWith(pattern.slice(0, -1)) : value === pattern)),
  };
}
