/** No quiet skips: a missing prerequisite fails under CI, and every skip says why (test/support/requirements.ts). */
import { afterEach, describe, expect, it, vi } from "vitest";
import { inCi, missing, otherEnvironment } from "../../support/requirements";

describe("test requirements", () => {
  afterEach(() => vi.restoreAllMocks());

  it("fails a suite whose prerequisite is missing under CI, naming it and how to get it", () => {
    expect(() => missing("DynamoDB", undefined, "bash infra/dev/dynamodb/fetch.sh", { CI: "true" })).toThrow(/DynamoDB is missing in CI.*fetch\.sh/);
    expect(missing("DynamoDB", "http://127.0.0.1:8000", "…", { CI: "true" })).toBe(false);
  });

  it("skips outside CI, printing what is missing", () => {
    const warn = vi.spyOn(console, "warn").mockImplementation(() => undefined);
    expect(missing("shellcheck", false, "apt-get install shellcheck", {})).toBe(true);
    expect(warn).toHaveBeenCalledWith(expect.stringMatching(/\[skipped\] shellcheck is missing: apt-get install shellcheck/));
  });

  it("skips a test about another environment with a printed reason, also under CI", () => {
    const warn = vi.spyOn(console, "warn").mockImplementation(() => undefined);
    expect(otherEnvironment("clusters this run started", false, "kwok exists only there")).toBe(true);
    expect(warn).toHaveBeenCalledWith(expect.stringMatching(/only for clusters this run started: kwok exists only there/));
    expect(otherEnvironment("clusters this run started", true, "…")).toBe(false);
  });

  it("reads CI as CI systems set it", () => {
    expect(inCi({ CI: "true" })).toBe(true);
    expect(inCi({ CI: "1" })).toBe(true);
    expect(inCi({ CI: "false" })).toBe(false);
    expect(inCi({})).toBe(false);
  });
});
