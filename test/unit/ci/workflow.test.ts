/**
 * The parts of the kind + LocalStack workflow that can be checked without Docker:
 * - .github/workflows/*.yml pass actionlint (built by infra/dev/tools/actionlint.sh when missing: never
 *   skipped), which also runs shellcheck on their `run:` scripts when shellcheck is installed;
 * - the shell scripts parse (bash -n) and pass shellcheck (when installed: Debian's shellcheck package);
 * - the workflow runs what it should (CI script, e2e script) with pinned actions and bounded time;
 * - `osls package --stage local` (what infra/dev/kind/e2e.sh deploys to LocalStack) works offline and names
 *   the function, the ledger table and the SSM parameter the script and the kind overlay use.
 */
import { execFile, spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { phaseFunctionName } from "../../../src/aws/functionLayout";
import { packageService } from "../../support/osls";
import { missing } from "../../support/requirements";

const ROOT = join(import.meta.dirname, "..", "..", "..");
const WORKFLOWS = join(ROOT, ".github", "workflows");
const SCRIPTS = [
  "infra/dev/kind/e2e.sh",
  "infra/dev/localstack/start.sh",
  "infra/dev/tools/actionlint.sh",
  ".ci/run",
  ".ci/external-endpoints.sh",
  "infra/dev/controlplane/build.sh",
  "infra/dev/nodes/images.sh",
  "infra/dev/nodes/relay-image.sh",
  "infra/dev/lib/build-steps.sh",
  "infra/dev/nodes/teardown.sh",
];
const run = promisify(execFile);
const scratch = mkdtempSync(join(tmpdir(), "dvm-workflow-test-"));

afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const workflowFiles = readdirSync(WORKFLOWS)
  .filter((f) => /\.ya?ml$/.test(f))
  .map((f) => join(WORKFLOWS, f));

describe("GitHub workflows", () => {
  let actionlint: string;

  beforeAll(async () => {
    // Idempotent: prints the cached binary's path at once, or builds it (Go module proxy) first.
    const built = await run("bash", [join(ROOT, "infra", "dev", "tools", "actionlint.sh")], { cwd: ROOT, encoding: "utf8", timeout: 600_000 });
    actionlint = built.stdout.trim().split("\n").at(-1)!;
  }, 600_000);

  it("exist", () => {
    expect(workflowFiles.map((f) => f.slice(WORKFLOWS.length + 1))).toContain("e2e-kind.yml");
  });

  it("pass actionlint with no findings", () => {
    const result = spawnSync(actionlint, ["-no-color", ...workflowFiles], { cwd: ROOT, encoding: "utf8" });
    expect(result.error).toBeUndefined();
    expect(`${result.stdout}${result.stderr}`.trim()).toBe("");
    expect(result.status).toBe(0);
  });

  it("actionlint does report a broken workflow (the check above is not vacuous)", () => {
    const broken = join(scratch, "broken.yml");
    writeFileSync(broken, "on: push\njobs:\n  x:\n    runs-on: ubuntu-24.04\n    steps:\n      - run: echo ${{ github.nope }}\n        shell: bashh\n");
    const result = spawnSync(actionlint, ["-no-color", broken], { encoding: "utf8" });
    expect(result.status).toBe(1);
    expect(result.stdout).toMatch(/nope|bashh/);
  });

  it("run .ci/run and the kind end-to-end script, with pinned actions, read-only token and time limits", () => {
    const workflow = parse(readFileSync(join(WORKFLOWS, "e2e-kind.yml"), "utf8")) as {
      permissions: Record<string, string>;
      jobs: Record<string, { "timeout-minutes": number; steps: Array<{ uses?: string; run?: string }> }>;
    };
    expect(workflow.permissions).toEqual({ contents: "read" });
    const runs = (job: string) => workflow.jobs[job]!.steps.flatMap((s) => (s.run ? [s.run] : []));
    // As root: the data-path tests run transfers as UID 0, and the set-up installs Debian packages itself.
    expect(runs("ci").filter((run) => /^sudo env .*\bbash \.ci\/run$/.test(run))).toHaveLength(1);
    expect(runs("e2e-kind")).toContain("bash infra/dev/kind/e2e.sh all");
    for (const [name, job] of Object.entries(workflow.jobs)) {
      expect(job["timeout-minutes"], name).toBeGreaterThan(0);
      expect(job["timeout-minutes"], name).toBeLessThanOrEqual(90);
      for (const step of job.steps) if (step.uses) expect(step.uses, name).toMatch(/^[\w.-]+\/[\w.-]+@v\d+$/);
    }
  });
});

describe("shell scripts", () => {
  it.each(SCRIPTS)("%s parses (bash -n)", (script) => {
    const result = spawnSync("bash", ["-n", join(ROOT, script)], { encoding: "utf8" });
    expect(result.stderr).toBe("");
    expect(result.status).toBe(0);
  });

  const shellcheck = spawnSync("shellcheck", ["--version"], { encoding: "utf8" }).status === 0;
  // shellcheck reads about 1,500 lines of bash: seconds on a loaded 2-core machine, past vitest's 5 s default.
  it.skipIf(missing("shellcheck", shellcheck, "apt-get install shellcheck (bash .ci/run installs it)"))(
    "pass shellcheck",
    () => {
      const result = spawnSync("shellcheck", ["--format=gcc", ...SCRIPTS.map((s) => join(ROOT, s))], { cwd: ROOT, encoding: "utf8" });
      expect(result.stdout).toBe("");
      expect(result.status).toBe(0);
    },
    60_000,
  );
});

describe("osls package --stage local (what e2e.sh deploys to LocalStack)", () => {
  // biome-ignore lint/suspicious/noExplicitAny: parsed YAML/JSON, walked freely by the test
  type Json = Record<string, any>;
  let resources: Json;

  beforeAll(async () => {
    resources = (await packageService({ stage: "local", scratch, name: "local" })).resources;
  }, 300_000);

  it("has the phase function the kind relay invokes, reading the host kubeconfig from the parameter e2e.sh writes", () => {
    const name = phaseFunctionName("dvm-serverless", "local", "shared", "Started");
    const script = readFileSync(join(ROOT, "infra", "dev", "kind", "e2e.sh"), "utf8");
    const overlay = readFileSync(join(ROOT, "infra", "dev", "kind", "host", "kustomization.yaml"), "utf8");
    expect(name).toBe("dvm-serverless-local-phase");
    expect(script).toContain('FUNCTION_NAME="$SERVICE-$STAGE-phase"');
    expect(script).toContain('KUBECONFIG_PARAMETER="/$SERVICE/$STAGE/host-kubeconfig"');
    expect(overlay).toContain(`value: ${name}`);

    const fn = Object.values(resources).find((r: Json) => r.Type === "AWS::Lambda::Function" && r.Properties.FunctionName === name) as Json | undefined;
    expect(fn, `a Lambda function named ${name}`).toBeDefined();
    expect(fn!.Properties.Environment.Variables).toMatchObject({
      DVM_KUBECONFIG_PARAMETER: "/dvm-serverless/local/host-kubeconfig",
      LEDGER_TABLE_NAME: "dvm-serverless-local-ledger",
    });
    const table = Object.values(resources).find((r: Json) => r.Type === "AWS::DynamoDB::Table") as Json;
    expect(table.Properties.TableName).toBe("dvm-serverless-local-ledger");
  });
});
