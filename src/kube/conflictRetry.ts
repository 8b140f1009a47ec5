/**
 * Read, decide and write guarded by the read's resourceVersion; when someone wrote in between (a 409),
 * read and decide again. The one retry loop of every read-modify-write on objects others also write.
 */
import { KubeApiError } from "./errors";

/** Attempts of a guarded write before the last conflict is thrown (it is transient: the caller retries later). */
export const GUARDED_WRITE_ATTEMPTS = 5;

/**
 * Runs `step(attempt)` (1-based: attempt 1 may use a copy read before, later ones must read again) until
 * it returns without a conflict; after `attempts` conflicts in a row the last one is thrown as it came.
 */
export async function retryOnConflict<R>(step: (attempt: number) => Promise<R>, attempts = GUARDED_WRITE_ATTEMPTS): Promise<R> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await step(attempt);
    } catch (error) {
      if (!(error instanceof KubeApiError && error.isConflict) || attempt >= attempts) throw error;
    }
  }
}
