/**
 * What the API servers saw, from their own watch streams, never from the code under test:
 *   - every version of every DVM (its status.phase sequence, when it completed), which also serves as
 *     the baseline's informer cache and as the source of "one write behind" reads for stale replays;
 *   - every object a migration created on either cluster (pods, secrets, services, config maps, PVCs,
 *     namespaces, progress records), by the uid label: a name (for a generated name: its volume and
 *     attempt labels) that shows up with two different metadata.uid values was created twice.
 */

import type { KubeConfig } from "@kubernetes/client-node";
import { LABEL } from "../../../src/contracts/labels";
import { ITINERARIES, isItineraryName, isPhaseName, type PhaseName } from "../../../src/dvm/itinerary";
import { type DirectVolumeMigration, DVM_API_VERSION, DVM_GROUP, DVM_KIND, DVM_PLURAL, DVM_VERSION, DVMP_KIND, DVMP_PLURAL } from "../../../src/dvm/types";
import { toDvm } from "../../../src/kube/dvmStore";
import { type Collection, Follow, type ObservedEvent } from "./listWatch";

/** Full objects kept per DVM: enough to serve a read one or two writes behind. */
const KEEP_VERSIONS = 8;

export interface ObservedPosition {
  itinerary: string | undefined;
  phase: string | undefined;
  resourceVersion: string;
  at: number;
}

interface DvmRecord {
  uid: string;
  namespace: string;
  name: string;
  versions: DirectVolumeMigration[];
  positions: ObservedPosition[];
  completedAt?: number;
}

/**
 * Where a position lies on the way to Completed, so a move backwards is visible: index in the
 * itinerary; the failure itinerary comes after every step of the others; no status at all is -1.
 */
export function positionRank(itinerary: string | undefined, phase: string | undefined): number {
  if (!isPhaseName(phase)) return -1;
  const name = isItineraryName(itinerary) ? itinerary : "VolumeMigration";
  const steps: readonly PhaseName[] = ITINERARIES[name];
  const index = steps.indexOf(phase);
  if (index < 0) return -1;
  return name === "VolumeMigrationFailed" ? 100 + index : index;
}

export class DvmHistory {
  private readonly byUid = new Map<string, DvmRecord>();
  private readonly byName = new Map<string, string>();
  private readonly listeners = new Set<() => void>();

  observe(event: ObservedEvent, raw: unknown): void {
    if (event === "DELETED") return;
    const dvm = toDvm(raw);
    const { uid, namespace, name, resourceVersion } = dvm.metadata;
    if (!uid || !resourceVersion) return;
    let record = this.byUid.get(uid);
    if (!record) {
      record = { uid, namespace, name, versions: [], positions: [] };
      this.byUid.set(uid, record);
    }
    this.byName.set(`${namespace}/${name}`, uid);
    const last = record.versions.at(-1);
    if (last?.metadata.resourceVersion === resourceVersion) return;
    record.versions.push(dvm);
    if (record.versions.length > KEEP_VERSIONS) record.versions.shift();
    const now = Date.now();
    const position = record.positions.at(-1);
    if (!position || position.phase !== dvm.status.phase || position.itinerary !== dvm.status.itinerary) {
      record.positions.push({ itinerary: dvm.status.itinerary, phase: dvm.status.phase, resourceVersion, at: now });
    }
    if (dvm.status.phase === "Completed") record.completedAt ??= now;
    for (const listener of this.listeners) listener();
  }

  /** What an informer cache would answer now: the newest version this watch has delivered. */
  latest(namespace: string, name: string): DirectVolumeMigration | undefined {
    const uid = this.byName.get(`${namespace}/${name}`);
    return uid ? this.latestByUid(uid) : undefined;
  }

  latestByUid(uid: string): DirectVolumeMigration | undefined {
    return this.byUid.get(uid)?.versions.at(-1);
  }

  /** The version with this resourceVersion, if still kept: a cache lagging at that version. */
  at(uid: string, resourceVersion: string | undefined): DirectVolumeMigration | undefined {
    if (!resourceVersion) return undefined;
    return this.byUid.get(uid)?.versions.find((v) => v.metadata.resourceVersion === resourceVersion);
  }

  positions(uid: string): readonly ObservedPosition[] {
    return this.byUid.get(uid)?.positions ?? [];
  }

  completedAt(uid: string): number | undefined {
    return this.byUid.get(uid)?.completedAt;
  }

  /** Positions that went backwards: [from, to] pairs. */
  regressions(uid: string): Array<[ObservedPosition, ObservedPosition]> {
    const out: Array<[ObservedPosition, ObservedPosition]> = [];
    const positions = this.positions(uid);
    for (let i = 1; i < positions.length; i++) {
      const before = positions[i - 1]!;
      const after = positions[i]!;
      if (positionRank(after.itinerary, after.phase) < positionRank(before.itinerary, before.phase)) out.push([before, after]);
    }
    return out;
  }

  /** Resolves true as soon as `check` holds (re-checked on every observed version), false after the timeout. */
  waitUntil(check: () => boolean, timeoutMs: number): Promise<boolean> {
    if (check()) return Promise.resolve(true);
    return new Promise((resolve) => {
      const listener = () => {
        if (!check()) return;
        finish(true);
      };
      const timer = setTimeout(() => finish(false), timeoutMs);
      const finish = (value: boolean) => {
        clearTimeout(timer);
        this.listeners.delete(listener);
        resolve(value);
      };
      this.listeners.add(listener);
    });
  }
}

interface Creation {
  dvmUid: string;
  objectUids: Set<string>;
}

export class ObjectCreations {
  private readonly objects = new Map<string, Creation>();

  observe(cluster: string, kind: string, event: ObservedEvent, raw: unknown): void {
    if (event === "DELETED") return;
    const meta = (raw as { metadata?: { namespace?: string; name?: string; generateName?: string; uid?: string; labels?: Record<string, string> } }).metadata;
    const dvmUid = meta?.labels?.[LABEL.dvmUid];
    if (!meta?.uid || !meta.name || !dvmUid) return;
    // A generated name (the baselines' client pods, as upstream's) is unique by construction: what the
    // object stands for is its volume and attempt, so two pods for the same attempt were created twice.
    const identity = meta.generateName
      ? `${meta.generateName}* (volume ${meta.labels?.[LABEL.volume] ?? "?"}, attempt ${meta.labels?.[LABEL.attempt] ?? "?"})`
      : meta.name;
    const key = `${cluster} ${kind} ${meta.namespace ? `${meta.namespace}/` : ""}${identity}`;
    let creation = this.objects.get(key);
    if (!creation) {
      creation = { dvmUid, objectUids: new Set() };
      this.objects.set(key, creation);
    }
    creation.objectUids.add(meta.uid);
  }

  /** Objects created for these DVMs, and the names created more than once (with how often). */
  forDvms(uids: Iterable<string>): { created: number; byKind: Record<string, number>; repeated: string[] } {
    const wanted = new Set(uids);
    let created = 0;
    const byKind: Record<string, number> = {};
    const repeated: string[] = [];
    for (const [key, creation] of this.objects) {
      if (!wanted.has(creation.dvmUid)) continue;
      created += creation.objectUids.size;
      const kind = key.split(" ")[1]!;
      byKind[kind] = (byKind[kind] ?? 0) + creation.objectUids.size;
      if (creation.objectUids.size > 1) repeated.push(`${key} x${creation.objectUids.size}`);
    }
    return { created, byKind, repeated };
  }
}

const OWNED = LABEL.dvmUid;
const CORE_KINDS: Array<Collection & { name: string }> = [
  { name: "pod", apiVersion: "v1", kind: "Pod", path: "/api/v1/pods", labelSelector: OWNED },
  { name: "secret", apiVersion: "v1", kind: "Secret", path: "/api/v1/secrets", labelSelector: OWNED },
  { name: "service", apiVersion: "v1", kind: "Service", path: "/api/v1/services", labelSelector: OWNED },
  { name: "configmap", apiVersion: "v1", kind: "ConfigMap", path: "/api/v1/configmaps", labelSelector: OWNED },
  { name: "pvc", apiVersion: "v1", kind: "PersistentVolumeClaim", path: "/api/v1/persistentvolumeclaims", labelSelector: OWNED },
  { name: "namespace", apiVersion: "v1", kind: "Namespace", path: "/api/v1/namespaces", labelSelector: OWNED },
];
const PROGRESS: Collection & { name: string } = {
  name: "progress",
  apiVersion: DVM_API_VERSION,
  kind: DVMP_KIND,
  path: `/apis/${DVM_GROUP}/${DVM_VERSION}/${DVMP_PLURAL}`,
  labelSelector: OWNED,
};
const DVMS: Collection = { apiVersion: DVM_API_VERSION, kind: DVM_KIND, path: `/apis/${DVM_GROUP}/${DVM_VERSION}/${DVM_PLURAL}` };

export interface ObservatoryOptions {
  host: KubeConfig;
  destination: KubeConfig;
  /** Watch created objects too (default true). */
  creations?: boolean;
}

export class Observatory {
  readonly dvms = new DvmHistory();
  readonly creations = new ObjectCreations();
  private readonly follows: Follow[] = [];

  constructor(private readonly options: ObservatoryOptions) {}

  async start(): Promise<this> {
    const { host, destination } = this.options;
    this.follows.push(new Follow(host, DVMS, (event, object) => this.dvms.observe(event, object)));
    if (this.options.creations !== false) {
      const sameServer = host.getCurrentCluster()?.server === destination.getCurrentCluster()?.server;
      const clusters: Array<[string, KubeConfig]> = sameServer
        ? [["host", host]]
        : [
            ["host", host],
            ["destination", destination],
          ];
      for (const [cluster, kubeConfig] of clusters) {
        for (const collection of cluster === "host" ? [...CORE_KINDS, PROGRESS] : CORE_KINDS) {
          this.follows.push(new Follow(kubeConfig, collection, (event, object) => this.creations.observe(cluster, collection.name, event, object)));
        }
      }
    }
    for (const follow of this.follows) follow.start();
    await Promise.all(this.follows.map((f) => f.synced));
    return this;
  }

  async stop(): Promise<void> {
    await Promise.all(this.follows.map((f) => f.stop()));
  }
}
