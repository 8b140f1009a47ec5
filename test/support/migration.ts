/**
 * Fixtures for end-to-end migrations on the two test clusters: source namespaces with PVCs, a target
 * storage class on the destination, the destination's kubeconfig as a Secret on the host (the source
 * cluster hosts the DVMs), and a driver that calls the runner the way the relay does.
 */

import { readFileSync } from "node:fs";
import { CoreV1Api, CustomObjectsApi, type KubeConfig, StorageV1Api, Watch } from "@kubernetes/client-node";
import { createPhaseRunner, type PhaseRunnerConfig } from "../../src/aws/phaseRunner";
import { LABEL } from "../../src/contracts/labels";
import type { ReconcileRequest, RunResult } from "../../src/contracts/request";
import { EXECUTABLE_PHASES, type ExecutablePhaseName } from "../../src/dvm/itinerary";
import { DEFAULT_MIGRATION_POLICY, type MigrationPolicy } from "../../src/dvm/policy";
import { type DirectVolumeMigration, DVM_API_VERSION, DVM_GROUP, DVM_KIND, DVM_PLURAL, DVM_VERSION } from "../../src/dvm/types";
import { toDvm } from "../../src/kube/dvmStore";
import { KubeCluster } from "../../src/kube/kubeCluster";
import { KINDS } from "../../src/kube/objects";
import { PHASE_BODIES } from "../../src/phases";
import { transferSelector } from "../../src/phases/names";
import type { PhaseBody } from "../../src/phases/types";
import type { PhaseRunner } from "../../src/runner/runner";
import type { TestClusters } from "./clusters";
import type { FreshTable } from "./dynamo";

/**
 * The harness's operator policy: the fixture's DVMs live in `dvm-<run>` and move PVCs across namespaces,
 * as an admin's would, so "dvm-*" are admin namespaces here. Tests of the policy itself use others.
 */
/** kwok's test annotations (infra/dev/kwok/stages.yaml) steer the fake pods: the tests' operator allows them. */
export const TEST_MIGRATION_POLICY: MigrationPolicy = {
  ...DEFAULT_MIGRATION_POLICY,
  adminNamespaces: ["dvm-system", "dvm-*"],
  transfer: { ...DEFAULT_MIGRATION_POLICY.transfer, podAnnotations: ["dvm.test/*"] },
};

export interface MigrationFixture {
  run: string;
  dvmNamespace: string;
  storageClass: string;
  /** [source namespace, target namespace] pairs. */
  namespaces: { shop: string; ops: string; shopTarget: string; opsTarget: string };
  spec: Record<string, unknown>;
  sameCluster: boolean;
}

const ignoreExists = (error: unknown) => {
  if ((error as { code?: number }).code !== 409) throw error;
};

export async function createMigrationFixture(clusters: TestClusters, run: string): Promise<MigrationFixture> {
  const sameCluster = clusters.source.getCurrentCluster()?.server === clusters.destination.getCurrentCluster()?.server;
  const core = clusters.source.makeApiClient(CoreV1Api);
  const shop = `shop-${run}`;
  const ops = `ops-${run}`;
  const dvmNamespace = `dvm-${run}`;
  const storageClass = `fast-${run}`;
  for (const name of [shop, ops, dvmNamespace]) {
    await core
      .createNamespace({ body: { metadata: { name, labels: { team: name.split("-")[0]!, [`${name.split("-")[0]}.example.com/tier`]: "gold" } } } })
      .catch(ignoreExists);
  }
  const pvc = (namespace: string, name: string, size: string) =>
    core
      .createNamespacedPersistentVolumeClaim({
        namespace,
        body: { metadata: { name, labels: { app: name } }, spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: size } } } },
      })
      .catch(ignoreExists);
  await pvc(shop, "db", "1Gi");
  await pvc(shop, "media", "5Gi");
  await pvc(ops, "logs", "2Gi");
  await clusters.destination
    .makeApiClient(StorageV1Api)
    .createStorageClass({ body: { metadata: { name: storageClass }, provisioner: "kubernetes.io/no-provisioner" } })
    .catch(ignoreExists);
  await core
    .createNamespacedSecret({
      namespace: dvmNamespace,
      body: { metadata: { name: "destination-kubeconfig" }, stringData: { kubeconfig: readFileSync(clusters.info.destination.kubeconfigPath, "utf8") } },
    })
    .catch(ignoreExists);
  // On one cluster for both sides (kind with a single context), targets must not be the sources.
  const shopTarget = sameCluster ? `${shop}-dst` : shop;
  const opsTarget = `${ops}-dst`;
  const spec = {
    destinationCluster: { kubeconfigSecretRef: { name: "destination-kubeconfig" } },
    persistentVolumeClaims: [
      { name: "db", namespace: shop, targetNamespace: shopTarget, targetStorageClass: storageClass, targetAccessModes: ["ReadWriteOnce"] },
      {
        name: "media",
        namespace: shop,
        targetNamespace: shopTarget,
        targetName: "media-new",
        targetStorageClass: storageClass,
        targetAccessModes: ["ReadWriteMany"],
      },
      { name: "logs", namespace: ops, targetNamespace: opsTarget, targetStorageClass: storageClass, targetAccessModes: ["ReadWriteOnce"], verify: true },
    ],
  };
  return { run, dvmNamespace, storageClass, namespaces: { shop, ops, shopTarget, opsTarget }, spec, sameCluster };
}

export async function createDvm(kc: KubeConfig, namespace: string, name: string, spec: unknown): Promise<DirectVolumeMigration> {
  const created = await kc.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
    group: DVM_GROUP,
    version: DVM_VERSION,
    namespace,
    plural: DVM_PLURAL,
    body: { apiVersion: DVM_API_VERSION, kind: DVM_KIND, metadata: { name, namespace }, spec },
  });
  return toDvm(created);
}

export async function readDvm(kc: KubeConfig, namespace: string, name: string): Promise<DirectVolumeMigration> {
  return toDvm(
    await kc.makeApiClient(CustomObjectsApi).getNamespacedCustomObject({ group: DVM_GROUP, version: DVM_VERSION, namespace, plural: DVM_PLURAL, name }),
  );
}

export function requestFor(dvm: DirectVolumeMigration): ReconcileRequest {
  const { uid, namespace, name, generation, resourceVersion } = dvm.metadata;
  return { uid, namespace, name, generation, resourceVersion };
}

/**
 * The real runner on the test clusters (the source hosts the DVMs) and `table`, with the tests' operator
 * policy and a 30 s lease; `config` adds to it or overrides it.
 */
export function testPhaseRunner(clusters: TestClusters, table: FreshTable, config: Partial<PhaseRunnerConfig> = {}): PhaseRunner {
  return createPhaseRunner({
    hostKubeConfig: clusters.source,
    ledgerTableName: table.tableName,
    dynamo: table.client,
    leaseMs: 30_000,
    policy: TEST_MIGRATION_POLICY,
    ...config,
  });
}

export interface CountedBodies {
  bodies: Record<ExecutablePhaseName, PhaseBody>;
  /** How often each phase's body was entered. */
  entered: Map<string, number>;
}

/** The real phase bodies, counting how often each is entered (the side-effect-free part of the count). */
export function countedBodies(): CountedBodies {
  const entered = new Map<string, number>();
  const bodies = Object.fromEntries(
    EXECUTABLE_PHASES.map((phase) => [phase, (ctx: Parameters<PhaseBody>[0]) => (entered.set(phase, (entered.get(phase) ?? 0) + 1), PHASE_BODIES[phase](ctx))]),
  ) as unknown as CountedBodies["bodies"];
  return { bodies, entered };
}

/**
 * Calls the runner until the DVM is finished, as the relay would: again at once after progress, after
 * the requeue delay (capped, to keep tests quick) while a phase waits. `each` may add more calls
 * (duplicates, stale replays) around every step.
 */
export async function driveToCompletion(
  runner: PhaseRunner,
  request: ReconcileRequest,
  options: { maxSteps?: number; maxDelayMs?: number; each?: (step: number) => Promise<unknown> } = {},
): Promise<RunResult[]> {
  const results: RunResult[] = [];
  for (let step = 0; step < (options.maxSteps ?? 400); step++) {
    const result = await runner.run(request);
    results.push(result);
    await options.each?.(step);
    if (result.kind === "finished" || result.kind === "gone") return results;
    const delay = "requeueAfterMs" in result ? result.requeueAfterMs : "retryAfterMs" in result ? result.retryAfterMs : 0;
    await new Promise((resolve) => setTimeout(resolve, Math.min(delay, options.maxDelayMs ?? 250)));
  }
  throw new Error(`the migration did not finish; last results: ${JSON.stringify(results.slice(-3))}`);
}

/**
 * Counts creations of this DVM's objects from the API server's own watch events (not from our logs):
 * name → number of ADDED events.
 */
export class CreationCounter {
  readonly added = new Map<string, number>();
  private readonly aborts: AbortController[] = [];

  static async start(kc: KubeConfig, uid: string, paths: string[]): Promise<CreationCounter> {
    const counter = new CreationCounter();
    for (const path of paths) {
      const abort = await new Watch(kc).watch(
        path,
        { labelSelector: `${LABEL.dvmUid}=${uid}` },
        (type, object: { kind?: string; metadata?: { namespace?: string; name?: string } }) => {
          if (type !== "ADDED") return;
          const key = `${path}:${object.metadata?.namespace}/${object.metadata?.name}`;
          counter.added.set(key, (counter.added.get(key) ?? 0) + 1);
        },
        () => undefined,
      );
      counter.aborts.push(abort);
    }
    return counter;
  }

  count(pathPart: string): number {
    return [...this.added.entries()].filter(([k]) => k.includes(pathPart)).reduce((sum, [, n]) => sum + n, 0);
  }

  repeated(): string[] {
    return [...this.added.entries()].filter(([, n]) => n > 1).map(([k]) => k);
  }

  stop(): void {
    for (const abort of this.aborts) abort.abort();
  }
}

/** This DVM's transfer objects (pods, secrets, services, config maps) still in `namespaces` of one cluster. */
export async function leftovers(kc: KubeConfig, uid: string, namespaces: string[]): Promise<string[]> {
  const cluster = new KubeCluster("check", kc);
  const found: string[] = [];
  for (const namespace of namespaces) {
    for (const kind of [KINDS.Pod, KINDS.Secret, KINDS.Service, KINDS.ConfigMap]) {
      for (const object of await cluster.list(kind, namespace, transferSelector({ uid }))) {
        // A pod that is still terminating counts as gone once it has a deletion timestamp.
        if (!object.metadata.deletionTimestamp) found.push(`${kind.kind} ${namespace}/${object.metadata.name}`);
      }
    }
  }
  return found;
}

/** `leftovers` on both clusters (each line prefixed with the cluster's role). */
export async function transferLeftovers(clusters: TestClusters, uid: string, namespaces: string[]): Promise<string[]> {
  const [source, destination] = await Promise.all([leftovers(clusters.source, uid, namespaces), leftovers(clusters.destination, uid, namespaces)]);
  return [...source.map((l) => `source: ${l}`), ...destination.map((l) => `destination: ${l}`)];
}
