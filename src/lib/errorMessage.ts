/**
 * The one error formatter. errorMessage names the class, for a log line or another error's message
 * ("TypeError: x is undefined"); errorText gives the message alone, for text that already says what
 * failed or that a user reads (a status condition, a reply, a CLI line).
 */
export function errorMessage(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}

export function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
