/**
 * Errors the CLI shows as one line naming what went wrong and how to fix it, with exit code 1; never a
 * stack trace. Everything thrown below the commands is translated here.
 */
import { ControllerError, dispositionOf } from "../contracts/controllerError";
import { KubeApiError } from "../kube/errors";
import { LedgerError } from "../ledger/errors";
import { errorText } from "../lib/errorMessage";

export class CliError extends ControllerError {
  override readonly name: string = "CliError";
  /** Already explained to the user: the command cannot go on as it was given. */
  readonly disposition = "terminal";
  constructor(
    message: string,
    readonly exitCode = 1,
  ) {
    super(message);
  }
}

/** Where the CLI was talking to when something failed, for the message. */
export interface ErrorContext {
  /** The API server URL, once a kubeconfig was loaded. */
  server?: string;
  /** How the DynamoDB endpoint was chosen, e.g. "http://localhost:8000" or "AWS (region eu-west-1)". */
  dynamoEndpoint?: string;
  table?: string;
}

type ErrorLike = { name?: unknown; message?: unknown; code?: unknown; cause?: unknown; $metadata?: { httpStatusCode?: unknown } };

function causes(error: unknown): ErrorLike[] {
  const chain: ErrorLike[] = [];
  let current: unknown = error;
  while (typeof current === "object" && current !== null && chain.length < 6) {
    chain.push(current as ErrorLike);
    current = (current as ErrorLike).cause;
  }
  return chain;
}

function firstLine(text: string): string {
  return text.split("\n")[0]!.trim();
}

/**
 * The network part of a failed request: "…failed, reason: connect ECONNREFUSED 127.0.0.1:6443" or
 * "host: discover …: connect ECONNREFUSED 127.0.0.1:6443" → "connect ECONNREFUSED 127.0.0.1:6443".
 */
function networkReason(message: string): string {
  const line = firstLine(message);
  const reason = /reason: (.*)$/.exec(line)?.[1] ?? /(?:^|: )((?:connect |getaddrinfo |read |write )?E[A-Z]{3,}\b.*)$/.exec(line)?.[1];
  return reason ?? line.split(": ").pop()!;
}

export function explainKubeError(error: KubeApiError, context: ErrorContext): CliError {
  const server = context.server ?? "the configured API server";
  const detail = firstLine(error.message);
  if (error.statusCode === undefined) {
    return new CliError(`cannot reach the Kubernetes API server at ${server} (${networkReason(error.message)}): check --kubeconfig/--context or KUBECONFIG`);
  }
  if (error.statusCode === 401) {
    return new CliError(`the API server at ${server} rejected the credentials (401 Unauthorized): check the user of the kubeconfig context`);
  }
  if (error.statusCode === 403) {
    return new CliError(`not allowed by the API server at ${server}: ${detail}`);
  }
  return new CliError(`${detail} (HTTP ${error.statusCode})`);
}

export function explainLedgerError(error: unknown, context: ErrorContext): CliError | undefined {
  const chain = causes(error);
  if (!chain.some((e) => e instanceof LedgerError)) return undefined;
  const endpoint = context.dynamoEndpoint ?? "DynamoDB";
  const table = context.table ?? "?";
  const names = chain.map((e) => (typeof e.name === "string" ? e.name : ""));
  const deepest = chain[chain.length - 1]!;
  const detail = firstLine(typeof deepest.message === "string" ? deepest.message : String(deepest));
  if (names.includes("ResourceNotFoundException")) {
    return new CliError(`ledger table "${table}" not found at ${endpoint}: check --table (LEDGER_TABLE_NAME) and --dynamodb-endpoint`);
  }
  if (names.some((n) => /Credentials|UnrecognizedClient|InvalidSignature|MissingAuthenticationToken/i.test(n)) || /credential/i.test(detail)) {
    return new CliError(`DynamoDB at ${endpoint} did not accept the AWS credentials (${detail}): set AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY`);
  }
  if (/region is missing/i.test(detail)) {
    return new CliError(`no AWS region for DynamoDB: set AWS_REGION (or pass --dynamodb-endpoint for a local DynamoDB)`);
  }
  // The ledger's only retryable error is DynamoDB unreachable or throttled through every retry.
  if (chain.some((e) => dispositionOf(e) === "retryable") || names.includes("TimeoutError")) {
    return new CliError(`cannot reach DynamoDB at ${endpoint} for table "${table}" (${detail}): check --dynamodb-endpoint (AWS_ENDPOINT_URL_DYNAMODB)`);
  }
  return new CliError(`ledger table "${table}" at ${endpoint}: ${detail}`);
}

/** Any error as one line; CliErrors pass through. */
export function explainError(error: unknown, context: ErrorContext): CliError {
  if (error instanceof CliError) return error;
  if (error instanceof KubeApiError) return explainKubeError(error, context);
  const ledger = explainLedgerError(error, context);
  if (ledger) return ledger;
  const message = errorText(error);
  return new CliError(firstLine(message) || "unexpected error");
}
