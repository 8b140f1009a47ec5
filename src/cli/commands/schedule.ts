/** `dvm schedule NAME`: a schedule's Stage DVMs, one line per scheduled time, with the delta each moved. */
import type { Command } from "commander";
import { formatBytes } from "../../report";
import type { CliContext } from "../context";
import { println } from "../io";
import { listDvms } from "../lookup";
import type { CommandKit } from "../program";
import { type OutputFormat, outputOption, serialize } from "../render";
import { scheduleRuns } from "../scheduleRuns";
import { renderTable } from "../table";

async function schedule(ctx: CliContext, name: string, options: { output: OutputFormat }): Promise<number> {
  const runs = scheduleRuns(await listDvms(ctx, false), name);
  if (options.output !== "text") {
    ctx.io.stdout.write(serialize(runs, options.output));
  } else if (runs.length === 0) {
    println(ctx.io.stderr, `No runs of schedule "${name}" in namespace "${ctx.cluster().namespace}".`);
  } else {
    const bytes = (n: number | undefined) => (n === undefined ? "-" : formatBytes(n));
    const rows = runs.map((r) => [r.name, r.scheduledTime ?? "-", r.phase, bytes(r.deltaBytes), bytes(r.sentBytes), r.filesTransferred?.toString() ?? "-"]);
    println(ctx.io.stdout, renderTable(["NAME", "SCHEDULED", "PHASE", "DELTA", "SENT", "FILES"], rows, ["left", "left", "left", "right", "right", "right"]));
  }
  return 0;
}

export function registerSchedule(program: Command, kit: CommandKit): void {
  program
    .command("schedule")
    .argument("<name>", "the schedule's name (the input's \"schedule\")")
    .description("List a schedule's Stage DVMs (one per scheduled time) with the delta each moved, from rsync's statistics")
    .addOption(outputOption())
    .action(kit.action(schedule));
}
