/**
 * A concurrent writer of the DVMs: keeps patching an annotation of every unfinished DVM of the run, so
 * their resourceVersion keeps moving and guarded status writes based on an earlier read answer 409.
 */
import { CustomObjectsApi, type KubeConfig, PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";
import { DVM_GROUP, DVM_PLURAL, DVM_VERSION } from "../../../src/dvm/types";
import type { StartedMigration } from "./fixture";
import type { DvmHistory } from "./observatory";
import { between, type Random, sleep } from "./random";

const CONFLICT_ANNOTATION = "chaos.dvm.test/tick";

export class ConflictWriter {
  patches = 0;
  errors = 0;
  private stopped = false;
  private loop: Promise<void> | undefined;
  private readonly api: CustomObjectsApi;

  constructor(
    kubeConfig: KubeConfig,
    private readonly migrations: readonly StartedMigration[],
    private readonly history: DvmHistory,
    private readonly random: Random,
    /** Pause between rounds, drawn in [min, max] ms. */
    private readonly intervalMs: [number, number] = [150, 400],
  ) {
    this.api = kubeConfig.makeApiClient(CustomObjectsApi);
  }

  start(): void {
    this.loop ??= this.run();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.loop;
  }

  /** One patch of one DVM's annotation (also used to make a change the relay misses during a gap). */
  async touch(migration: Pick<StartedMigration, "namespace" | "name">): Promise<void> {
    await this.api.patchNamespacedCustomObject(
      {
        group: DVM_GROUP,
        version: DVM_VERSION,
        namespace: migration.namespace,
        plural: DVM_PLURAL,
        name: migration.name,
        body: { metadata: { annotations: { [CONFLICT_ANNOTATION]: String(this.patches) } } },
      },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    );
    this.patches++;
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      const open = this.migrations.filter((m) => this.history.completedAt(m.uid) === undefined);
      await Promise.all(open.map((m) => this.touch(m).catch(() => void this.errors++)));
      await sleep(between(this.random, ...this.intervalMs));
    }
  }
}
