/**
 * Deterministic names and labels of everything a migration creates. No generateName anywhere: a phase
 * that runs again (after a crash) finds and adopts what the first run created.
 */
import { LABEL, PART_OF } from "../contracts/labels";
import type { DvmIdentity } from "./types";
import type { VolumePair } from "./volumes";

/** First 10 characters of the uid: unique enough within a namespace, short enough for 63-char names. */
export function dvmShortId(dvm: Pick<DvmIdentity, "uid">): string {
  return dvm.uid.replace(/-/g, "").slice(0, 10);
}

export function ownerLabels(dvm: Pick<DvmIdentity, "uid">): Record<string, string> {
  return { [LABEL.partOf]: PART_OF, [LABEL.dvmUid]: dvm.uid };
}

export function transferLabels(dvm: Pick<DvmIdentity, "uid">, role: string): Record<string, string> {
  return { ...ownerLabels(dvm), [LABEL.transfer]: "true", [LABEL.role]: role };
}

/** The selector cleanup uses: this DVM's transient transfer objects and nothing else. */
export function transferSelector(dvm: Pick<DvmIdentity, "uid">): Record<string, string> {
  return { [LABEL.dvmUid]: dvm.uid, [LABEL.transfer]: "true" };
}

export function transferNames(dvm: Pick<DvmIdentity, "uid">) {
  const id = dvmShortId(dvm);
  return {
    /** Host: the rsync password, kept for the life of the migration. */
    credentialsSecret: `dvm-${id}-rsync-credentials`,
    /** Host: CA, server and client certificates, so a repeated phase reuses the same ones. */
    pkiSecret: `dvm-${id}-transfer-pki`,
    /** Destination: the first server pod of each namespace and its objects (the next ones: serverGroupNames). */
    endpointService: `dvm-${id}-rsync`,
    endpointRoute: `dvm-${id}-rsync`,
    rsyncServerSecret: `dvm-${id}-rsync-server`,
    stunnelServerSecret: `dvm-${id}-stunnel-server`,
    serverPod: `dvm-${id}-rsync-server`,
    /** Source, per namespace. */
    rsyncClientSecret: `dvm-${id}-rsync-client`,
    stunnelClientSecret: `dvm-${id}-stunnel-client`,
  };
}

/**
 * The objects of one rsync server pod of a destination namespace (serverGroups.ts): the first keeps the
 * names a namespace's single server pod always had, the next ones add their index. Deterministic, so a
 * repeated phase adopts them.
 */
export function serverGroupNames(dvm: Pick<DvmIdentity, "uid">, index: number) {
  const names = transferNames(dvm);
  const suffix = index === 0 ? "" : `-${index}`;
  return {
    serverPod: `${names.serverPod}${suffix}`,
    endpointService: `${names.endpointService}${suffix}`,
    endpointRoute: `${names.endpointRoute}${suffix}`,
    rsyncServerSecret: `${names.rsyncServerSecret}${suffix}`,
  };
}

export function clientPodName(dvm: Pick<DvmIdentity, "uid">, pair: Pick<VolumePair, "id">, attempt: number): string {
  return `dvm-${dvmShortId(dvm)}-rsync-${pair.id}-${attempt}`;
}

export function progressName(dvm: Pick<DvmIdentity, "uid">, pair: Pick<VolumePair, "id">): string {
  return `dvm-${dvmShortId(dvm)}-${pair.id}`;
}

/** The name stunnel's server certificate carries and the client checks, whatever address it dials. */
export const TRANSFER_SERVER_NAME = "rsync-server.dvm.local";
export const STUNNEL_PORT = 6443;
