/**
 * Forwards reconcile requests by invoking a Lambda function. "Event" (the default) is fire-and-forget:
 * Lambda queues the invocation and answers 202, and retries it itself on function errors; the relay
 * then polls by the itinerary. "RequestResponse" waits for the function and returns its RunResult, so
 * local runs (LocalStack, serverless-offline) get exact requeue delays.
 *
 * The endpoint is the SDK's to resolve: AWS_ENDPOINT_URL_LAMBDA or AWS_ENDPOINT_URL point it at a
 * local stand-in, as for every other AWS client in this project.
 */

import { type InvocationType, InvokeCommand, LambdaClient, type LambdaClientConfig } from "@aws-sdk/client-lambda";
import type { ReconcileRequest, RunResult } from "../contracts/request";
import { isPhaseName, type PhaseName } from "../dvm/itinerary";
import { type Logger, silentLogger } from "../lib/log";
import { parseRunResult } from "../relay/runResult";
import type { ForwardContext, RelayTransport } from "../relay/transport";
import { LambdaInvokeError, RemoteFunctionError } from "../relay/transport";

export type RelayInvocationType = Extract<InvocationType, "Event" | "RequestResponse">;

/** Where the relay's Lambda client connects (tests and local stand-ins; the deployed relay resolves its own). */
export type LambdaEndpoint = Pick<LambdaClientConfig, "endpoint" | "region" | "credentials">;

export interface LambdaTransportOptions {
  /** The function (name, ARN or partial ARN) that handles `request`; see sharedFunction / functionPerPhase. */
  functionFor: (request: ReconcileRequest, context: ForwardContext) => string;
  /** "Event" (default): fire-and-forget, 202 means accepted. "RequestResponse": wait for the RunResult. */
  invocationType?: RelayInvocationType;
  /** Default: a LambdaClient configured from the environment (region, credentials, endpoint), or from `endpoint`. */
  client?: LambdaClient;
  /** The Lambda endpoint, region and credentials, when not the SDK's own resolution (AWS_* variables, IRSA). */
  endpoint?: LambdaEndpoint;
  /** Function version or alias to invoke. */
  qualifier?: string;
  /** Where an unreadable RunResult is reported (default: silent). */
  log?: Logger;
}

/** One function handles every phase. */
export function sharedFunction(name: string): LambdaTransportOptions["functionFor"] {
  return () => name;
}

/**
 * One function per phase, named `${prefix}${phase}`. A DVM without a phase (not started yet) or with a
 * phase the itinerary does not know goes to `${prefix}Started`, which validates the migration.
 */
export function functionPerPhase(prefix: string): LambdaTransportOptions["functionFor"] {
  const first: PhaseName = "Started";
  return (_request, context) => `${prefix}${isPhaseName(context.phase) ? context.phase : first}`;
}

const decoder = new TextDecoder();
const encoder = new TextEncoder();

export class LambdaTransport implements RelayTransport {
  private readonly client: LambdaClient;
  private readonly invocationType: RelayInvocationType;
  private readonly log: Logger;

  constructor(private readonly options: LambdaTransportOptions) {
    this.client = options.client ?? new LambdaClient(options.endpoint ?? {});
    this.invocationType = options.invocationType ?? "Event";
    this.log = options.log ?? silentLogger;
  }

  async forward(request: ReconcileRequest, context: ForwardContext = {}): Promise<RunResult | undefined> {
    const functionName = this.options.functionFor(request, context);
    const response = await this.client.send(
      new InvokeCommand({
        FunctionName: functionName,
        InvocationType: this.invocationType,
        Payload: encoder.encode(JSON.stringify(request)),
        ...(this.options.qualifier ? { Qualifier: this.options.qualifier } : {}),
      }),
    );
    const payload = response.Payload ? decoder.decode(response.Payload) : "";
    if (response.FunctionError) {
      throw new RemoteFunctionError(functionName, response.FunctionError, errorDetail(payload));
    }
    if (this.invocationType === "Event") {
      if (response.StatusCode !== 202) throw new LambdaInvokeError(functionName, response.StatusCode);
      return undefined;
    }
    if (response.StatusCode !== 200) throw new LambdaInvokeError(functionName, response.StatusCode);
    return this.readRunResult(functionName, payload);
  }

  /**
   * A payload that is not a RunResult is reported and treated as "no result": the relay then polls by
   * the itinerary, which is always safe, instead of retrying a function that did its work.
   */
  private readRunResult(functionName: string, payload: string): RunResult | undefined {
    let value: unknown;
    try {
      value = JSON.parse(payload);
    } catch {
      this.log.warn("function returned a payload that is not JSON", { functionName, payload: payload.slice(0, 200) });
      return undefined;
    }
    const parsed = parseRunResult(value);
    if (parsed.ok) return parsed.result;
    this.log.warn("function returned something that is not a RunResult", { functionName, error: parsed.error });
    return undefined;
  }
}

/** Lambda's error payload is {errorType, errorMessage, trace}; show the message when there is one. */
function errorDetail(payload: string): string {
  try {
    const body = JSON.parse(payload) as { errorType?: unknown; errorMessage?: unknown };
    if (typeof body.errorMessage === "string") {
      return typeof body.errorType === "string" ? `${body.errorType}: ${body.errorMessage}` : body.errorMessage;
    }
  } catch {
    // not JSON: fall through to the raw text
  }
  return payload.slice(0, 500) || "(no payload)";
}
