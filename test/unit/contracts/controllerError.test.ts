/**
 * The error base: every project error carries the disposition its readers act on (the phase function's
 * handler, the runner, the trigger, the event publisher), and anything else thrown reads as unexpected.
 */
import { describe, expect, it } from "vitest";
import { TriggerUnavailableError } from "../../../src/aws/triggerHandler";
import { CliError } from "../../../src/cli/errors";
import { ConfigurationError } from "../../../src/config/error";
import { ControllerError, dispositionOf, type ErrorDisposition } from "../../../src/contracts/controllerError";
import { MigrationInputError } from "../../../src/contracts/inputError";
import { SendError } from "../../../src/events/publisher";
import { KubeApiError } from "../../../src/kube/errors";
import { ClusterCredentialsUnavailableError } from "../../../src/kube/resolver";
import { LostClaimError, OutcomeTooLargeError } from "../../../src/ledger";
import { InvalidLedgerKeyError, LedgerError, LedgerUnavailableError } from "../../../src/ledger/errors";
import { LeaderElectionConfigError } from "../../../src/relay/leaderElection";
import { LambdaInvokeError, RemoteFunctionError } from "../../../src/relay/transport";
import { CleanupGaveUpError } from "../../../src/runner/credentialGrace";
import { LeaseDeadlineError } from "../../../src/runner/lease";
import { TransferConfigError } from "../../../src/transfer/configText";

const KEY = { uid: "u-1", phase: "Started", generation: 1 } as const;
const kube = (statusCode: number | undefined, reason?: string) => new KubeApiError(`read: HTTP ${statusCode}`, statusCode, reason);

describe("the disposition of each project error", () => {
  it.each<[string, ControllerError, ErrorDisposition]>([
    ["MigrationInputError", new MigrationInputError(["spec.x: is required"]), "input"],
    ["ClusterCredentialsUnavailableError", new ClusterCredentialsUnavailableError(["source: Secret kc not found"]), "input"],
    [
      "CleanupGaveUpError",
      new CleanupGaveUpError(["cleanup: gave up"], { type: "CleanupIncomplete", status: "True", category: "Warn", reason: "x", message: "y" }),
      "input",
    ],
    ["ConfigurationError", new ConfigurationError("LEDGER_TABLE_NAME is not set", "LEDGER_TABLE_NAME"), "unexpected"],
    ["LedgerError", new LedgerError("malformed ledger item"), "unexpected"],
    ["InvalidLedgerKeyError", new InvalidLedgerKeyError("uid", "a#b", "must not contain #"), "terminal"],
    ["LedgerUnavailableError", new LedgerUnavailableError("claim", 5, new Error("slow down")), "retryable"],
    ["LostClaimError", new LostClaimError(KEY, 2, { attempt: 3, state: "RUNNING" }), "superseded"],
    ["OutcomeTooLargeError", new OutcomeTooLargeError(500_000, 350_000), "terminal"],
    ["LeaseDeadlineError", new LeaseDeadlineError(60_000), "retryable"],
    ["LambdaInvokeError", new LambdaInvokeError("phase", 500), "retryable"],
    ["RemoteFunctionError", new RemoteFunctionError("phase", "Unhandled", "boom"), "retryable"],
    ["LeaderElectionConfigError", new LeaderElectionConfigError("leader election identity: must not be empty"), "unexpected"],
    ["SendError, retryable", new SendError("PutEvents: throttled", true), "retryable"],
    ["SendError, refused", new SendError("PutEvents: malformed entry", false), "terminal"],
    ["TransferConfigError", new TransferConfigError("module", "is not a module name"), "terminal"],
    ["TriggerUnavailableError", new TriggerUnavailableError({ status: 503, body: { error: "unavailable", message: "try again" } }), "retryable"],
    ["CliError", new CliError("DVM shop/move not found"), "terminal"],
  ])("%s: %s", (_name, error, disposition) => {
    expect(error).toBeInstanceOf(ControllerError);
    expect(error.disposition).toBe(disposition);
    expect(dispositionOf(error)).toBe(disposition);
  });

  it.each<[number | undefined, string | undefined, ErrorDisposition]>([
    [undefined, undefined, "retryable"],
    [429, "TooManyRequests", "retryable"],
    [500, "InternalError", "retryable"],
    [503, "ServiceUnavailable", "retryable"],
    [409, "Conflict", "retryable"],
    [409, "AlreadyExists", "unexpected"],
    [401, "Unauthorized", "unexpected"],
    [403, "Forbidden", "unexpected"],
    [404, "NotFound", "unexpected"],
    [410, "Gone", "unexpected"],
    [422, "Invalid", "unexpected"],
  ])("KubeApiError %s %s: %s", (statusCode, reason, disposition) => {
    expect(dispositionOf(kube(statusCode, reason))).toBe(disposition);
  });

  it("keeps a conflict apart from transient trouble: retried by a fresh read, not because the server is unwell", () => {
    const conflict = kube(409, "Conflict");
    expect(conflict).toMatchObject({ isConflict: true, isTransient: false, disposition: "retryable" });
    expect(kube(503)).toMatchObject({ isConflict: false, isTransient: true, disposition: "retryable" });
  });
});

describe("dispositionOf", () => {
  it.each<[string, unknown]>([
    ["an Error", new Error("boom")],
    ["a TypeError", new TypeError("x is undefined")],
    ["an AWS SDK error", Object.assign(new Error("slow down"), { name: "ThrottlingException", $metadata: { httpStatusCode: 400 } })],
    ["a string", "boom"],
    ["undefined", undefined],
    ["null", null],
    ["an object claiming a disposition", { disposition: "retryable", message: "not ours" }],
  ])("reads %s from outside the project as unexpected", (_what, thrown) => {
    expect(dispositionOf(thrown)).toBe("unexpected");
  });
});
