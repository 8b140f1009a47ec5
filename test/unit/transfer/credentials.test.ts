import { describe, expect, it } from "vitest";
import { TransferConfigError } from "../../../src/transfer/configText";
import { generateRsyncPassword, RSYNC_PASSWORD_MIN_LENGTH, rsyncSecretsFile } from "../../../src/transfer/credentials";

describe("generateRsyncPassword", () => {
  it("is 48 base62 characters by default", () => {
    const password = generateRsyncPassword();
    expect(password).toMatch(/^[A-Za-z0-9]{48}$/);
  });

  it("honours a longer length and refuses anything under 32", () => {
    expect(generateRsyncPassword(100)).toHaveLength(100);
    expect(generateRsyncPassword(RSYNC_PASSWORD_MIN_LENGTH)).toHaveLength(32);
    expect(() => generateRsyncPassword(31)).toThrow(TransferConfigError);
    expect(() => generateRsyncPassword(6)).toThrow(/at least 32/);
    expect(() => generateRsyncPassword(40.5)).toThrow(TransferConfigError);
  });

  it("does not repeat and uses the whole alphabet", () => {
    const passwords = Array.from({ length: 200 }, () => generateRsyncPassword());
    expect(new Set(passwords).size).toBe(200);
    const seen = new Set(passwords.join(""));
    expect(seen.size).toBe(62);
  });
});

describe("rsyncSecretsFile", () => {
  it("is user:password and a newline", () => {
    expect(rsyncSecretsFile("dvm", "s3cret")).toBe("dvm:s3cret\n");
  });

  it("refuses users and passwords that would break the line format", () => {
    expect(() => rsyncSecretsFile("a:b", "x")).toThrow(/user/);
    expect(() => rsyncSecretsFile("", "x")).toThrow(/user/);
    expect(() => rsyncSecretsFile("dvm", "two\nlines")).toThrow(/password/);
    expect(() => rsyncSecretsFile("dvm", "")).toThrow(/password/);
  });
});
