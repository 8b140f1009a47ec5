/**
 * How the docs table in docs/operations.md states each migration policy setting: its default, the
 * values it takes (form and range) and what it decides, rendered by policySettings.ts. It lives here,
 * not in POLICY_SETTINGS (src/dvm/policyConfig.ts), because that table ships in the phase function and
 * the texts are of no use there. A Record over the settings' params: the type checker demands one entry
 * per setting, and none for a setting that does not exist. The defaults are read from the code's.
 */
import { DEFAULT_ADMIN_NAMESPACES, DEFAULT_MIGRATION_POLICY } from "../../../src/dvm/policy";
import type { POLICY_SETTINGS } from "../../../src/dvm/policyConfig";

interface SettingDoc {
  /** The default, as the docs table says it (unset, or blank where blank is unset). */
  default: string;
  /** The values it takes: form and range. */
  values: string;
  /** What it decides. */
  meaning: string;
}

const transferDefaults = DEFAULT_MIGRATION_POLICY.transfer;
const onOff = (value: boolean) => (value ? "`true`" : "`false`");
const listText = (values: readonly string[]) => values.map((v) => `\`${v}\``).join(", ");

export const POLICY_DOCS: Readonly<Record<keyof typeof POLICY_SETTINGS, SettingDoc>> = {
  adminNamespaces: {
    default: listText(DEFAULT_ADMIN_NAMESPACES),
    values: 'comma-separated namespace names or "prefix*"; set but empty: none',
    meaning: "namespaces whose DVMs may migrate across namespaces and run as root (docs/security.md)",
  },
  transferImages: {
    default: "none",
    values: 'comma-separated image references or "prefix*"',
    meaning: "images a DVM may name in `spec.transferImage` besides the default",
  },
  defaultTransferImage: {
    default: `\`${DEFAULT_MIGRATION_POLICY.defaultTransferImage}\``,
    values: 'pinned: a tag other than "latest", or a digest',
    meaning: "the transfer pods' image when a DVM names none",
  },
  transferDelete: {
    default: onOff(transferDefaults.delete),
    values: "`true` or `false`",
    meaning: "rsync `--delete` when a DVM's `spec.transfer` does not say",
  },
  transferPartial: {
    default: onOff(transferDefaults.partial),
    values: "`true` or `false`",
    meaning: "rsync `--partial` when a DVM's `spec.transfer` does not say",
  },
  transferHardLinks: {
    default: onOff(transferDefaults.hardLinks),
    values: "`true` or `false`",
    meaning: "rsync `--hard-links` when a DVM's `spec.transfer` does not say",
  },
  transferVerify: {
    default: onOff(transferDefaults.verify),
    values: "`true` or `false`",
    meaning: "rsync `--checksum` when a DVM's `spec.transfer` does not say",
  },
  maxBandwidth: {
    default: "no limit",
    values: "a positive integer (KiB/s)",
    meaning: "the highest `--bwlimit` a DVM may ask for, and the one it gets when it asks none",
  },
  concurrentVolumes: {
    default: String(transferDefaults.concurrentVolumes),
    values: "a positive integer, at most `DVM_TRANSFER_MAX_CONCURRENT_VOLUMES`",
    meaning: "PVCs moved at once when a DVM does not say",
  },
  maxConcurrentVolumes: {
    default: String(transferDefaults.maxConcurrentVolumes),
    values: "a positive integer",
    meaning: "the most PVCs at once a DVM may ask for",
  },
  maxVolumesPerServerPod: {
    default: String(transferDefaults.maxVolumesPerServerPod),
    values: "a positive integer, below the destination nodes' volume attach limit",
    meaning: "target PVCs one rsync server pod mounts; a namespace with more gets several server pods",
  },
  extraOptions: {
    default: listText(transferDefaults.extraOptions),
    values: 'comma-separated "--name" (a flag) or "--name=" (takes a value), none the controller reserves; set but empty: none',
    meaning: 'extra rsync long options a DVM may add (README.md, "Transfer options")',
  },
  podAnnotations: {
    default: "none",
    values: 'comma-separated annotation keys or "prefix*"',
    meaning: "annotation keys a DVM may put on its transfer pods (an annotation can inject a sidecar or loosen confinement)",
  },
  maxCpu: {
    default: "no maximum",
    values: 'a quantity such as "2" or "500m"',
    meaning: "the most any CPU request or limit of a transfer pod's rsync may be",
  },
  maxMemory: {
    default: "no maximum",
    values: 'a quantity such as "4Gi"',
    meaning: "the most any memory request or limit of a transfer pod's rsync may be",
  },
  tcpProxy: {
    default: "none: the clients dial directly",
    values: '"http://host:port" or "http://user:password@host:port"',
    meaning:
      "the HTTP CONNECT proxy the stunnel clients tunnel through (upstream's `STUNNEL_TCP_PROXY`); with a credential it goes into admin namespaces only, and no message repeats it",
  },
  tenantTcpProxy: {
    default: "`DVM_STUNNEL_TCP_PROXY` when it has no credential; with one, a tenant's DVM is refused before any pod",
    values: "the same form",
    meaning: "the proxy of client Secrets outside the admin namespaces, which tenants can read (src/dvm/proxyPolicy.ts)",
  },
};
