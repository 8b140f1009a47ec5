/**
 * `dvm cancel NAME`: stop a migration and remove what it created for the transfer, by the same path as
 * `kubectl delete` (src/runner/deletion.ts): the DVM is deleted first, so every later invocation sees the
 * deletion and stops; the deletion waits until no phase of it holds a lease, removes its transfer
 * objects by the DVM's uid on both clusters, retires its ledger entries and releases the finalizer. The
 * controller runs the same steps when it sees the deletion; either may finish first. Migrated data
 * (destination namespaces and PVCs) is left alone.
 */
import type { Command } from "commander";
import { DVM_API_VERSION, DVM_PLURAL } from "../../dvm/types";
import { SecretClusterResolver } from "../../kube/resolver";
import { resourcePath } from "../../kube/rest";
import { silentLogger } from "../../lib/log";
import { continueDeletion, type DeletionDeps } from "../../runner/deletion";
import type { CliContext } from "../context";
import { CliError } from "../errors";
import { println } from "../io";
import { getDvm } from "../lookup";
import type { CommandKit } from "../program";

const POLL_MS = 1_000;

async function cancel(ctx: CliContext, name: string, options: { timeout: string }): Promise<number> {
  const timeoutMs = Number(options.timeout) * 1000;
  if (!(timeoutMs > 0)) throw new CliError(`--timeout: "${options.timeout}" is not a number of seconds`);
  const host = ctx.cluster();
  const dvm = await getDvm(ctx, name);
  const { uid, namespace } = dvm.metadata;

  await host.cluster.rest.request(
    { method: "DELETE", path: resourcePath(DVM_API_VERSION, DVM_PLURAL, namespace, name) },
    `delete DirectVolumeMigration ${namespace}/${name}`,
  );
  println(ctx.io.stdout, `Deleted DirectVolumeMigration ${namespace}/${name} (uid ${uid}); no phase will start for it any more.`);

  const deps: DeletionDeps = {
    store: host.store,
    ledger: ctx.ledger().ledger,
    clusters: new SecretClusterResolver(host.kubeConfig),
    clock: { now: () => ctx.io.now() },
    log: silentLogger,
  };
  const deadline = ctx.io.now() + timeoutMs;
  for (;;) {
    // The DVM as it is now (deleting, or already gone when it had no finalizer or the controller was faster).
    const current = await host.store.get(namespace, name);
    const step = await continueDeletion(deps, current?.metadata.uid === uid ? current : dvm);
    if (step.kind === "released") break;
    if (ctx.io.now() > deadline) {
      const why =
        step.kind === "leaseHeld" ? `phase ${step.phases.join(", ")} still holds its lease` : `transfer resources are still terminating (${step.reason})`;
      throw new CliError(`${namespace}/${name}: ${why}; run cancel again later`);
    }
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
  println(ctx.io.stdout, "Transfer resources removed from both clusters; destination namespaces and PVCs were kept.");
  return 0;
}

export function registerCancel(program: Command, kit: CommandKit): void {
  program
    .command("cancel")
    .description("Stop a migration: delete the DVM, wait for a running phase to finish, remove its transfer resources")
    .argument("<name>", "name of the DVM")
    .option("--timeout <seconds>", "how long to wait for a running phase and for terminating objects", "180")
    .action(kit.action(cancel));
}
