/**
 * The operator's bounds and defaults for how data moves (rsync's options, parallelism, the transfer
 * pods' resources), and the settings a DVM gets within them. A DVM may only narrow what the operator
 * allows: a lower bandwidth limit, fewer volumes at once, smaller resources, extra options from the
 * allow-list. The booleans (delete, partial, hard links, verify) are defaults a DVM may change.
 */
import { definedFields } from "../lib/definedFields";
import { DEFAULT_RSYNC_RESOURCES } from "../transfer/pods";
import { reservedRsyncOption } from "../transfer/rsyncClient";
import type { StunnelProxy } from "../transfer/stunnel";
import { type ClientProxy, clientProxyFor } from "./proxyPolicy";
import { quantityValue } from "./quantity";
import type { DvmSpec, TransferOptions } from "./types";

export interface TransferPolicy {
  /** rsync --delete, --partial, --hard-links, --checksum when the DVM says nothing. */
  delete: boolean;
  partial: boolean;
  hardLinks: boolean;
  verify: boolean;
  /** The highest --bwlimit (KiB/s) a DVM may ask for, and the one it gets when it asks none. Unset: no limit. */
  maxBandwidthLimitKiBPerSecond?: number;
  /** Volumes transferred at once when the DVM does not say. */
  concurrentVolumes: number;
  /** The most a DVM may ask for in spec.transfer.maxConcurrentVolumes. */
  maxConcurrentVolumes: number;
  /**
   * The most destination PVCs one rsync server pod mounts; a namespace with more gets several server
   * pods (src/phases/serverGroups.ts). Below the node's attach limit of the destination's storage.
   */
  maxVolumesPerServerPod: number;
  /**
   * Extra long options a DVM may add: "--name" (a flag, no value) or "--name=" (a value is required).
   * Never one the controller sets itself or one that could bypass the tunnel (reservedRsyncOption).
   */
  extraOptions: readonly string[];
  /** The most any request or limit of a transfer pod's rsync container may be. Unset: no maximum. */
  maxResources?: { cpu?: string; memory?: string };
  /**
   * The HTTP CONNECT proxy the stunnel clients dial to reach the destination (DVM_STUNNEL_TCP_PROXY):
   * for client Secrets in admin namespaces, and in others only when it has no credential
   * (src/dvm/proxyPolicy.ts). The operator's alone: no field of a DVM sets or overrides it. Unset: the
   * clients dial directly.
   */
  tcpProxy?: StunnelProxy;
  /** The proxy of client Secrets outside the admin namespaces (DVM_STUNNEL_TCP_PROXY_TENANT): tenants can read it. */
  tenantTcpProxy?: StunnelProxy;
  /**
   * Annotation keys a DVM may put on its transfer pods (spec.transferPodAnnotations): exact keys or
   * "prefix*". Empty (the default): none, as an annotation can add a sidecar or loosen confinement.
   */
  podAnnotations: readonly string[];
}

/** Options that change only how this DVM's own data is copied, not where it goes or what runs. */
export const DEFAULT_EXTRA_OPTIONS = [
  "--inplace",
  "--whole-file",
  "--sparse",
  "--compress",
  "--compress-level=",
  "--compress-choice=",
  "--omit-dir-times",
  "--size-only",
  "--ignore-times",
  "--modify-window=",
  "--exclude=",
  "--timeout=",
  "--contimeout=",
  "--preallocate",
] as const;

export const DEFAULT_TRANSFER_POLICY: TransferPolicy = {
  delete: true,
  partial: true,
  hardLinks: true,
  verify: false,
  concurrentVolumes: 5,
  maxConcurrentVolumes: 50,
  maxVolumesPerServerPod: 16,
  extraOptions: DEFAULT_EXTRA_OPTIONS,
  podAnnotations: [],
};

/** The resources of a transfer pod's rsync container, as the pod spec takes them. */
export interface TransferResources {
  requests?: { cpu?: string; memory?: string };
  limits?: { cpu?: string; memory?: string };
}

/** What the phases use: the DVM's transfer options resolved against the operator's policy. */
export interface TransferSettings {
  bandwidthLimitKiBPerSecond?: number;
  delete: boolean;
  partial: boolean;
  hardLinks: boolean;
  /** For volumes whose own `verify` is unset. */
  verify: boolean;
  extraOptions: string[];
  maxConcurrentVolumes: number;
  /** The operator's TransferPolicy.maxVolumesPerServerPod, as it is: never from the spec. */
  maxVolumesPerServerPod: number;
  /** Unset: the pods' defaults (src/transfer/pods.ts). */
  resources?: TransferResources;
  /**
   * The operator's proxy for a client Secret in `sourceNamespace` (TransferPolicy.tcpProxy or
   * tenantTcpProxy, src/dvm/proxyPolicy.ts): never from the spec.
   */
  tcpProxyFor(sourceNamespace: string): ClientProxy;
  /** spec.transferPodAnnotations, for the pod builders, which check them again against the allow-list. */
  podAnnotations?: Record<string, string>;
  allowedPodAnnotationKeys: readonly string[];
}

export interface TransferViolation {
  field: string;
  message: string;
}

/** Why an allow-list entry cannot be one ("--name" or "--name=", not reserved), or undefined. */
export function extraOptionEntryProblem(entry: string): string | undefined {
  const match = /^(--[a-z0-9][a-z0-9-]*)=?$/.exec(entry);
  if (!match) return `"${entry}" must be "--name" or "--name="`;
  return reservedRsyncOption(match[1]!);
}

/** The option is on the allow-list in its form: a flag as "--name", a valued option as "--name=". */
export function extraOptionAllowed(option: string, allowed: readonly string[]): boolean {
  const equals = option.indexOf("=");
  const name = equals < 0 ? option : option.slice(0, equals);
  if (reservedRsyncOption(name) !== undefined) return false;
  return allowed.includes(equals < 0 ? name : `${name}=`) && (equals < 0 || equals < option.length - 1);
}

/** Every way spec.transfer goes beyond the operator's policy, each naming its field. */
export function transferViolations(options: TransferOptions | undefined, policy: TransferPolicy): TransferViolation[] {
  if (!options) return [];
  const violations: TransferViolation[] = [];
  const field = (name: string) => `spec.transfer.${name}`;
  const maxBandwidth = policy.maxBandwidthLimitKiBPerSecond;
  if (options.bandwidthLimitKiBPerSecond !== undefined && maxBandwidth !== undefined && options.bandwidthLimitKiBPerSecond > maxBandwidth) {
    violations.push({ field: field("bandwidthLimitKiBPerSecond"), message: `must not exceed the operator's limit of ${maxBandwidth} KiB/s` });
  }
  if (options.maxConcurrentVolumes !== undefined && options.maxConcurrentVolumes > policy.maxConcurrentVolumes) {
    violations.push({ field: field("maxConcurrentVolumes"), message: `must not exceed the operator's maximum of ${policy.maxConcurrentVolumes}` });
  }
  options.extraOptions?.forEach((option, i) => {
    if (!extraOptionAllowed(option, policy.extraOptions)) {
      const reserved = reservedRsyncOption(option.split("=")[0]!);
      violations.push({ field: field(`extraOptions[${i}]`), message: reserved ?? "is not on the operator's allow-list of rsync options" });
    }
  });
  for (const kind of ["requests", "limits"] as const) {
    for (const resource of ["cpu", "memory"] as const) {
      const asked = options.resources?.[kind]?.[resource];
      const max = policy.maxResources?.[resource];
      if (asked === undefined || max === undefined) continue;
      if (quantityValue(asked)! > quantityValue(max)!)
        violations.push({ field: field(`resources.${kind}.${resource}`), message: `must not exceed the operator's maximum of ${max}` });
    }
  }
  return violations;
}

/** The pods' default requests, each lowered to the operator's maximum; undefined when none is lowered. */
function defaultsWithin(max: TransferPolicy["maxResources"]): TransferResources | undefined {
  if (!max) return undefined;
  const defaults = DEFAULT_RSYNC_RESOURCES.requests as Record<"cpu" | "memory", string>;
  const requests = { ...defaults };
  let lowered = false;
  for (const resource of ["cpu", "memory"] as const) {
    const cap = max[resource];
    if (cap !== undefined && quantityValue(cap)! < quantityValue(defaults[resource])!) {
      requests[resource] = cap;
      lowered = true;
    }
  }
  return lowered ? { requests } : undefined;
}

/** spec.transfer.resources as the pod spec takes them: a quantity the spec leaves out is absent, not undefined. */
function podResources({ requests, limits }: NonNullable<TransferOptions["resources"]>): TransferResources {
  return definedFields({ requests: requests && definedFields(requests), limits: limits && definedFields(limits) });
}

/**
 * The settings of a DVM that passed transferViolations. `isAdminNamespace` decides which proxy a
 * namespace's client Secrets get; unset, none is an admin namespace (the operator's credential goes nowhere).
 */
export function transferSettingsFor(
  spec: Pick<DvmSpec, "transfer" | "migrationType" | "transferPodAnnotations">,
  policy: TransferPolicy,
  isAdminNamespace: (namespace: string) => boolean = () => false,
): TransferSettings {
  const options = spec.transfer ?? {};
  const bandwidth = options.bandwidthLimitKiBPerSecond ?? policy.maxBandwidthLimitKiBPerSecond;
  const asked = options.resources && (options.resources.requests || options.resources.limits) ? podResources(options.resources) : undefined;
  const resources = asked ?? defaultsWithin(policy.maxResources);
  return {
    ...(bandwidth !== undefined ? { bandwidthLimitKiBPerSecond: bandwidth } : {}),
    // A CutOver is the final pass: the destination must equal the source (the spec cannot say otherwise).
    delete: spec.migrationType === "CutOver" ? true : (options.delete ?? policy.delete),
    partial: options.partial ?? policy.partial,
    hardLinks: options.hardLinks ?? policy.hardLinks,
    verify: options.verify ?? policy.verify,
    extraOptions: [...(options.extraOptions ?? [])],
    maxConcurrentVolumes: Math.min(options.maxConcurrentVolumes ?? policy.concurrentVolumes, policy.maxConcurrentVolumes),
    maxVolumesPerServerPod: policy.maxVolumesPerServerPod,
    ...(resources ? { resources } : {}),
    tcpProxyFor: (sourceNamespace) => clientProxyFor(policy, isAdminNamespace(sourceNamespace)),
    ...(spec.transferPodAnnotations ? { podAnnotations: { ...spec.transferPodAnnotations } } : {}),
    allowedPodAnnotationKeys: policy.podAnnotations,
  };
}
