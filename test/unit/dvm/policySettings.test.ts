/**
 * The migration policy's settings come from one table (POLICY_SETTINGS, src/dvm/policyConfig.ts): the
 * variable names, the parser and the inverse are code that reads it; the docs table and serverless.yml's
 * params and environment lines are rendered from it (infra/dev/docs/policySettings.ts) and must match
 * what is committed.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { BLOCKS, renderedFile } from "../../../infra/dev/docs/policySettings";
import { ENV } from "../../../src/config/environment";
import { ConfigurationError } from "../../../src/config/error";
import { DEFAULT_MIGRATION_POLICY } from "../../../src/dvm/policy";
import { POLICY_ENV, POLICY_SETTINGS, parsePolicyEnv, policyEnv } from "../../../src/dvm/policyConfig";

const ROOT = join(import.meta.dirname, "..", "..", "..");
const read = (file: string) => readFileSync(join(ROOT, file), "utf8");
const FILES = [...new Set(BLOCKS.map((block) => block.file))];

describe("the policy settings table", () => {
  it("names each variable once, apart from every other deployable's", () => {
    const names = Object.values(POLICY_ENV);
    expect(new Set(names).size).toBe(names.length);
    expect(names.filter((name) => (Object.values(ENV) as string[]).includes(name))).toEqual([]);
  });

  it("is what the parser reads: a bad value of any setting is an error naming its variable", () => {
    const bad = "not valid, at all";
    for (const { env } of Object.values(POLICY_SETTINGS)) {
      let error: unknown;
      try {
        parsePolicyEnv({ [env]: bad });
      } catch (e) {
        error = e;
      }
      expect(error, env).toBeInstanceOf(ConfigurationError);
      // A list's bad entry is named by its index ("DVM_ADMIN_NAMESPACES[0]").
      expect((error as ConfigurationError).variable).toMatch(new RegExp(`^${env}(\\[\\d+\\])?$`));
      expect((error as Error).message).toMatch(new RegExp(`^migration policy: ${env}\\b`));
    }
  });

  it("writes every setting of a policy that differs from the default, and reads it back", () => {
    const policy = parsePolicyEnv({ DVM_TRANSFER_MAX_CPU: "2", DVM_STUNNEL_TCP_PROXY: "http://proxy.corp.example:3128" });
    expect(Object.keys(policyEnv(policy)).sort()).toEqual(
      Object.values(POLICY_ENV)
        .filter((name) => !["DVM_TRANSFER_MAX_BANDWIDTH_KIB", "DVM_TRANSFER_MAX_MEMORY", "DVM_STUNNEL_TCP_PROXY_TENANT"].includes(name))
        .sort(),
    );
    expect(parsePolicyEnv(policyEnv(policy))).toEqual(policy);
  });
});

describe.each(FILES)("%s", (file) => {
  it("carries the table's rendering (npx tsx infra/dev/docs/policySettings.ts writes it)", () => {
    expect(read(file)).toBe(renderedFile(file));
  });

  it("fails the comparison when a rendered line is edited, dropped or added", () => {
    const text = read(file);
    const [first, ...rest] = BLOCKS.filter((block) => block.file === file).flatMap((block) => block.render());
    const edits = [
      text.replace(first!, `${first} `),
      text.replace(`${rest.at(-1)}\n`, ""),
      text.replace(`${rest.at(-1)}\n`, `${rest.at(-1)}\n${rest.at(-1)}\n`),
    ];
    for (const edited of edits) {
      expect(edited).not.toBe(text);
      expect(renderedFile(file, edited)).not.toBe(edited);
    }
  });
});

describe("serverless.yml", () => {
  it("sets every policy variable of the phase functions from the param of its setting", () => {
    const config = parse(read("serverless.yml"), { logLevel: "silent", customTags: [] }) as {
      params: { default: Record<string, string> };
      custom: { phaseFunction: { environment: Record<string, string> } };
    };
    for (const [param, { env }] of Object.entries(POLICY_SETTINGS)) {
      expect(config.params.default).toHaveProperty(param);
      expect(config.custom.phaseFunction.environment[env]).toBe(`\${param:${param}}`);
    }
    // The params' defaults are the built-in policy: blank where blank is the default, the list where blank is "none".
    const asDeployed = Object.fromEntries(Object.entries(POLICY_SETTINGS).map(([param, { env }]) => [env, config.params.default[param]]));
    expect(parsePolicyEnv(asDeployed)).toEqual(DEFAULT_MIGRATION_POLICY);
  });
});
