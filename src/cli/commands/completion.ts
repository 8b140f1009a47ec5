/** `dvm completion bash|zsh`: prints the shell completion script (src/cli/completion.ts). */
import { Argument, type Command } from "commander";
import { COMPLETION_SHELLS, type CompletionShell, completionScript } from "../completion";
import type { CommandKit } from "../program";

export function registerCompletion(program: Command, kit: CommandKit): void {
  program
    .command("completion")
    .description("Print the shell completion script: source <(dvm completion bash), or zsh")
    .addArgument(new Argument("<shell>", "the shell").choices(COMPLETION_SHELLS))
    // No cluster or ledger involved: it does not go through kit.action's context.
    .action((shell: CompletionShell) => void kit.io.stdout.write(completionScript(shell, program)));
}
