/**
 * A value loaded once per container (Lambda reuses a container for many invocations). A failed load is
 * not cached: the next invocation tries again instead of failing for the container's whole life.
 */
export function onceAsync<T>(load: () => Promise<T>): () => Promise<T> {
  let pending: Promise<T> | undefined;
  return () => {
    pending ??= load().catch((error: unknown) => {
      pending = undefined;
      throw error;
    });
    return pending;
  };
}
