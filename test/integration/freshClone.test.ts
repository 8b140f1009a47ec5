/**
 * A new user's first minutes, for real: the repository cloned into an empty folder, the README's
 * commands run in order as the README writes them. `npm start` must set everything up (npm
 * dependencies, control plane, DynamoDB Local: the caches outside the checkout are reused), print
 * "ready" with every endpoint, and stop on Ctrl-C (SIGINT to its process group, as a terminal sends it)
 * leaving no process behind. `npm test` is run narrowed to one unit file (the whole suite would run this
 * test again). `.ci/run` takes too long to run here: its structure is checked (the README's test command,
 * then what the README says besides), and its external-endpoints step is run with a suite that finds no
 * test, to show that it stops every service it started.
 *
 * Every process started here carries a marker in its environment; "nothing left behind" means no
 * process with that marker exists once the command has exited.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { until } from "../support/poll";

const ROOT = join(import.meta.dirname, "..", "..");
const MARK = `DVM_FRESH_CLONE_MARK=${randomUUID()}`;
const scratch = mkdtempSync(join(tmpdir(), "dvm-fresh-clone-"));
const clone = join(scratch, "dvm-serverless");
const MINUTES = 60_000;

/** The environment of a new user's shell: none of this run's endpoints, clusters or npm script variables. */
function userEnv(): NodeJS.ProcessEnv {
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([key]) => !/^(npm_|KUBECONFIG$|DVM_|AWS_|LEDGER_|RELAY_|VITEST|NODE_OPTIONS$|TEST$)/i.test(key)),
  );
  const [name, value] = MARK.split("=") as [string, string];
  // Plain text: the assertions read the output, not a terminal.
  return { ...env, NO_COLOR: "1", FORCE_COLOR: "0", [name]: value };
}

/** Pids of live processes whose environment holds this test's marker. */
function markedProcesses(): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      if (readFileSync(`/proc/${entry}/environ`, "latin1").split("\0").includes(MARK)) pids.push(Number(entry));
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return pids;
}

function describeProcesses(pids: number[]): string {
  return pids
    .map((pid) => {
      try {
        return `${pid}: ${readFileSync(`/proc/${pid}/cmdline`, "latin1").replaceAll("\0", " ").slice(0, 200)}`;
      } catch {
        return `${pid}: (gone)`;
      }
    })
    .join("\n");
}

interface Command {
  child: ChildProcess;
  output: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Runs `line` with sh in `cwd`, as the leader of its own process group (a terminal's foreground job). */
function runLine(line: string, cwd: string): Command {
  const child = spawn("sh", ["-c", line], { cwd, env: userEnv(), detached: true, stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  child.stdout!.on("data", (chunk: Buffer) => (output += chunk.toString("utf8")));
  child.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString("utf8")));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on("close", (code, signal) => resolve({ code, signal })),
  );
  // Colour codes stripped, should a tool colour anyway.
  return { child, output: () => output.replace(/\x1b\[[0-9;]*m/g, ""), exited };
}

/** Waits until `command` has printed `text`; fails at once if it exits first. */
async function untilPrinted(what: string, command: Command, text: string, timeoutMs: number): Promise<void> {
  let exited = false;
  void command.exited.then(() => (exited = true));
  const tail = () => command.output().slice(-4000);
  const printed = () => {
    if (command.output().includes(text)) return true;
    if (exited) throw new Error(`exited before ${what}:\n${tail()}`);
    return false;
  };
  await until(what, printed, (yes) => yes, { timeoutMs, show: () => "not printed yet", context: tail });
}

/** The commands of the README's ```sh blocks under `heading`. */
function readmeCommands(readme: string, heading: string): string[] {
  const section = readme.split(/^## /m).find((s) => s.startsWith(`${heading}\n`)) ?? "";
  return [...section.matchAll(/```sh\n([\s\S]*?)```/g)].flatMap((m) => m[1]!.split("\n").filter((l) => l.trim() && !l.startsWith("#")));
}

const readme = readFileSync(join(ROOT, "README.md"), "utf8");
const startCommands = readmeCommands(readme, "Run it");
const testCommands = readmeCommands(readme, "Test");
const leftovers: Command[] = [];

beforeAll(async () => {
  const cloned = runLine(`git clone --quiet "${ROOT}" "${clone}"`, scratch);
  expect((await cloned.exited).code, cloned.output()).toBe(0);
});

afterAll(async () => {
  for (const command of leftovers) {
    try {
      process.kill(-command.child.pid!, "SIGKILL");
    } catch {
      // already gone
    }
  }
  for (const pid of markedProcesses()) process.kill(pid, "SIGKILL");
  rmSync(scratch, { recursive: true, force: true });
});

describe("a fresh clone", () => {
  it("has the README's two commands: npm start, then npm test", () => {
    expect(startCommands).toEqual(["npm start"]);
    expect(testCommands).toEqual(["npm test"]);
  });

  it(
    "npm start sets everything up, prints every endpoint once ready, and stops on Ctrl-C leaving no process",
    async () => {
      const start = runLine(startCommands[0]!, clone);
      leftovers.push(start);
      await untilPrinted('"dvm controller ready"', start, "dvm controller ready", 15 * MINUTES);
      await untilPrinted("the end of the banner", start, "Ctrl-C stops everything.", MINUTES);
      const banner = start.output();
      expect(banner).toMatch(/\[setup\] npm dependencies: ok/);
      expect(banner).toMatch(/KUBECONFIG=\S+source\.kubeconfig/);
      expect(banner).toMatch(/destination cluster KUBECONFIG=\S+destination\.kubeconfig/);
      expect(banner).toMatch(/ledger {14}http:\/\/127\.0\.0\.1:\d+ {2}table dvm-local-ledger/);
      expect(banner).toMatch(/phase function {4}dvm-serverless-offline-\S+/);
      expect(banner).toMatch(/trigger function {2}dvm-serverless-offline-trigger/);
      const triggerUrl = /POST (http:\/\/127\.0\.0\.1:\d+\/migrations)/.exec(banner)?.[1];
      expect(triggerUrl, banner).toBeDefined();
      // The trigger answers there: an event that is not one is refused by name, not by a closed port.
      const refused = await fetch(triggerUrl!, { method: "POST", headers: { "content-type": "application/cloudevents+json" }, body: "{}" });
      expect(refused.status).toBe(400);
      expect(markedProcesses().length).toBeGreaterThan(3);

      process.kill(-start.child.pid!, "SIGINT");
      const { code, signal } = await start.exited;
      expect(start.output()).toContain("[dvm] stopped");
      // The controller exits 0 once stopped; sh, like the user's shell, ends by the Ctrl-C itself.
      expect(code === 0 || code === 130 || signal === "SIGINT", `code ${code}, signal ${signal}`).toBe(true);
      const left = markedProcesses();
      expect(left, describeProcesses(left)).toEqual([]);
    },
    20 * MINUTES,
  );

  it(
    "npm test prepares the machine, type-checks and runs the tests (narrowed to one unit file here)",
    async () => {
      const test = runLine(`${testCommands[0]} -- --project unit test/unit/dvm/itinerary.test.ts`, clone);
      leftovers.push(test);
      const { code } = await test.exited;
      expect(code, test.output().slice(-4000)).toBe(0);
      expect(test.output()).toMatch(/\[setup\] control plane \(kube-apiserver, etcd, kwok\): ok/);
      expect(test.output()).toMatch(/\[setup\] DynamoDB Local: ok/);
      expect(test.output()).toMatch(/Test Files\s+1 passed/);
      const left = markedProcesses();
      expect(left, describeProcesses(left)).toEqual([]);
    },
    10 * MINUTES,
  );
});

describe(".ci/run", () => {
  const script = readFileSync(join(ROOT, ".ci", "run"), "utf8");
  const commands = script
    .split("\n")
    .filter((line) => line.trim() && !line.startsWith("#") && !/^(set -euo pipefail|cd "\$\(dirname "\$0"\)\/\.\.")$/.test(line));

  it("runs the README's test command, then only what the README's Test section says besides", () => {
    expect(commands[0]).toBe(testCommands[0]);
    const testSection = readme.split(/^## /m).find((s) => s.startsWith("Test\n"))!;
    for (const command of commands.slice(1)) expect(testSection).toContain(command);
    expect(commands).toEqual(["npm test", "bash .ci/external-endpoints.sh"]);
  });

  it(
    "its external-endpoints step stops every service it started (one process group) when it exits",
    async () => {
      const external = runLine("bash .ci/external-endpoints.sh --passWithNoTests test/integration/no-such-file", clone);
      leftovers.push(external);
      await untilPrinted("the services", external, "running the integration suite against", 5 * MINUTES);
      const { code } = await external.exited;
      expect(code, external.output().slice(-4000)).toBe(0);
      const left = markedProcesses();
      expect(left, describeProcesses(left)).toEqual([]);
    },
    10 * MINUTES,
  );
});
