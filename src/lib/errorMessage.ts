/** An error as one line for a log, a status or another error's message: "TypeError: x is undefined". */
export function errorMessage(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}
