/** A PhaseContext over fake clusters, for unit tests of phase decisions. */
import type { ItineraryName, PhaseName } from "../../src/dvm/itinerary";
import { DEFAULT_MIGRATION_POLICY, isAdminNamespace, type MigrationPolicy, transferImageFor } from "../../src/dvm/policy";
import { transferSettingsFor } from "../../src/dvm/transferPolicy";
import { type DvmStatus, parseDvmSpec } from "../../src/dvm/types";
import { silentLogger } from "../../src/lib/log";
import type { PhaseContext } from "../../src/phases/types";
import { volumePairs } from "../../src/phases/volumes";
import { FakeCluster } from "./fakeCluster";

export const TEST_UID = "0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9";

export function fakeContext(
  spec: unknown,
  options: { itinerary?: ItineraryName; phase?: PhaseName; status?: DvmStatus; sameCluster?: boolean; now?: number; policy?: MigrationPolicy } = {},
) {
  const policy = options.policy ?? DEFAULT_MIGRATION_POLICY;
  const parsed = parseDvmSpec(spec);
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.issues));
  const host = new FakeCluster("host");
  const source = options.sameCluster ? host : new FakeCluster("source");
  const destination = options.sameCluster ? host : new FakeCluster("destination");
  const itinerary = options.itinerary ?? "VolumeMigration";
  let now = options.now ?? Date.parse("2026-01-01T00:00:00Z");
  const ctx: PhaseContext = {
    dvm: { name: "dvm", namespace: "openshift-migration", uid: TEST_UID, generation: 1 },
    spec: parsed.spec,
    status: options.status ?? {},
    itinerary,
    phase: options.phase ?? "Started",
    clusters: { host, source, destination, sameCluster: options.sameCluster ?? false },
    volumes: volumePairs(parsed.spec, options.status ?? {}, itinerary),
    transferImage: transferImageFor(parsed.spec, policy),
    transfer: transferSettingsFor(parsed.spec, policy.transfer, (namespace) => isAdminNamespace(namespace, policy)),
    adminNamespace: isAdminNamespace("openshift-migration", policy),
    attempt: 1,
    clock: { now: () => now },
    log: silentLogger,
  };
  return { ctx, host, source, destination, advanceClock: (ms: number) => (now += ms) };
}

export const pvc = (namespace: string, name: string, extra: Record<string, unknown> = {}) => ({
  apiVersion: "v1",
  kind: "PersistentVolumeClaim",
  metadata: { name, namespace, labels: { app: name } },
  spec: { storageClassName: "old", accessModes: ["ReadWriteOnce"], volumeMode: "Filesystem", resources: { requests: { storage: "1Gi" } } },
  status: { phase: "Bound", capacity: { storage: "2Gi" } },
  ...extra,
});

export const storageClass = (name: string) => ({ apiVersion: "storage.k8s.io/v1", kind: "StorageClass", metadata: { name }, provisioner: "x" });
export const namespace = (name: string, labels: Record<string, string> = {}) => ({ apiVersion: "v1", kind: "Namespace", metadata: { name, labels } });

export const TWO_NAMESPACE_SPEC = {
  persistentVolumeClaims: [
    { name: "db", namespace: "shop", targetStorageClass: "fast", targetAccessModes: ["ReadWriteOnce"] },
    { name: "media", namespace: "shop", targetName: "media-new", targetStorageClass: "fast", targetAccessModes: ["ReadWriteMany"] },
    { name: "logs", namespace: "ops", targetNamespace: "ops-new", targetStorageClass: "fast", targetAccessModes: ["ReadWriteOnce"], verify: true },
  ],
};
