/**
 * `dvm cancel NAME`: stop a migration and remove what it created for the transfer. Safe with the
 * controller running: the DVM is deleted first, so every later invocation finds it gone; the one
 * invocation that may be running a phase holds the ledger lease, and cleanup waits until no lease of
 * this DVM is held before it deletes the transfer objects by this DVM's uid on both clusters.
 * Migrated data (destination namespaces and PVCs) is left alone.
 */
import { DEFAULT_MIGRATION_POLICY } from "../../dvm/policy";
import type { Command } from "commander";
import { parseDvmSpec, DVM_API_VERSION, DVM_PLURAL } from "../../dvm/types";
import { resourcePath } from "../../kube/rest";
import { SecretClusterResolver } from "../../kube/resolver";
import { silentLogger } from "../../log";
import { deleteTransferResources, waitForTransferResourcesGone } from "../../phases/cleanup";
import type { PhaseContext } from "../../phases/types";
import { volumePairs } from "../../phases/volumes";
import type { CliContext } from "../context";
import { CliError } from "../errors";
import { println } from "../io";
import { getDvm, mainItineraryOf } from "../lookup";
import type { CommandKit } from "../program";

const POLL_MS = 1_000;

async function cancel(ctx: CliContext, name: string, options: { timeout: string }): Promise<number> {
  const timeoutMs = Number(options.timeout) * 1000;
  if (!(timeoutMs > 0)) throw new CliError(`--timeout: "${options.timeout}" is not a number of seconds`);
  const host = ctx.cluster();
  const dvm = await getDvm(ctx, name);
  const parsed = parseDvmSpec(dvm.spec);
  const { uid, namespace, generation } = dvm.metadata;

  await host.cluster.rest.request({ method: "DELETE", path: resourcePath(DVM_API_VERSION, DVM_PLURAL, namespace, name) }, `delete DirectVolumeMigration ${namespace}/${name}`);
  println(ctx.io.stdout, `Deleted DirectVolumeMigration ${namespace}/${name} (uid ${uid}); no phase will start for it any more.`);
  if (!parsed.ok) {
    println(ctx.io.stdout, "Its spec was invalid, so nothing was created for the transfer.");
    return 0;
  }

  // A phase that was running when the DVM went away finishes first: its lease says so.
  const deadline = ctx.io.now() + timeoutMs;
  const { ledger } = ctx.ledger();
  for (;;) {
    // A RUNNING entry whose lease has ended belongs to a holder that crashed: nothing runs there.
    const running = (await ledger.history(uid)).filter((e) => e.state === "RUNNING" && (e.leaseExpiresAt ?? 0) > ctx.io.now());
    if (running.length === 0) break;
    if (ctx.io.now() > deadline) throw new CliError(`phase ${running.map((e) => e.key.phase).join(", ")} of ${namespace}/${name} still holds its lease; run cancel again later`);
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }

  const clusters = await new SecretClusterResolver(host.kubeConfig).resolve(namespace, parsed.spec);
  const itinerary = mainItineraryOf(dvm);
  const context: PhaseContext = {
    dvm: { name, namespace, uid, generation },
    spec: { ...parsed.spec, deleteProgressReportingCRs: true },
    status: dvm.status,
    itinerary,
    phase: "CleanupAfterFailure",
    clusters: itinerary === "VolumeMigrationRollback" ? { ...clusters, source: clusters.destination, destination: clusters.source } : clusters,
    volumes: volumePairs(parsed.spec, itinerary),
    // Cleanup creates no pod: the image is never used.
    transferImage: DEFAULT_MIGRATION_POLICY.defaultTransferImage,
    attempt: 0,
    clock: { now: () => ctx.io.now() },
    log: silentLogger,
  };
  await deleteTransferResources({ progressRecords: true })(context);
  while ((await waitForTransferResourcesGone(context)).kind !== "advance") {
    if (ctx.io.now() > deadline) throw new CliError(`transfer resources of ${namespace}/${name} are still terminating; run cancel again later`);
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
