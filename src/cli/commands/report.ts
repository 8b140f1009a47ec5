/**
 * `dvm report NAME`: how long each phase took, from the DVM's ledger history: share of the total,
 * attempts, repeated executions and what they cost; `--json`; `--svg FILE` for a timeline picture.
 */
import { writeFileSync } from "node:fs";
import { resolve } from "node:path";
import type { Command } from "commander";
import { buildTimingReport, renderTimelineSvg } from "../../report";
import type { CliContext } from "../context";
import { CliError } from "../errors";
import { println } from "../io";
import { ledgerSubject, mainItineraryOf } from "../lookup";
import type { CommandKit } from "../program";
import { renderTimingReport } from "../reportText";

interface ReportOptions {
  json?: boolean;
  svg?: string;
  uid?: string;
}

async function report(ctx: CliContext, name: string | undefined, options: ReportOptions): Promise<number> {
  const subject = await ledgerSubject(ctx, name, options.uid);
  const { ledger, table, endpoint } = ctx.ledger();
  const entries = await ledger.history(subject.uid);
  if (entries.length === 0) {
    throw new CliError(
      `no ledger entries for ${subject.label} in table "${table}" at ${endpoint}: the migration has not started yet, or --table/--dynamodb-endpoint point at another ledger`,
    );
  }
  const timing = buildTimingReport({ entries, now: ctx.io.now(), ...(subject.dvm ? { itinerary: mainItineraryOf(subject.dvm) } : {}) });
  if (options.svg) {
    const file = resolve(ctx.io.cwd, options.svg);
    try {
      writeFileSync(file, renderTimelineSvg(timing, { title: `Phase timeline of ${subject.label}` }));
    } catch (error) {
      throw new CliError(`cannot write ${file}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`);
    }
    // With --json, stdout stays pure JSON.
    println(options.json ? ctx.io.stderr : ctx.io.stdout, `Wrote the timeline to ${file} (${timing.executions} executions)`);
  }
  if (options.json) ctx.io.stdout.write(`${JSON.stringify({ dvm: subject.label, ...timing }, null, 2)}\n`);
  else ctx.io.stdout.write(renderTimingReport(timing, `Phase timing of ${subject.label} (uid ${subject.uid})`));
  return 0;
}

export function registerReport(program: Command, kit: CommandKit): void {
  program
    .command("report")
    .description("Phase timing from the ledger: elapsed time, share, attempts and repeated executions per phase")
    .argument("[name]", "name of the DVM")
    .option("--uid <uid>", "report on this DVM uid without reading the cluster (e.g. a deleted DVM)")
    .option("--json", "print the report as JSON")
    .option("--svg <file>", "also write a timeline (one bar per phase execution) to this SVG file")
    .action(kit.action(report));
}
