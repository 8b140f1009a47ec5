/**
 * The `dvm` command as a package user gets it: `npm pack` (whose prepack step bundles dist/dvm.mjs),
 * `npm install <tarball>` into an empty folder, then the installed bin against the live stack of this
 * run (the source control plane and DynamoDB Local): --help, get and report, with no devDependency there.
 */
import { execFile } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import packageJson from "../../package.json" with { type: "json" };
import { createPhaseRunner } from "../../src/aws/phaseRunner";
import { testClusters } from "../support/clusters";
import { dynamoEndpoint, type FreshTable, freshLedgerTable } from "../support/dynamo";
import { createDvm, createMigrationFixture, driveToCompletion, type MigrationFixture, requestFor } from "../support/migration";

const ROOT = join(import.meta.dirname, "..", "..");
const execFileAsync = promisify(execFile);
const clusters = testClusters();
const scratch = mkdtempSync(join(tmpdir(), "dvm-package-test-"));
const app = join(scratch, "app");
let fixture: MigrationFixture;
let table: FreshTable;
let env: NodeJS.ProcessEnv;

/** This process's environment without what the surrounding `npm test` set for its own scripts. */
function cleanEnv(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([key]) => !/^npm_/i.test(key)));
}

async function installedDvm(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await execFileAsync(join(app, "node_modules", ".bin", "dvm"), args, { cwd: app, env, encoding: "utf8" });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}

beforeAll(async () => {
  const npmEnv = cleanEnv();
  const packed = await execFileAsync("npm", ["pack", "--pack-destination", scratch], { cwd: ROOT, env: npmEnv, encoding: "utf8" });
  const tarball = join(scratch, packed.stdout.trim().split("\n").at(-1)!);
  mkdirSync(app);
  await execFileAsync("npm", ["install", "--no-audit", "--no-fund", "--prefer-offline", tarball], { cwd: app, env: npmEnv, encoding: "utf8" });

  fixture = await createMigrationFixture(clusters, `p${Date.now().toString(36)}`);
  table = await freshLedgerTable();
  const dynamo = dynamoEndpoint()!;
  env = {
    ...npmEnv,
    KUBECONFIG: clusters.info.source.kubeconfigPath,
    LEDGER_TABLE_NAME: table.tableName,
    AWS_ENDPOINT_URL_DYNAMODB: dynamo.endpoint,
    AWS_REGION: dynamo.region,
    AWS_ACCESS_KEY_ID: process.env.AWS_ACCESS_KEY_ID ?? "dvmlocal",
    AWS_SECRET_ACCESS_KEY: process.env.AWS_SECRET_ACCESS_KEY ?? "dvmlocal",
  };
  const created = await createDvm(clusters.source, fixture.dvmNamespace, "packaged", fixture.spec);
  const runner = createPhaseRunner({ hostKubeConfig: clusters.source, ledgerTableName: table.tableName, dynamo: table.client, leaseMs: 30_000 });
  await driveToCompletion(runner, requestFor(created));
}, 600_000);

afterAll(async () => {
  await table?.drop();
  rmSync(scratch, { recursive: true, force: true });
});

describe("the packed dvm command, installed into an empty folder", () => {
  it("is the bundle alone: the package holds dist/dvm.mjs, and no devDependency is installed", () => {
    const installed = join(app, "node_modules", packageJson.name);
    expect(readdirSync(join(installed, "dist"))).toEqual(["dvm.mjs"]);
    expect(existsSync(join(installed, "src"))).toBe(false);
    // Type packages aside (@types/node comes with @kubernetes/client-node), and the AWS SDK's clients the
    // deployed tests read the stack with (the runtime's SDK clients bring some of them along), no build or
    // test tool is there.
    const tools = Object.keys(packageJson.devDependencies).filter((dev) => !/^@(types|aws-sdk|smithy)\//.test(dev));
    expect(tools).toEqual(expect.arrayContaining(["tsx", "esbuild", "vitest", "typescript"]));
    for (const dev of tools) expect(existsSync(join(app, "node_modules", dev)), dev).toBe(false);
  });

  it("dvm --help lists the commands", async () => {
    const result = await installedDvm("--help");
    expect(result.code).toBe(0);
    for (const command of ["migrate", "get", "list", "watch", "report", "ledger", "cancel", "completion"]) expect(result.stdout).toContain(command);
  });

  it("dvm get shows the migration Completed", async () => {
    const result = await installedDvm("get", "packaged", "-n", fixture.dvmNamespace);
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/Completed/);
  });

  it("dvm report prints the phase timing table from the ledger", async () => {
    const result = await installedDvm("report", "packaged", "-n", fixture.dvmNamespace);
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^1\/\d+\s+\w+/m);
  });

  it("dvm completion bash prints a script for bash's complete builtin", async () => {
    const result = await installedDvm("completion", "bash");
    expect(result.code).toBe(0);
    expect(result.stdout).toContain("complete -o default -F _dvm dvm");
  });
});
