/**
 * Shell completion for `dvm`, generated from the program's own commands and options, so a new command or
 * option completes without touching this file. Completes command names, then the chosen command's
 * options and the global ones; anything else falls back to file names.
 *
 *   bash: source <(dvm completion bash)        zsh: source <(dvm completion zsh)
 */
import type { Command } from "commander";

export const COMPLETION_SHELLS = ["bash", "zsh"] as const;
export type CompletionShell = (typeof COMPLETION_SHELLS)[number];

interface CommandWords {
  name: string;
  options: string[];
}

function optionWords(command: Command): string[] {
  return command.options.flatMap((option) => [option.long, option.short].filter((flag): flag is string => Boolean(flag)));
}

function commandWords(program: Command): { globals: string[]; commands: CommandWords[] } {
  return {
    globals: [...new Set([...optionWords(program), "--help"])],
    commands: program.commands.map((command) => ({ name: command.name(), options: [...new Set([...optionWords(command), "--help"])] })),
  };
}

export function completionScript(shell: CompletionShell, program: Command): string {
  const { globals, commands } = commandWords(program);
  const names = commands.map((c) => c.name).join(" ");
  return shell === "bash" ? bashScript(names, globals.join(" "), commands) : zshScript(names, globals.join(" "), commands);
}

function bashScript(names: string, globals: string, commands: CommandWords[]): string {
  const cases = commands.map((c) => `    ${c.name}) words="${c.options.join(" ")} ${globals}" ;;`).join("\n");
  return `# bash completion for dvm: source <(dvm completion bash)
_dvm() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" sub="" word words i
  for ((i = 1; i < COMP_CWORD; i++)); do
    word="\${COMP_WORDS[i]}"
    case " ${names} " in *" $word "*) sub="$word"; break ;; esac
  done
  case "$sub" in
    "") words="${names} ${globals}" ;;
${cases}
  esac
  if [[ -z "$sub" || "$cur" == -* ]]; then
    mapfile -t COMPREPLY < <(compgen -W "$words" -- "$cur")
  fi
}
complete -o default -F _dvm dvm
`;
}

function zshScript(names: string, globals: string, commands: CommandWords[]): string {
  const cases = commands.map((c) => `    ${c.name}) opts=(${c.options.join(" ")} ${globals}) ;;`).join("\n");
  return `#compdef dvm
# zsh completion for dvm: source <(dvm completion zsh), or save as _dvm in a directory of $fpath
_dvm() {
  local -a commands opts
  local sub="" word
  commands=(${names})
  for word in "\${(@)words[2,CURRENT-1]}"; do
    if (( \${commands[(Ie)$word]} )); then sub="$word"; break; fi
  done
  case "$sub" in
    "") compadd -- "\${commands[@]}" ${globals}; return ;;
${cases}
  esac
  if [[ "$PREFIX" == -* ]]; then compadd -- "\${opts[@]}"; else _files; fi
}
if [[ "\${funcstack[1]}" == "_dvm" ]]; then _dvm "$@"; else compdef _dvm dvm; fi
`;
}
