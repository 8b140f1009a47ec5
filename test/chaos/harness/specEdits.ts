/**
 * Spec edits mid-migration. The CRD makes the spec immutable (a CEL rule, `self == oldSelf`), so first
 * every unfinished DVM is edited the way a user would (a merge patch of spec.backOffLimit) and the API
 * server must refuse each edit (422). Then one edit is pushed through anyway, the way an older CRD
 * without the rule would let it: the rule is taken out of the CRD for that one edit and put back at
 * once. The runner must then fail that DVM with the condition it sets for a generation change.
 * Needs a host control plane of the run's own: the CRD is cluster-wide.
 */
import {
  ApiException,
  ApiextensionsV1Api,
  CustomObjectsApi,
  type KubeConfig,
  PatchStrategy,
  setHeaderOptions,
  type V1CustomResourceDefinition,
} from "@kubernetes/client-node";
import { DVM_GROUP, DVM_PLURAL, DVM_VERSION } from "../../../src/dvm/types";
import type { StartedMigration } from "./fixture";
import { sleep } from "./random";

const CRD_NAME = `${DVM_PLURAL}.${DVM_GROUP}`;
/** Where the immutability rule sits in the DVM CRD (infra/crds/directvolumemigrations.yaml). */
const RULE_PATH = "/spec/versions/0/schema/openAPIV3Schema/properties/spec/x-kubernetes-validations";

export interface SpecEditCounts {
  /** Edits the API server refused with 422 (the CEL rule). */
  refused: number;
  /** Edits that went through while the rule was in place: must stay 0. */
  acceptedWithRule: number;
  /** Edits pushed through with the rule taken out, by DVM name. */
  forced: string[];
}

export class SpecEditor {
  readonly counts: SpecEditCounts = { refused: 0, acceptedWithRule: 0, forced: [] };
  private readonly dvms: CustomObjectsApi;
  private readonly crds: ApiextensionsV1Api;
  private edits = 0;

  constructor(kubeConfig: KubeConfig) {
    this.dvms = kubeConfig.makeApiClient(CustomObjectsApi);
    this.crds = kubeConfig.makeApiClient(ApiextensionsV1Api);
  }

  /** One user edit of each DVM; counts the refusals. */
  async editEach(migrations: readonly StartedMigration[]): Promise<void> {
    for (const migration of migrations) {
      const outcome = await this.edit(migration);
      if (outcome === "refused") this.counts.refused++;
      else if (outcome === "applied") this.counts.acceptedWithRule++;
    }
  }

  /** Takes the immutability rule out of the CRD, edits `migration`'s spec, puts the rule back. */
  async forceThrough(migration: StartedMigration): Promise<void> {
    const crd = await this.crds.readCustomResourceDefinition({ name: CRD_NAME });
    const rules = ruleOf(crd);
    if (!rules) throw new Error(`the CRD ${CRD_NAME} has no x-kubernetes-validations on spec: nothing to take out`);
    await this.patchCrd([{ op: "remove", path: RULE_PATH }]);
    try {
      // The API server applies a CRD change within moments; until then the edit is still refused.
      for (let i = 0; i < 100; i++) {
        if ((await this.edit(migration)) === "applied") {
          this.counts.forced.push(migration.name);
          return;
        }
        await sleep(100);
      }
      throw new Error(`the spec edit of ${migration.name} was still refused 10 s after the rule was taken out of the CRD`);
    } finally {
      await this.patchCrd([{ op: "add", path: RULE_PATH, value: rules }]);
      await this.waitForRule(migration);
    }
  }

  /** Until an edit is refused again: the rule is back in force before the run goes on. */
  private async waitForRule(migration: StartedMigration): Promise<void> {
    for (let i = 0; i < 100; i++) {
      if ((await this.edit(migration)) === "refused") return;
      await sleep(100);
    }
    throw new Error("the CRD's immutability rule was not in force again 10 s after it was put back");
  }

  private async edit(migration: StartedMigration): Promise<"refused" | "applied" | "gone"> {
    try {
      await this.dvms.patchNamespacedCustomObject(
        {
          group: DVM_GROUP,
          version: DVM_VERSION,
          namespace: migration.namespace,
          plural: DVM_PLURAL,
          name: migration.name,
          // A different value each time, so each edit is a real change of the spec.
          body: { spec: { backOffLimit: 3 + (this.edits++ % 7) } },
        },
        setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
      );
      return "applied";
    } catch (error) {
      if (error instanceof ApiException && error.code === 422) return "refused";
      if (error instanceof ApiException && error.code === 404) return "gone";
      throw error;
    }
  }

  private async patchCrd(body: object[]): Promise<void> {
    await this.crds.patchCustomResourceDefinition({ name: CRD_NAME, body }, setHeaderOptions("Content-Type", PatchStrategy.JsonPatch));
  }
}

function ruleOf(crd: V1CustomResourceDefinition): unknown {
  return crd.spec.versions[0]?.schema?.openAPIV3Schema?.properties?.spec?.x_kubernetes_validations;
}
