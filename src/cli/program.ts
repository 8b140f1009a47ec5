/**
 * The `dvm` command: global options, one module per subcommand (commands/), and one place that turns
 * any failure into a single line on stderr and an exit code (0 ok, 1 error, 2 a migration that failed).
 */
import { Command, CommanderError, Option } from "commander";
import packageJson from "../../package.json" with { type: "json" };
import { ENV } from "../config/environment";
import { registerCancel } from "./commands/cancel";
import { registerCompletion } from "./commands/completion";
import { registerGet } from "./commands/get";
import { registerLedger } from "./commands/ledger";
import { registerList } from "./commands/list";
import { registerMigrate } from "./commands/migrate";
import { registerReport } from "./commands/report";
import { registerSchedule } from "./commands/schedule";
import { registerWatch } from "./commands/watch";
import { CliContext, type GlobalOptions } from "./context";
import { CliError, explainError } from "./errors";
import { type CliIo, println } from "./io";

export const EXIT = { ok: 0, error: 1, migrationFailed: 2, interrupted: 130 } as const;

/** What a command module gets: the I/O and a wrapper that gives its body a context. */
export interface CommandKit {
  io: CliIo;
  /**
   * Wraps a command body for commander: the body receives the context built from the global options,
   * then commander's arguments (positional arguments, then the command's own options). Its return value
   * is the exit code.
   */
  action<A extends unknown[]>(body: (ctx: CliContext, ...args: A) => Promise<number | void>): (...args: unknown[]) => Promise<void>;
}

interface RunState {
  exitCode: number;
  context?: CliContext;
}

export function buildProgram(io: CliIo, state: RunState = { exitCode: 0 }): Command {
  const program = new Command("dvm");
  program
    .description("Start, follow and inspect DirectVolumeMigrations run by the serverless DVM controller.")
    .version(packageJson.version)
    .exitOverride()
    .configureOutput({
      writeOut: (text) => void io.stdout.write(text),
      writeErr: (text) => void io.stderr.write(text),
    })
    .showSuggestionAfterError()
    .addOption(new Option("--kubeconfig <file>", "kubeconfig of the cluster holding the DVMs (default: KUBECONFIG, then ~/.kube/config)"))
    .addOption(new Option("--context <name>", "kubeconfig context to use (default: the current context)"))
    .addOption(new Option("-n, --namespace <namespace>", 'namespace of the DVM (default: the context\'s namespace, else "default")'))
    .addOption(new Option("--table <name>", "DynamoDB ledger table (default: LEDGER_TABLE_NAME)"))
    .addOption(
      new Option("--dynamodb-endpoint <url>", "DynamoDB endpoint, e.g. http://localhost:8000 (default: AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL, else AWS)"),
    );

  const kit: CommandKit = {
    io,
    action:
      <A extends unknown[]>(body: (ctx: CliContext, ...args: A) => Promise<number | void>) =>
      async (...args: unknown[]) => {
        const command = args[args.length - 1] as Command;
        const context = new CliContext(command.optsWithGlobals<GlobalOptions>(), io);
        state.context = context;
        state.exitCode = (await body(context, ...(args.slice(0, -1) as A))) ?? EXIT.ok;
      },
  };
  registerMigrate(program, kit);
  registerGet(program, kit);
  registerList(program, kit);
  registerWatch(program, kit);
  registerCancel(program, kit);
  registerReport(program, kit);
  registerLedger(program, kit);
  registerSchedule(program, kit);
  registerCompletion(program, kit);
  program.addHelpText(
    "after",
    `
Examples:
  dvm migrate move-db -n dvm --pvc shop/db=shop-new --storage-class fast --destination-kubeconfig-secret dst-kubeconfig
  dvm migrate -f move-db.yaml
  dvm watch move-db -n dvm
  dvm report move-db -n dvm --svg timeline.svg
  source <(dvm completion bash)     # or zsh: completion of commands and options

Exit codes: 0 success, 1 error (one line on stderr), 2 the watched migration failed.`,
  );
  return program;
}

/** Runs the command line `argv` (without node and the script) and returns the exit code. */
export async function runCli(argv: readonly string[], io: CliIo): Promise<number> {
  const state: RunState = { exitCode: EXIT.ok };
  const program = buildProgram(io, state);
  try {
    await program.parseAsync([...argv], { from: "user" });
    return state.exitCode;
  } catch (error) {
    // Commander has already printed its own message (unknown option, missing argument, --help).
    if (error instanceof CommanderError) return error.exitCode;
    const explained = explainError(error, state.context?.errorContext ?? {});
    println(io.stderr, `error: ${explained.message}`);
    if (io.env[ENV.cliDebug] && !(error instanceof CliError) && error instanceof Error && error.stack) println(io.stderr, error.stack);
    return explained.exitCode;
  }
}
