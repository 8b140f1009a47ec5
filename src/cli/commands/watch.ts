/**
 * `dvm watch NAME`: follow a migration until it completes, reading the DVM and its progress records
 * fresh every --interval seconds. Exit 0 when it succeeded, 2 when it failed (its errors printed).
 */

import type { Command } from "commander";
import { InvalidArgumentError } from "commander";
import { LABEL } from "../../contracts/labels";
import { KINDS } from "../../kube/objects";
import type { CliContext } from "../context";
import { CliError, explainError } from "../errors";
import { getDvm } from "../lookup";
import { type CommandKit, EXIT } from "../program";
import { volumeProgressList } from "../progress";
import { BarWatchView, isFinished, PlainWatchView, snapshotOf, type WatchSnapshot, type WatchView } from "../watchView";

interface WatchOptions {
  interval: number;
  timeout?: number;
  plain?: boolean;
}

/** Reads that fail this many times in a row end the watch; fewer are shown and retried. */
const MAX_FAILED_READS = 5;

function seconds(value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError("expected a positive number of seconds");
  return n;
}

async function readSnapshot(ctx: CliContext, name: string, uid: string): Promise<WatchSnapshot> {
  const host = ctx.cluster();
  const dvm = await host.store.get(host.namespace, name);
  if (!dvm) throw new CliError(`DirectVolumeMigration "${name}" in namespace "${host.namespace}" was deleted while it was watched`);
  if (dvm.metadata.uid !== uid)
    throw new CliError(
      `DirectVolumeMigration "${name}" in namespace "${host.namespace}" was deleted and created again (new uid ${dvm.metadata.uid}): watch it again`,
    );
  const records = await host.cluster.list(KINDS.DirectVolumeMigrationProgress, host.namespace, { [LABEL.dvmUid]: uid });
  return snapshotOf(dvm, volumeProgressList(records), ctx.io.now());
}

async function watch(ctx: CliContext, name: string, options: WatchOptions): Promise<number> {
  const { io } = ctx;
  const first = await getDvm(ctx, name);
  const uid = first.metadata.uid;
  const stdout = io.stdout as typeof io.stdout & NodeJS.WritableStream;
  const view: WatchView = stdout.isTTY && !options.plain ? new BarWatchView(stdout) : new PlainWatchView(io.stdout);
  const deadline = options.timeout !== undefined ? io.now() + options.timeout * 1000 : undefined;
  let last: WatchSnapshot | undefined;
  let interrupted = false;
  const onSignal = () => {
    interrupted = true;
  };
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  try {
    let failedReads = 0;
    for (;;) {
      try {
        last = await readSnapshot(ctx, name, uid);
        failedReads = 0;
        view.show(last);
      } catch (error) {
        if (error instanceof CliError || ++failedReads >= MAX_FAILED_READS) throw error;
        view.note(`read failed (${failedReads}/${MAX_FAILED_READS}), retrying: ${explainError(error, ctx.errorContext).message}`, io.now());
      }
      if (last && isFinished(last)) break;
      if (interrupted) return EXIT.interrupted;
      if (deadline !== undefined && io.now() >= deadline) {
        throw new CliError(
          `still ${last?.phase ? `in ${last.phase}` : "not started"} after ${options.timeout} s (--timeout): the migration goes on; watch it again later`,
        );
      }
      await io.sleep(options.interval * 1000);
      if (interrupted) return EXIT.interrupted;
    }
  } finally {
    process.removeListener("SIGINT", onSignal);
    process.removeListener("SIGTERM", onSignal);
    view.close(last);
  }
  return last.result === "Succeeded" ? EXIT.ok : EXIT.migrationFailed;
}

export function registerWatch(program: Command, kit: CommandKit): void {
  program
    .command("watch")
    .description("Follow a DVM until it completes: current step and a progress bar per PVC; exit 0 on success, 2 on failure")
    .argument("<name>", "name of the DVM")
    .option("--interval <seconds>", "seconds between readings", seconds, 1)
    .option("--timeout <seconds>", "give up (exit 1) after this many seconds", seconds)
    .option("--plain", "print timestamped lines even on a terminal")
    .action(kit.action(watch));
}
