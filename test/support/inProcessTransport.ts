import type { ReconcileRequest, RunResult } from "../../src/contracts/request";
import type { ForwardContext, RelayTransport } from "../../src/relay/transport";

/**
 * Runs the phase function in this process: for tests and benches (what ships forwards through Lambda,
 * src/aws/lambdaTransport.ts). A function that resolves
 * undefined stands in for a fire-and-forget transport.
 */
export class InProcessTransport implements RelayTransport {
  constructor(private readonly run: (request: ReconcileRequest, context?: ForwardContext) => Promise<RunResult | undefined>) {}

  forward(request: ReconcileRequest, context?: ForwardContext): Promise<RunResult | undefined> {
    return this.run(request, context);
  }
}
