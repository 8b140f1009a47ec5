/**
 * `dvm completion bash|zsh`: the bash script is sourced into a real bash and asked for completions the
 * way bash asks; the zsh script (no zsh on this machine type) is checked for the same words.
 */
import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import type { CliIo } from "../../../src/cli/io";
import { runCli } from "../../../src/cli/program";

async function dvm(...argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = "";
  let stderr = "";
  const io: CliIo = {
    stdout: { write: (text: string) => (stdout += text) },
    stderr: { write: (text: string) => (stderr += text) },
    env: {},
    now: () => 0,
    sleep: async () => {},
    cwd: process.cwd(),
  };
  const code = await runCli(argv, io);
  return { code, stdout, stderr };
}

/** What bash's programmable completion offers for the command line `line` (the cursor at its end). */
function bashComplete(script: string, line: string): string[] {
  const words = line.split(" ");
  const program = `${script}
COMP_WORDS=(${words.map((w) => `'${w}'`).join(" ")}); COMP_CWORD=${words.length - 1}
_dvm; printf '%s\\n' "\${COMPREPLY[@]}"`;
  const result = spawnSync("bash", ["-c", program], { encoding: "utf8" });
  expect(result.stderr).toBe("");
  return result.stdout.split("\n").filter(Boolean);
}

describe("dvm completion", () => {
  it("bash: commands first, then the chosen command's options and the global ones", async () => {
    const { code, stdout } = await dvm("completion", "bash");
    expect(code).toBe(0);
    expect(bashComplete(stdout, "dvm ")).toEqual(
      expect.arrayContaining(["migrate", "get", "list", "watch", "report", "ledger", "schedule", "cancel", "completion"]),
    );
    expect(bashComplete(stdout, "dvm re")).toEqual(["report"]);
    expect(bashComplete(stdout, "dvm report --")).toEqual(expect.arrayContaining(["--json", "--svg", "--kubeconfig", "--namespace"]));
    expect(bashComplete(stdout, "dvm -n shop list -")).toEqual(expect.arrayContaining(["--all-namespaces", "-A", "--output"]));
    expect(bashComplete(stdout, "dvm report --")).not.toContain("--all-namespaces");
    // A DVM name or a file: nothing from us, bash's default (-o default) takes over.
    expect(bashComplete(stdout, "dvm get my")).toEqual([]);
  });

  it("zsh: a #compdef script with the same commands and options", async () => {
    const { code, stdout } = await dvm("completion", "zsh");
    expect(code).toBe(0);
    expect(stdout.startsWith("#compdef dvm\n")).toBe(true);
    expect(stdout).toContain("commands=(migrate get list watch cancel report ledger schedule completion)");
    expect(stdout).toMatch(/report\) opts=\(--uid --json --svg --help .*--kubeconfig/);
    expect(stdout).toContain("compdef _dvm dvm");
  });

  it("names the shells it knows when given another", async () => {
    const { code, stderr } = await dvm("completion", "fish");
    expect(code).toBe(1);
    expect(stderr).toContain("Allowed choices are bash, zsh");
  });
});
