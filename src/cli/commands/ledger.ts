/** `dvm ledger NAME`: the raw ledger entries of a DVM, for troubleshooting. */
import type { Command } from "commander";
import type { LedgerEntry } from "../../ledger";
import type { CliContext } from "../context";
import { println } from "../io";
import { ledgerSubject } from "../lookup";
import type { CommandKit } from "../program";
import { formatSeconds, formatTime, renderTable } from "../table";

function outcomeOf(entry: LedgerEntry): string {
  return entry.outcome ? `${entry.outcome.result} -> ${entry.outcome.nextPhase}` : "";
}

export function renderLedger(entries: readonly LedgerEntry[]): string {
  const table = renderTable(
    ["GEN", "PHASE", "STATE", "ATTEMPTS", "TAKEOVERS", "WAITS", "FAILURES", "STARTED", "FINISHED", "ELAPSED", "CLAIMS", "OUTCOME"],
    entries.map((e) => [
      String(e.key.generation),
      e.key.phase,
      e.state,
      String(e.attempts),
      String(e.takeovers),
      String(e.waits),
      String(e.failures),
      formatTime(e.startedAt),
      formatTime(e.finishedAt),
      formatSeconds(e.elapsedSeconds),
      e.claims ? String(e.claims.length) : "",
      outcomeOf(e),
    ]),
    ["right", "left", "left", "right", "right", "right", "right", "left", "left", "right", "right", "left"],
  );
  const notes = entries.flatMap((e) => [
    ...(e.lastError ? [`${e.key.phase}: last error: ${e.lastError}`] : []),
    ...(e.outcome?.errors ?? []).map((error) => `${e.key.phase}: ${error}`),
  ]);
  return `${table}\n${notes.length > 0 ? `\n${notes.join("\n")}\n` : ""}`;
}

async function ledger(ctx: CliContext, name: string | undefined, options: { json?: boolean; uid?: string }): Promise<number> {
  const subject = await ledgerSubject(ctx, name, options.uid);
  const { ledger: phaseLedger, table, endpoint } = ctx.ledger();
  const entries = await phaseLedger.history(subject.uid);
  if (options.json) {
    ctx.io.stdout.write(`${JSON.stringify(entries, null, 2)}\n`);
  } else if (entries.length === 0) {
    println(ctx.io.stderr, `No ledger entries for ${subject.label} in table "${table}" at ${endpoint}.`);
  } else {
    println(ctx.io.stdout, `Ledger entries of ${subject.label} (uid ${subject.uid}) in table "${table}":`);
    ctx.io.stdout.write(renderLedger(entries));
  }
  return 0;
}

export function registerLedger(program: Command, kit: CommandKit): void {
  program
    .command("ledger")
    .description("Print the DVM's raw ledger entries (one per phase and generation)")
    .argument("[name]", "name of the DVM")
    .option("--uid <uid>", "read the entries of this DVM uid without reading the cluster")
    .option("--json", "print the entries as JSON")
    .action(kit.action(ledger));
}
