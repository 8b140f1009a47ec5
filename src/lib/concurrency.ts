/**
 * `fn` over every item, at most `limit` at once, results in the items' order. Once `signal` aborts (a
 * phase body's deadline) no further item starts and the abort's reason is thrown: the work already sent
 * is let finish, nothing new is begun that the lease no longer covers. The first failure stops the
 * others from starting more items and is thrown.
 */
export async function mapConcurrently<T, R>(items: readonly T[], limit: number, fn: (item: T) => Promise<R>, signal?: AbortSignal): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  let failed = false;
  const worker = async (): Promise<void> => {
    while (next < items.length && !failed) {
      const index = next++;
      try {
        signal?.throwIfAborted();
        results[index] = await fn(items[index]!);
      } catch (error) {
        failed = true;
        throw error;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, worker));
  return results;
}
