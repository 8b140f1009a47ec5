import { describe, expect, it } from "vitest";
import { TransferConfigError } from "../../../src/transfer/configText";
import { generateRsyncPassword, moduleCredential, RSYNC_PASSWORD_MIN_LENGTH, rsyncSecretsFile } from "../../../src/transfer/credentials";

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
  it("is user:password and a newline, one line per credential", () => {
    expect(rsyncSecretsFile([{ user: "dvm", password: "s3cret" }])).toBe("dvm:s3cret\n");
    expect(
      rsyncSecretsFile([
        { user: "pvc-a", password: "x" },
        { user: "pvc-b", password: "y" },
      ]),
    ).toBe("pvc-a:x\npvc-b:y\n");
  });

  it("refuses users and passwords that would break the line format", () => {
    expect(() => rsyncSecretsFile([{ user: "a:b", password: "x" }])).toThrow(/user/);
    expect(() => rsyncSecretsFile([{ user: "", password: "x" }])).toThrow(/user/);
    expect(() => rsyncSecretsFile([{ user: "dvm", password: "two\nlines" }])).toThrow(/password/);
    expect(() => rsyncSecretsFile([{ user: "dvm", password: "" }])).toThrow(/password/);
  });
});

describe("moduleCredential", () => {
  const secret = "S".repeat(48);

  it("is the module's own user and a password derived from the migration's secret, the same every time", () => {
    const a = moduleCredential(secret, "pvc-aaaaaaaaaaaaaaaa");
    expect(a.user).toBe("pvc-aaaaaaaaaaaaaaaa");
    expect(a.password).toMatch(/^[0-9a-f]{64}$/);
    expect(moduleCredential(secret, "pvc-aaaaaaaaaaaaaaaa")).toEqual(a);
    // Another module, or another migration: another password; neither reveals the secret.
    expect(moduleCredential(secret, "pvc-bbbbbbbbbbbbbbbb").password).not.toBe(a.password);
    expect(moduleCredential("T".repeat(48), "pvc-aaaaaaaaaaaaaaaa").password).not.toBe(a.password);
    expect(a.password).not.toContain(secret);
    expect(() => moduleCredential("short", "pvc-a")).toThrow(/migrationSecret/);
  });
});
