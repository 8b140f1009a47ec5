/**
 * Free text (error messages above all) bounded in bytes before it enters a record with a size limit: a
 * DVM's status or condition (etcd), a ledger item (DynamoDB), an event. Bytes, not characters: the
 * stores count UTF-8 bytes, and one character may take four.
 */

/** Marks a cut, so a reader knows the text went on. */
const CUT_MARK = "…";
const encoder = new TextEncoder();

export function utf8Bytes(text: string): number {
  return encoder.encode(text).length;
}

/** `text` cut to at most `maxBytes` UTF-8 bytes on a character boundary, ending in "…" when cut. */
export function truncateUtf8(text: string, maxBytes: number): string {
  if (utf8Bytes(text) <= maxBytes) return text;
  const room = maxBytes - utf8Bytes(CUT_MARK);
  if (room <= 0) return "";
  let bytes = 0;
  let end = 0;
  for (const char of text) {
    const size = utf8Bytes(char);
    if (bytes + size > room) break;
    bytes += size;
    end += char.length;
  }
  return `${text.slice(0, end)}${CUT_MARK}`;
}

/**
 * Error texts bounded in count and each in bytes. Past `maxCount` the last kept entry says how many were
 * left out, so a reader knows the list is not whole.
 */
export function boundedTexts(texts: readonly string[], limits: { maxCount: number; maxBytes: number }): string[] {
  const cut = texts.map((t) => truncateUtf8(t, limits.maxBytes));
  if (cut.length <= limits.maxCount) return cut;
  const kept = cut.slice(0, Math.max(0, limits.maxCount - 1));
  return [...kept, `... and ${cut.length - kept.length} more`];
}
