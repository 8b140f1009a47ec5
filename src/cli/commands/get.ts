/** `dvm get NAME`: one DVM at a glance. */
import type { Command } from "commander";
import type { CliContext } from "../context";
import { getDvm } from "../lookup";
import type { CommandKit } from "../program";
import { type OutputFormat, outputOption, renderSummary, serialize } from "../render";
import { summarizeDvm } from "../summary";

async function get(ctx: CliContext, name: string, options: { output: OutputFormat }): Promise<number> {
  const dvm = await getDvm(ctx, name);
  const summary = summarizeDvm(dvm, ctx.io.now());
  ctx.io.stdout.write(options.output === "text" ? renderSummary(summary) : serialize({ ...summary, status: dvm.status }, options.output));
  return 0;
}

export function registerGet(program: Command, kit: CommandKit): void {
  program
    .command("get")
    .description("Show one DVM: phase, step, itinerary, age, conditions and the result per PVC")
    .argument("<name>", "name of the DVM")
    .addOption(outputOption())
    .action(kit.action(get));
}
