/**
 * What each migration policy setting decides: the "Meaning" column of the docs table in
 * docs/operations.md, rendered by policySettings.ts. It lives here, not in POLICY_SETTINGS
 * (src/dvm/policyConfig.ts), because that table ships in the phase function and the texts are of no use
 * there. A Record over the settings' params: the type checker demands one text per setting, and none
 * for a setting that does not exist.
 */
import type { POLICY_SETTINGS } from "../../../src/dvm/policyConfig";

export const POLICY_DOCS: Readonly<Record<keyof typeof POLICY_SETTINGS, string>> = {
  adminNamespaces: "namespaces whose DVMs may migrate across namespaces and run as root (docs/security.md)",
  transferImages: "images a DVM may name in `spec.transferImage` besides the default",
  defaultTransferImage: "the transfer pods' image when a DVM names none",
  transferDelete: "rsync `--delete` when a DVM's `spec.transfer` does not say",
  transferPartial: "rsync `--partial` when a DVM's `spec.transfer` does not say",
  transferHardLinks: "rsync `--hard-links` when a DVM's `spec.transfer` does not say",
  transferVerify: "rsync `--checksum` when a DVM's `spec.transfer` does not say",
  maxBandwidth: "the highest `--bwlimit` a DVM may ask for, and the one it gets when it asks none",
  concurrentVolumes: "PVCs moved at once when a DVM does not say",
  maxConcurrentVolumes: "the most PVCs at once a DVM may ask for",
  maxVolumesPerServerPod: "target PVCs one rsync server pod mounts; a namespace with more gets several server pods",
  extraOptions: 'extra rsync long options a DVM may add (README.md, "Transfer options")',
  podAnnotations: "annotation keys a DVM may put on its transfer pods (an annotation can inject a sidecar or loosen confinement)",
  maxCpu: "the most any CPU request or limit of a transfer pod's rsync may be",
  maxMemory: "the most any memory request or limit of a transfer pod's rsync may be",
  tcpProxy:
    "the HTTP CONNECT proxy the stunnel clients tunnel through (upstream's `STUNNEL_TCP_PROXY`); with a credential it goes into admin namespaces only, and no message repeats it",
  tenantTcpProxy: "the proxy of client Secrets outside the admin namespaces, which tenants can read (src/dvm/proxyPolicy.ts)",
};
