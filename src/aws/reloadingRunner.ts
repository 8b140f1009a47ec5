/**
 * The phase function's runner is built once per container from the host kubeconfig (an SSM parameter or
 * the KUBECONFIG file). When the operator rotates that credential, a warm container would keep the old
 * one for its whole life. A 401 from an API server says the credential no longer works: the runner is
 * built again from a fresh load of the kubeconfig and the invocation is tried once more. Trying again is
 * safe: an invocation stopped by an error gave its claim back or recorded nothing the ledger does not
 * fence (src/runner/runner.ts).
 */
import type { FlushingRunner } from "../events/runnerEvents";
import { KubeApiError } from "../kube/errors";
import type { Logger } from "../lib/log";

export function rebuiltOnUnauthorized(build: () => Promise<FlushingRunner>, log: Logger): () => Promise<FlushingRunner> {
  let current: Promise<FlushingRunner> | undefined;
  const load = (): Promise<FlushingRunner> => {
    const loading = build();
    current = loading;
    // A failed build is not kept: the next invocation builds again.
    loading.catch(() => {
      if (current === loading) current = undefined;
    });
    return loading;
  };
  const runner: FlushingRunner = {
    run: async (request) => (await runner.runWithStats(request)).result,
    runWithStats: async (request, options) => {
      const used = current ?? load();
      try {
        return await (await used).runWithStats(request, options);
      } catch (error) {
        if (!(error instanceof KubeApiError && error.statusCode === 401)) throw error;
        log.warn("the API server refused the host kubeconfig (401): loading it again and trying once more");
        // Another invocation may have reloaded it meanwhile: use that one.
        const reloaded = current === used ? load() : (current ?? load());
        return (await reloaded).runWithStats(request, options);
      }
    },
  };
  return async () => {
    await (current ?? load());
    return runner;
  };
}
