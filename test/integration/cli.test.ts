/**
 * The `dvm` command as a user runs it: a child process (node --import tsx src/cli/main.ts) against the
 * source control plane (which hosts the DVMs) and DynamoDB Local, while the phase runner drives real
 * migrations the way the relay does.
 */

import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoPhaseLedger } from "../../src/aws/ledger";
import { MAX_CLAIM_RECORDS } from "../../src/aws/ledger/dynamoLedger";
import { ITINERARIES, PHASES } from "../../src/dvm/itinerary";
import type { LedgerEntry } from "../../src/ledger";
import { buildTimingReport, type TimingReport } from "../../src/report";
import { testClusters } from "../support/clusters";
import { dynamoEndpoint, type FreshTable, freshLedgerTable } from "../support/dynamo";
import { createDvm, createMigrationFixture, driveToCompletion, type MigrationFixture, readDvm, requestFor, testPhaseRunner } from "../support/migration";
import { checkWellFormedXml, countElementsWithClass } from "../support/wellFormedXml";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const clusters = testClusters();
const run = `c${Date.now().toString(36)}`;
const STEPS = ITINERARIES.VolumeMigration.filter((p) => p !== "Completed");
let fixture: MigrationFixture;
let table: FreshTable;
let env: NodeJS.ProcessEnv;

interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

interface RunningCli {
  /** Resolves once the command has printed something. */
  firstOutput: Promise<void>;
  done: Promise<CliRun>;
}

/** Starts the CLI; `tty` runs it under util-linux `script`, which gives it a pseudo-terminal. */
function startDvm(args: string[], options: { tty?: boolean; env?: NodeJS.ProcessEnv } = {}): RunningCli {
  const command = [process.execPath, "--import", "tsx", "src/cli/main.ts", ...args];
  const [file, argv] = options.tty ? ["script", ["-qfec", command.join(" "), "/dev/null"]] : [command[0]!, command.slice(1)];
  const child = spawn(file, argv, { cwd: ROOT, env: { ...env, ...options.env }, stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  let printed: () => void = () => {};
  const firstOutput = new Promise<void>((resolve) => (printed = resolve));
  child.stdout.on("data", (chunk: Buffer) => {
    stdout += chunk.toString("utf8");
    printed();
  });
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")));
  const done = new Promise<CliRun>((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (code) => {
      printed();
      resolve({ code, stdout, stderr });
    });
  });
  return { firstOutput, done };
}

const dvm = (...args: string[]) => startDvm(args).done;

function runner() {
  return testPhaseRunner(clusters, table);
}

/** The fixture's first PVC as --pvc flags. */
function pvcFlags(): string[] {
  const { shop, shopTarget } = fixture.namespaces;
  return ["--pvc", `${shop}/db=${shopTarget}`, "--storage-class", fixture.storageClass, "--destination-kubeconfig-secret", "destination-kubeconfig"];
}

const noStackTrace = (text: string) => expect(text).not.toMatch(/^\s+at .+:\d+:\d+\)?$/m);

beforeAll(async () => {
  fixture = await createMigrationFixture(clusters, run);
  table = await freshLedgerTable();
  const dynamo = dynamoEndpoint()!;
  env = {
    ...process.env,
    KUBECONFIG: clusters.info.source.kubeconfigPath,
    LEDGER_TABLE_NAME: table.tableName,
    AWS_ENDPOINT_URL_DYNAMODB: dynamo.endpoint,
    AWS_REGION: dynamo.region,
    AWS_ACCESS_KEY_ID: process.env.AWS_ACCESS_KEY_ID ?? "dvmlocal",
    AWS_SECRET_ACCESS_KEY: process.env.AWS_SECRET_ACCESS_KEY ?? "dvmlocal",
  };
  delete env.DVM_CLI_DEBUG;
});

afterAll(async () => {
  await table?.drop();
});

describe("on a completed migration", () => {
  const name = "cli-move";
  let history: LedgerEntry[];

  beforeAll(async () => {
    // Client pods that run 3 s: RunRsyncOperations is polled several times however loaded the machine is.
    const created = await createDvm(clusters.source, fixture.dvmNamespace, name, { ...fixture.spec, transferPodAnnotations: { "dvm.test/run-seconds": "3" } });
    await driveToCompletion(runner(), requestFor(created));
    history = await new DynamoPhaseLedger({ client: table.client, tableName: table.tableName }).history(created.metadata.uid);
  });

  it("the ledger keeps one claim record per execution: polls that only waited leave none behind", () => {
    expect(history.map((e) => e.key.phase)).toEqual(STEPS);
    for (const entry of history) {
      expect(entry.claims?.[0], entry.key.phase).toMatchObject({ at: entry.startedAt, attempt: 1 });
      const last = entry.claims![entry.claims!.length - 1]!;
      expect(last, entry.key.phase).toMatchObject({ end: "completed", endedAt: entry.finishedAt, attempt: entry.attempts });
      if (!PHASES[entry.key.phase].waits) expect(entry.claims, entry.key.phase).toHaveLength(1);
      // A wait phase: its first poll (which waited) and the one that completed, however many came between.
      else expect(entry.claims!.length, entry.key.phase).toBe(entry.attempts === 1 ? 1 : 2);
    }
    expect(history.some((e) => e.waits > 1)).toBe(true);
  });

  it("dvm report lists every phase of the itinerary once, in order, with shares adding up to 100 and no repeats", async () => {
    const result = await dvm("report", name, "-n", fixture.dvmNamespace);
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    const rows = result.stdout.split("\n").filter((line) => /^\d+\/\d+\s/.test(line));
    expect(rows.map((line) => line.split(/\s+/)[1])).toEqual(STEPS);
    for (const [i, line] of rows.entries()) expect(line.startsWith(`${i + 1}/${ITINERARIES.VolumeMigration.length} `)).toBe(true);
    const shares = rows.map((line) => Number(/(\d+\.\d)%/.exec(line)![1]));
    expect(shares.reduce((a, b) => a + b, 0)).toBeCloseTo(100, 5);
    expect(result.stdout).toMatch(/repeated executions: 0 costing 0\.000 s/);
    expect(result.stdout).toContain(`uid ${history[0]!.key.uid}`);
  });

  it("dvm report --json parses and --svg writes a well-formed timeline with one bar per execution", async () => {
    const dir = mkdtempSync(join(tmpdir(), "dvm-report-"));
    const file = join(dir, "timeline.svg");
    const result = await dvm("report", name, "-n", fixture.dvmNamespace, "--json", "--svg", file);
    expect(result.code).toBe(0);
    const report = JSON.parse(result.stdout) as TimingReport;
    expect(report.rows.map((r) => r.phase)).toEqual(STEPS);
    expect(report.rows.reduce((sum, r) => sum + (r.percent ?? 0), 0)).toBeCloseTo(100, 5);
    expect(report.repeated).toEqual({ count: 0, seconds: 0, unplaced: 0 });
    expect(report.executions).toBe(history.length);
    expect(result.stderr).toContain(`Wrote the timeline to ${file}`);
    const svg = readFileSync(file, "utf8");
    expect(checkWellFormedXml(svg)).toMatchObject({ ok: true, root: "svg" });
    expect(countElementsWithClass(svg, "execution")).toBe(history.length);
    expect(countElementsWithClass(svg, "repeated")).toBe(0);
  });

  it("dvm get and dvm list show it Completed, with the step from the table and every PVC succeeded", async () => {
    const total = ITINERARIES.VolumeMigration.length;
    const get = await dvm("get", name, "-n", fixture.dvmNamespace);
    expect(get.code).toBe(0);
    expect(get.stdout).toMatch(new RegExp(`Phase:\\s+Completed  \\(Step ${total}/${total}\\)`));
    expect(get.stdout).toMatch(/Result:\s+Succeeded/);
    expect(get.stdout).toContain("Volumes:     3/3 succeeded");
    const json = await dvm("get", name, "-n", fixture.dvmNamespace, "-o", "json");
    expect(JSON.parse(json.stdout)).toMatchObject({
      name,
      phase: "Completed",
      step: total,
      totalSteps: total,
      result: "Succeeded",
      itinerary: "VolumeMigration",
    });
    const list = await dvm("list", "-n", fixture.dvmNamespace);
    expect(list.code).toBe(0);
    const line = list.stdout.split("\n").find((l) => l.startsWith(`${name} `));
    expect(line).toMatch(new RegExp(`^${name}\\s+Completed\\s+${total}/${total}\\s+VolumeMigration\\s+Succeeded\\s+3/3 succeeded`));
  });

  it("dvm ledger lists the raw entries, as a table and as JSON", async () => {
    const table = await dvm("ledger", name, "-n", fixture.dvmNamespace);
    expect(table.code).toBe(0);
    for (const phase of STEPS) expect(table.stdout).toMatch(new RegExp(`^\\s*1  ${phase}\\s+COMPLETED`, "m"));
    const json = await dvm("ledger", "--uid", history[0]!.key.uid, "--json");
    expect((JSON.parse(json.stdout) as LedgerEntry[]).map((e) => e.key.phase)).toEqual(STEPS);
  });
});

describe("claim records on DynamoDB Local (what dvm report draws)", () => {
  const LEASE_MS = 10_000;
  let clock = Date.now();
  const ledger = () => new DynamoPhaseLedger({ client: table.client, tableName: table.tableName, now: () => clock });
  const claimed = async (l: DynamoPhaseLedger, key: Parameters<DynamoPhaseLedger["claim"]>[0]) => {
    const result = await l.claim(key, { leaseMs: LEASE_MS });
    if (result.kind !== "claimed") throw new Error(`expected a claim, got ${result.kind}`);
    return result.claim;
  };

  it("records a crashed attempt, its takeover and a failed re-run: three bars, two of them repeated", async () => {
    const uid = randomUUID();
    const key = { uid, phase: "CreateDestinationPVCs" as const, generation: 1 };
    const t0 = clock;
    await claimed(ledger(), key); // attempt 1 crashes: no ending write
    clock += LEASE_MS + 1;
    const l = ledger();
    const second = await claimed(l, key);
    expect(second.takeover).toBe(true);
    clock += 100;
    await l.fail(second, "etcdserver: request timed out");
    clock += 500;
    const third = await claimed(l, key);
    clock += 200;
    await l.complete(third, { result: "advanced", nextPhase: "CreateRsyncEndpoint" });

    const [entry] = await l.history(uid);
    expect(entry!.claims).toEqual([
      { at: t0 },
      { at: t0 + LEASE_MS + 1, attempt: 2, takeover: true, end: "failed", endedAt: t0 + LEASE_MS + 101 },
      { at: t0 + LEASE_MS + 601, attempt: 3, takeover: false, end: "completed", endedAt: t0 + LEASE_MS + 801 },
    ]);
    const report = buildTimingReport({ entries: [entry!], now: clock });
    expect(report.rows.find((r) => r.ran)?.executions.map((e) => [e.ended, e.repeated])).toEqual([
      ["crashed", false],
      ["failed", true],
      ["completed", true],
    ]);
    expect(report.repeated).toMatchObject({ count: 2, unplaced: 0 });
  });

  it("keeps a wait phase's record list short however often it polls, and caps failed attempts", async () => {
    const l = ledger();
    const waitKey = { uid: randomUUID(), phase: "RunRsyncOperations" as const, generation: 1 };
    for (let poll = 0; poll < 30; poll++) {
      await l.release(await claimed(l, waitKey));
      clock += 10;
    }
    await l.complete(await claimed(l, waitKey), { result: "advanced", nextPhase: "DeleteRsyncResources" });
    const [waited] = await l.history(waitKey.uid);
    expect(waited).toMatchObject({ attempts: 31, waits: 30 });
    expect(waited!.claims!.map((c) => [c.attempt, c.end])).toEqual([
      [1, "waited"],
      [31, "completed"],
    ]);

    const failKey = { uid: randomUUID(), phase: "CreateRsyncConfig" as const, generation: 1 };
    for (let attempt = 0; attempt < MAX_CLAIM_RECORDS + 5; attempt++) await l.fail(await claimed(l, failKey), "throttled");
    const [failing] = await l.history(failKey.uid);
    expect(failing!.failures).toBe(MAX_CLAIM_RECORDS + 5);
    expect(failing!.claims).toHaveLength(MAX_CLAIM_RECORDS);
    const report = buildTimingReport({ entries: [failing!], now: clock });
    expect(report.repeated).toMatchObject({ count: MAX_CLAIM_RECORDS + 4, unplaced: 5 });
  });
});

describe("clear errors", () => {
  it("dvm migrate with a bad spec exits 1 naming each field, and creates nothing", async () => {
    const result = await dvm("migrate", "cli-bad", "-n", fixture.dvmNamespace, "--pvc", `${fixture.namespaces.shop}/db`, "--access-mode", "Sometimes");
    expect(result.code).toBe(1);
    expect(result.stderr).toContain("spec.persistentVolumeClaims[0].targetStorageClass (--storage-class): is required");
    expect(result.stderr).toContain("spec.persistentVolumeClaims[0].targetAccessModes[0] (--access-mode)");
    noStackTrace(result.stderr);
    await expect(readDvm(clusters.source, fixture.dvmNamespace, "cli-bad")).rejects.toMatchObject({ code: 404 });
  });

  it("names an unknown DVM and its namespace", async () => {
    const result = await dvm("get", "no-such-dvm", "-n", fixture.dvmNamespace);
    expect(result.code).toBe(1);
    expect(result.stderr).toBe(
      `error: DirectVolumeMigration "no-such-dvm" not found in namespace "${fixture.dvmNamespace}": check the name, or pass -n/--namespace (dvm list -n NAMESPACE shows what is there)\n`,
    );
    const report = await dvm("report", "no-such-dvm", "-n", fixture.dvmNamespace);
    expect(report.stderr).toMatch(/^error: DirectVolumeMigration "no-such-dvm" not found/);
  });

  it("names the table and endpoint when the ledger table is missing or DynamoDB is unreachable", async () => {
    const uid = "00000000-0000-0000-0000-000000000000";
    const missing = await dvm("ledger", "--uid", uid, "--table", "no-such-table");
    expect(missing.code).toBe(1);
    expect(missing.stderr).toBe(
      `error: ledger table "no-such-table" not found at ${dynamoEndpoint()!.endpoint}: check --table (LEDGER_TABLE_NAME) and --dynamodb-endpoint\n`,
    );
    const unreachable = await dvm("report", "--uid", uid, "--dynamodb-endpoint", "http://127.0.0.1:9");
    expect(unreachable.code).toBe(1);
    expect(unreachable.stderr).toMatch(
      new RegExp(`^error: cannot reach DynamoDB at http://127\\.0\\.0\\.1:9 for table "${table.tableName}" \\(.*ECONNREFUSED.*\\)`),
    );
    noStackTrace(unreachable.stderr);
  });

  it("says when the API server cannot be reached", async () => {
    const dir = mkdtempSync(join(tmpdir(), "dvm-kc-"));
    const kubeconfig = join(dir, "config");
    writeFileSync(
      kubeconfig,
      "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:9'}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n",
    );
    const result = await dvm("--kubeconfig", kubeconfig, "list");
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(
      /^error: cannot reach the Kubernetes API server at https:\/\/127\.0\.0\.1:9 \(connect ECONNREFUSED 127\.0\.0\.1:9\): check --kubeconfig\/--context or KUBECONFIG\n$/,
    );
  });
});

describe("dvm migrate + dvm watch on a running migration", () => {
  /** Creates the DVM with the CLI, starts `dvm watch`, and once it prints, drives the migration. */
  async function migrateAndWatch(name: string, migrateArgs: string[], watch: { tty?: boolean }) {
    const created = await dvm("migrate", ...migrateArgs);
    expect(created.stderr).toBe("");
    expect(created.code).toBe(0);
    const dvmObject = await readDvm(clusters.source, fixture.dvmNamespace, name);
    expect(created.stdout).toBe(
      `Created DirectVolumeMigration ${fixture.dvmNamespace}/${name} (uid ${dvmObject.metadata.uid})\nFollow it with: dvm watch ${name} -n ${fixture.dvmNamespace}\n`,
    );
    const watching = startDvm(["watch", name, "-n", fixture.dvmNamespace, "--interval", "0.3"], watch);
    await watching.firstOutput;
    const driven = driveToCompletion(runner(), requestFor(dvmObject));
    const [result] = await Promise.all([watching.done, driven]);
    return result;
  }

  it("prints a timestamped line per change when piped, and exits 0 on success", async () => {
    const name = "cli-watch-plain";
    const result = await migrateAndWatch(name, [name, "-n", fixture.dvmNamespace, ...pvcFlags()], {});
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    const lines = result.stdout.trim().split("\n");
    expect(lines.every((line) => /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ {2}/.test(line))).toBe(true);
    // No line repeats: only changes are printed.
    expect(new Set(lines.map((l) => l.slice(22))).size).toBe(lines.length);
    const steps = lines.filter((l) => / Step \d+\/\d+ {2}/.test(l));
    expect(steps.length).toBeGreaterThanOrEqual(3);
    expect(steps[steps.length - 1]).toContain(`Step ${ITINERARIES.VolumeMigration.length}/${ITINERARIES.VolumeMigration.length}  Completed`);
    expect(result.stdout).toMatch(new RegExp(`${fixture.namespaces.shop}/db  succeeded  attempt 1  100%`));
    expect(lines[lines.length - 1]).toMatch(/Completed: the migration succeeded$/);

    const again = await dvm("migrate", name, "-n", fixture.dvmNamespace, ...pvcFlags());
    expect(again.code).toBe(1);
    expect(again.stderr).toBe(
      `error: DirectVolumeMigration "${name}" already exists in namespace "${fixture.dvmNamespace}": pick another name, or follow it with dvm watch ${name} -n ${fixture.dvmNamespace}\n`,
    );
  });

  it("draws progress bars on a terminal, and exits 0 on success", async () => {
    // This one comes from a file holding a whole DVM, namespace included.
    const file = join(mkdtempSync(join(tmpdir(), "dvm-migrate-")), "dvm.yaml");
    const pvc = { ...(fixture.spec.persistentVolumeClaims as object[])[0], verify: true };
    writeFileSync(
      file,
      `# a DVM for dvm migrate -f\n${JSON.stringify({ apiVersion: "migration.openshift.io/v1alpha1", kind: "DirectVolumeMigration", metadata: { name: "cli-watch-tty", namespace: fixture.dvmNamespace }, spec: { ...fixture.spec, persistentVolumeClaims: [pvc] } }, null, 2)}\n`,
    );
    const result = await migrateAndWatch("cli-watch-tty", ["-f", file], { tty: true });
    expect(result.code).toBe(0);
    const text = result.stdout;
    // cli-progress draws with the shades preset and moves the cursor with ANSI escapes.
    expect(text).toMatch(/\u001b\[/);
    expect(text).toMatch(new RegExp(`${fixture.namespaces.shop}/db\\s+\u2588{10,}\\s*100% \\| succeeded`));
    expect(text).toMatch(/Step \d+\/\d+ {2}\w+: /);
    expect(text).toContain("Completed: the migration succeeded");
  });

  it("exits 2 and prints the errors when the migration fails", async () => {
    const name = "cli-watch-fails";
    const created = await dvm(
      "migrate",
      name,
      "-n",
      fixture.dvmNamespace,
      "--pvc",
      `${fixture.namespaces.shop}/missing=${fixture.namespaces.shopTarget}`,
      "--storage-class",
      fixture.storageClass,
      "--destination-kubeconfig-secret",
      "destination-kubeconfig",
    );
    expect(created.code).toBe(0);
    const dvmObject = await readDvm(clusters.source, fixture.dvmNamespace, name);
    const watching = startDvm(["watch", name, "-n", fixture.dvmNamespace, "--interval", "0.3"]);
    await watching.firstOutput;
    const [result] = await Promise.all([watching.done, driveToCompletion(runner(), requestFor(dvmObject))]);
    expect(result.code).toBe(2);
    expect(result.stdout).toMatch(/\[failure itinerary\]/);
    expect(result.stdout).toMatch(
      /Completed: the migration FAILED:\n.* {2}spec\.persistentVolumeClaims\[0\]\.name: PersistentVolumeClaim .*\/missing not found/,
    );
    const get = await dvm("get", name, "-n", fixture.dvmNamespace);
    expect(get.stdout).toMatch(/Result:\s+Failed/);
    const report = await dvm("report", name, "-n", fixture.dvmNamespace, "--json");
    const rows = (JSON.parse(report.stdout) as TimingReport).rows;
    expect(rows.filter((r) => r.ran).map((r) => r.phase)).toEqual([
      "Started",
      "MigrationFailed",
      "CleanupAfterFailure",
      "WaitForCleanupAfterFailure",
      "UnquiesceAfterFailure",
    ]);
    expect(rows.find((r) => r.phase === "Started")?.flags).toContain("failed");
  });
});

describe("dvm cancel", () => {
  it("stops a migration mid-transfer: the DVM is gone, its transfer objects too, the migrated PVCs stay", async () => {
    const name = "cli-cancel";
    // Client pods that take two minutes: the migration is still transferring when it is cancelled.
    const spec = { ...fixture.spec, transferPodAnnotations: { "dvm.test/run-duration": "120s" } };
    const created = await createDvm(clusters.source, fixture.dvmNamespace, name, spec);
    const r = runner();
    for (let i = 0; i < 200; i++) {
      const result = await r.run(requestFor(created));
      if (result.kind === "waiting" && result.phase === "RunRsyncOperations") break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const uid = created.metadata.uid;
    const selector = `dvm.migration.openshift.io/uid=${uid},dvm.migration.openshift.io/transfer=true`;
    const { CoreV1Api } = await import("@kubernetes/client-node");
    const podsOn = async (kc: typeof clusters.source) =>
      (await kc.makeApiClient(CoreV1Api).listPodForAllNamespaces({ labelSelector: selector })).items.filter((p) => !p.metadata?.deletionTimestamp);
    expect((await podsOn(clusters.source)).length).toBeGreaterThan(0);

    const cancelled = await dvm("cancel", name, "-n", fixture.dvmNamespace, "--timeout", "120");
    expect(cancelled.stderr).toBe("");
    expect(cancelled.code).toBe(0);
    expect(cancelled.stdout).toMatch(/Transfer resources removed/);
    await expect(readDvm(clusters.source, fixture.dvmNamespace, name)).rejects.toMatchObject({ code: 404 });
    expect(await podsOn(clusters.source)).toEqual([]);
    expect(await podsOn(clusters.destination)).toEqual([]);
    for (const kc of [clusters.source, clusters.destination]) {
      const secrets = await kc.makeApiClient(CoreV1Api).listSecretForAllNamespaces({ labelSelector: selector });
      expect(secrets.items).toEqual([]);
    }
    // The data already moved stays: destination PVCs are not transfer objects.
    const pvc = await clusters.destination
      .makeApiClient(CoreV1Api)
      .readNamespacedPersistentVolumeClaim({ namespace: fixture.namespaces.opsTarget, name: "logs" });
    expect(pvc.metadata?.labels?.["dvm.migration.openshift.io/uid"]).toBeDefined();
    // A later invocation for the cancelled DVM does nothing.
    expect(await r.run(requestFor(created))).toEqual({ kind: "gone" });
  });
});
