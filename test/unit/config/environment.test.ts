/**
 * The configuration layer's own rules: only the configuration modules read process.env, and a bad
 * setting is a ConfigurationError that names the variable.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { ENV, logLevel, parseEnvironment, wholeNumber } from "../../../src/config/environment";
import { ConfigurationError } from "../../../src/config/error";

const ROOT = join(import.meta.dirname, "..", "..", "..");

/** One configuration module per deployable (src/config/environment.ts lists them), and nothing else. */
const READS_THE_ENVIRONMENT = [
  "src/aws/functionConfig.ts", // phase function and trigger (their own schemas: phaseConfig.ts, triggerConfig.ts)
  "src/cli/config.ts",
  "src/config/environment.ts",
  "src/local/config.ts",
  "src/relay/config.ts",
];

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((entry) => {
    const path = join(dir, entry);
    return statSync(path).isDirectory() ? sources(path) : path.endsWith(".ts") ? [relative(ROOT, path)] : [];
  });
}

describe("the environment", () => {
  it("is read only by the configuration modules (grep -rn process.env src functions)", () => {
    const readers = [...sources(join(ROOT, "src")), ...sources(join(ROOT, "functions"))].filter((file) =>
      readFileSync(join(ROOT, file), "utf8").includes("process.env"),
    );
    expect(readers.sort()).toEqual(READS_THE_ENVIRONMENT);
  });

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
