/**
 * cfn-lint (AWS's CloudFormation linter, a Python tool installed with pip) on a template file. Stock moto
 * runs the same linter inside ValidateTemplate and refuses a template on any finding, warnings included.
 */
import { execFile, spawnSync } from "node:child_process";
import { promisify } from "node:util";

const run = promisify(execFile);

export const CFN_LINT_INSTALL = "pip install cfn-lint";

export function cfnLintInstalled(): boolean {
  return spawnSync("cfn-lint", ["--version"], { encoding: "utf8" }).status === 0;
}

/** The findings, one `file:line:column:endLine:endColumn:rule:message` line each; none when clean. */
export async function cfnLint(file: string): Promise<string[]> {
  try {
    await run("cfn-lint", ["--format", "parseable", "--", file], { timeout: 120_000, maxBuffer: 4 << 20 });
    return [];
  } catch (error) {
    // Exit codes 2, 4 and 8 (errors, warnings, informational) are bit flags over findings on stdout.
    const e = error as { code?: unknown; stdout?: string; stderr?: string; message: string };
    const findings = (e.stdout ?? "").split("\n").filter((line) => line.trim() !== "");
    if (typeof e.code === "number" && e.code > 0 && e.code < 16 && findings.length > 0) return findings;
    throw new Error(`cfn-lint ${file} failed: ${e.message}\n${e.stderr ?? ""}`);
  }
}
