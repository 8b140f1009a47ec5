/** `dvm migrate NAME`: create a DVM from flags or from a file, checked with parseDvmSpec before it is sent. */
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import type { Command } from "commander";
import { stringify as toYaml } from "yaml";
import { DVM_API_VERSION, DVM_GROUP, DVM_PLURAL } from "../../dvm/types";
import { toKubeApiError } from "../../kube/errors";
import { KINDS } from "../../kube/objects";
import { KubeRest, resourcePath } from "../../kube/rest";
import { errorText } from "../../lib/errorMessage";
import type { CliContext, GlobalOptions } from "../context";
import { CliError } from "../errors";
import { println } from "../io";
import type { CommandKit } from "../program";
import {
  type DvmDraft,
  draftFromDocument,
  dvmObject,
  formatIssue,
  hasSpecFlags,
  type InputIssue,
  type MigrateFlags,
  specFromFlags,
  validateDraft,
} from "../spec";

interface MigrateOptions extends MigrateFlags {
  file?: string;
  dryRun?: boolean;
}

const collect = (value: string, previous: string[] = []) => [...previous, value];

function readDraft(ctx: CliContext, options: MigrateOptions): { draft: DvmDraft; issues: InputIssue[]; fromFlags: boolean } {
  if (!options.file) {
    const { spec, issues } = specFromFlags(options);
    return { draft: { spec }, issues, fromFlags: true };
  }
  if (hasSpecFlags(options))
    throw new CliError("-f/--file and the spec flags (--pvc, --storage-class, ...) cannot be combined: put everything in the file, or use flags only");
  let text: string;
  const source = options.file === "-" ? "standard input" : resolve(ctx.io.cwd, options.file);
  try {
    text = options.file === "-" ? readFileSync(0, "utf8") : readFileSync(source, "utf8");
  } catch (error) {
    throw new CliError(`cannot read ${source}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`);
  }
  try {
    return { ...draftFromDocument(text, source), fromFlags: false };
  } catch (error) {
    throw new CliError(errorText(error));
  }
}

/** The global options that were given, so the printed next command reaches the same cluster. */
function globalFlags(options: GlobalOptions, namespace: string): string {
  const parts = [`-n ${namespace}`];
  if (options.kubeconfig) parts.push(`--kubeconfig ${options.kubeconfig}`);
  if (options.context) parts.push(`--context ${options.context}`);
  return parts.join(" ");
}

async function migrate(ctx: CliContext, nameArg: string | undefined, options: MigrateOptions): Promise<number> {
  const { io } = ctx;
  const { draft, issues: early, fromFlags } = readDraft(ctx, options);
  const name = nameArg ?? draft.name;
  const namespaceFlag = ctx.options.namespace;
  if (namespaceFlag && draft.namespace && namespaceFlag !== draft.namespace) {
    throw new CliError(`the file's metadata.namespace "${draft.namespace}" differs from -n ${namespaceFlag}: drop one of them`);
  }
  const issues = validateDraft({ ...draft, ...(name ? { name } : {}) }, fromFlags, early);
  if (issues.length > 0) {
    println(io.stderr, `error: the DirectVolumeMigration is not valid (${issues.length} problem${issues.length === 1 ? "" : "s"}); nothing was created:`);
    for (const issue of issues) println(io.stderr, `  ${formatIssue(issue)}`);
    return 1;
  }

  const host = ctx.cluster();
  const namespace = draft.namespace ?? host.namespace;
  const body = dvmObject({ ...draft, name: name!, namespace });
  if (options.dryRun) {
    io.stdout.write(toYaml(body));
    return 0;
  }
  let created: { metadata?: { uid?: string } };
  const action = `create DirectVolumeMigration ${namespace}/${name}`;
  try {
    created = await new KubeRest(host.kubeConfig).request({ method: "POST", path: resourcePath(DVM_API_VERSION, DVM_PLURAL, namespace), body }, action);
  } catch (error) {
    const e = toKubeApiError(error, action);
    if (e.isAlreadyExists) {
      throw new CliError(
        `DirectVolumeMigration "${name}" already exists in namespace "${namespace}": pick another name, or follow it with dvm watch ${name} -n ${namespace}`,
      );
    }
    if (e.isNotFound) {
      if (!(await host.cluster.serves(KINDS.DirectVolumeMigration))) {
        throw new CliError(
          `the API server at ${host.server} does not serve ${DVM_PLURAL}.${DVM_GROUP}: install the CRDs (infra/deploy/crds) or pick another --context`,
        );
      }
      throw new CliError(`namespace "${namespace}" not found: create it, or pass -n/--namespace`);
    }
    if (e.statusCode === 422) throw new CliError(`the API server refused the DirectVolumeMigration: ${e.message.replace(/^[^:]*: /, "")}`);
    throw e;
  }
  println(io.stdout, `Created DirectVolumeMigration ${namespace}/${name} (uid ${created.metadata?.uid ?? "?"})`);
  println(io.stdout, `Follow it with: dvm watch ${name} ${globalFlags(ctx.options, namespace)}`);
  return 0;
}

export function registerMigrate(program: Command, kit: CommandKit): void {
  program
    .command("migrate")
    .description("Create a DirectVolumeMigration from flags or from a file (-f), after checking its spec")
    .argument("[name]", "name of the new DVM (default: metadata.name from the file)")
    .option("-f, --file <file>", "YAML or JSON of a whole DirectVolumeMigration or of its spec (- for standard input)")
    .option("--pvc <pvc>", "NAMESPACE/NAME[=TARGET_NAMESPACE[/TARGET_NAME]] of a PVC to migrate (repeatable)", collect)
    .option("--storage-class <name>", "storage class of the destination PVCs")
    .option("--access-mode <mode>", "access mode of the destination PVCs (repeatable; default ReadWriteOnce)", collect)
    .option("--source-kubeconfig-secret <secret>", "[NAMESPACE/]NAME[:KEY] of a Secret with the source cluster's kubeconfig (default: this cluster)")
    .option("--destination-kubeconfig-secret <secret>", "[NAMESPACE/]NAME[:KEY] of a Secret with the destination cluster's kubeconfig (default: this cluster)")
    .option("--backoff-limit <n>", "rsync attempts per volume before the migration fails (default 20)")
    .option("--endpoint-type <type>", "how the rsync server is exposed: ClusterIP, NodePort, LoadBalancer or Route")
    .option("--verify", "verify the copied data with checksums")
    .option("--rollback", "move the data back from the targets to the sources (migrationType Rollback)")
    .option("--dry-run", "print the DVM that would be created and stop")
    .action(kit.action(migrate));
}
