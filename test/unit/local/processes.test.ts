/**
 * The child-process registry's signal handling, in a real child node process (it must receive a real
 * SIGINT): a program that handles the signal itself keeps its services until its orderly stop is done,
 * and nothing outlives it; a program that does not is cleaned up and dies by the signal.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";

const PROCESSES = join(__dirname, "../../../infra/dev/local/processes.ts");

/** Running (a killed child whose parent is gone may stay a zombie until init reaps it: that is dead). */
function alive(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}

/** Runs `body` in a child node process that has started `sleep 60` through spawnLogged, and SIGINTs it. */
async function runAndInterrupt(dir: string, body: string): Promise<{ output: string; signal: NodeJS.Signals | null; sleepPid: number }> {
  const script = join(dir, "program.ts");
  writeFileSync(
    script,
    `import { spawnLogged } from ${JSON.stringify(PROCESSES)};
const child = spawnLogged({ name: "sleeper", command: "sleep", args: ["60"], logFile: ${JSON.stringify(join(dir, "sleep.log"))} });
const alive = (pid: number) => { try { process.kill(pid, 0); return true; } catch { return false; } };
process.stdout.write("pid " + child.pid + "\\n");
${body}
setInterval(() => {}, 1000);
`,
  );
  const program = spawn(process.execPath, ["--import", "tsx", script], { stdio: ["ignore", "pipe", "inherit"] });
  let output = "";
  program.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
  await vi.waitFor(() => expect(output).toContain("pid "), { timeout: 10_000, interval: 50 });
  const sleepPid = Number(/pid (\d+)/.exec(output)?.[1]);
  program.kill("SIGINT");
  const signal = await new Promise<NodeJS.Signals | null>((resolve) => program.once("exit", (_code, sig) => resolve(sig)));
  return { output, signal, sleepPid };
}

describe("child processes on a signal", () => {
  let dir: string;
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("stay up while the program's own handler stops in order, and are gone once it exits", async () => {
    dir = mkdtempSync(join(tmpdir(), "dvm-processes-"));
    const { output, sleepPid } = await runAndInterrupt(
      dir,
      `process.on("SIGINT", () => setTimeout(() => { process.stdout.write("during stop: " + (alive(child.pid) ? "alive" : "dead") + "\\n"); process.exit(0); }, 300));`,
    );
    expect(output).toContain("during stop: alive");
    expect(alive(sleepPid)).toBe(false);
  });

  it("are killed at once when the program does not handle the signal, which then ends it", async () => {
    dir = mkdtempSync(join(tmpdir(), "dvm-processes-"));
    const { signal, sleepPid } = await runAndInterrupt(dir, "");
    expect(signal).toBe("SIGINT");
    expect(alive(sleepPid)).toBe(false);
  });
});
