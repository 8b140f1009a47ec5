/**
 * The configuration layer's own rules: each variable name once, and a bad setting is a ConfigurationError
 * that names the variable. (Only the configuration modules read process.env: a lint rule, biome.json,
 * shown to bite in test/unit/ci/lintRules.test.ts.)
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { ENV, logLevel, parseEnvironment, wholeNumber } from "../../../src/config/environment";
import { ConfigurationError } from "../../../src/config/error";

const ROOT = join(import.meta.dirname, "..", "..", "..");

describe("the environment", () => {
  it("has each variable name once", () => {
    const names = Object.values(ENV);
    expect(new Set(names).size).toBe(names.length);
  });
});

describe("parseEnvironment", () => {
  const schema = z.object({ [ENV.relayHealthPort]: wholeNumber(0, 65_535), [ENV.logLevel]: logLevel() });

  it("names every bad variable and what is wrong, the first one as `variable`", () => {
    let error: unknown;
    try {
      parseEnvironment(schema, { [ENV.relayHealthPort]: "eighty", [ENV.logLevel]: "loud" }, "test configuration");
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigurationError);
    expect(error).toMatchObject({
      variable: ENV.relayHealthPort,
      message: "test configuration: RELAY_HEALTH_PORT: must be a whole number; LOG_LEVEL: must be one of debug, info, warn, error",
    });
  });

  it("returns the typed settings, with defaults and any case for LOG_LEVEL", () => {
    expect(parseEnvironment(schema, { [ENV.relayHealthPort]: " 8080 ", [ENV.logLevel]: "DEBUG", OTHER: "x" }, "t")).toEqual({
      [ENV.relayHealthPort]: 8080,
      [ENV.logLevel]: "debug",
    });
    expect(parseEnvironment(schema, { [ENV.relayHealthPort]: "1" }, "t")[ENV.logLevel]).toBe("info");
  });
});

describe("docs/operations.md", () => {
  it("names every variable of every deployable", () => {
    const docs = readFileSync(join(ROOT, "docs", "operations.md"), "utf8");
    expect(Object.values(ENV).filter((name) => !docs.includes(`\`${name}\``))).toEqual([]);
  });
});
