/**
 * infra/dev/bootstrap.mjs, the set-up behind `npm start` and `npm test`: it must run before node_modules
 * exists, keep its steps in one list, and give a remaining-time estimate that only goes down.
 */
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
// @ts-expect-error: plain JavaScript (it runs before any dependency is installed), no declaration file.
import { formatDuration, LAMBDA_BUILD_STAGES, PACKAGES, remainingSeconds, STEPS } from "../../../infra/dev/bootstrap.mjs";

const ROOT = join(import.meta.dirname, "..", "..", "..");
const SCRIPT = join(ROOT, "infra", "dev", "bootstrap.mjs");

describe("bootstrap", () => {
  it("imports nothing but Node's own modules", () => {
    const imports = [...readFileSync(SCRIPT, "utf8").matchAll(/^import .* from "([^"]+)";$/gm)].map((m) => m[1]);
    expect(imports.length).toBeGreaterThan(0);
    for (const specifier of imports) expect(specifier).toMatch(/^node:/);
  });

  it("is what npm start and npm test run first", () => {
    const { scripts } = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { scripts: Record<string, string> };
    expect(scripts.prestart).toBe("node infra/dev/bootstrap.mjs start");
    expect(scripts.pretest).toBe("node infra/dev/bootstrap.mjs test");
  });

  it("has its steps in one ordered list: packages and dependencies before what needs them", () => {
    const names = (STEPS as { name: string }[]).map((s) => s.name);
    expect(names.indexOf("Debian packages")).toBeLessThan(names.indexOf("npm dependencies"));
    expect(names.indexOf("npm dependencies")).toBeLessThan(names.findIndex((n) => n.startsWith("control plane")));
    expect(names).toContain("DynamoDB Local");
    expect(names).toContain("Python tools (moto_server, cfn-lint)");
    expect(names.indexOf("npm dependencies")).toBeLessThan(names.findIndex((n) => n.startsWith("Lambda runtime")));
    expect(names.at(-1)).toBe("node images");
  });

  it("knows every Debian package the set-up may need", () => {
    expect((PACKAGES as { name: string }[]).map((p) => p.name).sort()).toEqual(
      [
        "autoconf",
        "automake",
        "cmake",
        "containerd",
        "containernetworking-plugins",
        "debootstrap",
        "iptables",
        "libtool",
        "openjdk-17-jre-headless",
        "openssh-client",
        "openssh-server",
        "openssl",
        "prometheus",
        "rsync",
        "runc",
        "shellcheck",
        "stunnel4",
        "tinyproxy",
        "umoci",
        "unzip",
      ].sort(),
    );
  });

  it("estimates the build's remaining time from its stage, never going up within a stage", () => {
    const whole = remainingSeconds(-1, 0, 2);
    expect(whole).toBeGreaterThanOrEqual(remainingSeconds(0, 0, 2));
    let previous = Number.POSITIVE_INFINITY;
    for (const stage of [0, 1, 2, 3]) {
      for (const seconds of [0, 30, 60, 600]) {
        const left = remainingSeconds(stage, seconds, 2);
        expect(left).toBeLessThanOrEqual(previous);
        expect(left).toBeGreaterThan(0);
        previous = left;
      }
    }
    expect(remainingSeconds(0, 0, 4)).toBeLessThan(remainingSeconds(0, 0, 2));
    // The Lambda runtime's build has its own stages.
    let lambdaPrevious = Number.POSITIVE_INFINITY;
    for (const stage of LAMBDA_BUILD_STAGES.keys()) {
      const left = remainingSeconds(stage, 0, 2, LAMBDA_BUILD_STAGES);
      expect(left).toBeLessThanOrEqual(lambdaPrevious);
      lambdaPrevious = left;
    }
    expect(formatDuration(125)).toBe("2 min 05 s");
    expect(formatDuration(9)).toBe("9 s");
  });

  it("builds the Lambda runtime for the tests only", () => {
    const step = (STEPS as { name: string; skip?: (ctx: { mode: string }) => string | undefined }[]).find((s) => s.name.startsWith("Lambda runtime"));
    expect(step?.skip?.({ mode: "start" })).toMatch(/only the tests/);
  });

  it("rejects an unknown mode with its usage", () => {
    const result = spawnSync(process.execPath, [SCRIPT, "deploy"], { encoding: "utf8" });
    expect(result.status).toBe(2);
    expect(result.stderr).toContain("usage: node infra/dev/bootstrap.mjs start|test");
  });
});
