/** `dvm list`: the DVMs of a namespace (or all), one line each. */
import type { Command } from "commander";
import type { CliContext } from "../context";
import { println } from "../io";
import { listDvms } from "../lookup";
import type { CommandKit } from "../program";
import { type OutputFormat, outputOption, renderSummaryTable, serialize } from "../render";
import { summarizeDvm } from "../summary";

async function list(ctx: CliContext, options: { output: OutputFormat; allNamespaces?: boolean }): Promise<number> {
  const all = Boolean(options.allNamespaces);
  const dvms = await listDvms(ctx, all);
  const summaries = dvms.map((dvm) => summarizeDvm(dvm, ctx.io.now()));
  if (options.output !== "text") {
    ctx.io.stdout.write(serialize(summaries, options.output));
  } else if (summaries.length === 0) {
    println(ctx.io.stderr, all ? "No DirectVolumeMigrations found." : `No DirectVolumeMigrations found in namespace "${ctx.cluster().namespace}".`);
  } else {
    ctx.io.stdout.write(renderSummaryTable(summaries, all));
  }
  return 0;
}

export function registerList(program: Command, kit: CommandKit): void {
  program
    .command("list")
    .alias("ls")
    .description("List DVMs with their phase, step, result and age")
    .option("-A, --all-namespaces", "list the DVMs of every namespace")
    .addOption(outputOption())
    .action(kit.action(list));
}
