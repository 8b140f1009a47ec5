/**
 * What a DVM may reference, decided from its namespace and spec alone (no cluster read), so the runner
 * can refuse a DVM before any side effect and before any Secret is looked up. The rule: whoever can
 * create a DVM can do no more through the controller than they could do themselves.
 *   - Outside an admin namespace a DVM names PVCs (source and target) and kubeconfig Secrets in its own
 *     namespace only, and may not ask for runAsRoot.
 *   - Everywhere, the transfer image is the operator's default or one the operator allowed,
 *     spec.transfer stays within the operator's transfer policy (src/dvm/transferPolicy.ts), and the
 *     transfer pods' annotations are on the operator's allow-list (src/transfer/podAnnotations.ts).
 * A refusal names the field and the rule; it reads the same whether or not the referenced object exists.
 */
import { allowList } from "../lib/allowList";
import { annotationField, refusedAnnotationKeys } from "../transfer/podAnnotations";
import { DEFAULT_TRANSFER_IMAGE } from "../transfer/pods";
import { proxyViolations } from "./proxyPolicy";
import { DEFAULT_TRANSFER_POLICY, type TransferPolicy, transferViolations } from "./transferPolicy";
import type { DvmSpec } from "./types";

export interface MigrationPolicy {
  /** Namespaces whose DVMs may migrate across namespaces and run as root; "prefix*" matches a prefix. */
  adminNamespaces: readonly string[];
  /** Images a DVM may name in spec.transferImage, besides the default; "prefix*" matches a prefix. */
  transferImages: readonly string[];
  /** The image of the transfer pods when the DVM names none. Always allowed. */
  defaultTransferImage: string;
  /** rsync's options, parallelism and resources: defaults and the bounds a DVM stays within. */
  transfer: TransferPolicy;
}

export const DEFAULT_ADMIN_NAMESPACES = ["dvm-system"] as const;

export const DEFAULT_MIGRATION_POLICY: MigrationPolicy = {
  adminNamespaces: DEFAULT_ADMIN_NAMESPACES,
  transferImages: [],
  defaultTransferImage: DEFAULT_TRANSFER_IMAGE,
  transfer: DEFAULT_TRANSFER_POLICY,
};

export interface PolicyViolation {
  field: string;
  message: string;
}

export function isAdminNamespace(namespace: string, policy: MigrationPolicy): boolean {
  return allowList(policy.adminNamespaces).allows(namespace);
}

/** Every rule the spec breaks, each naming its field; empty when the DVM may run. */
export function policyViolations(dvmNamespace: string, spec: DvmSpec, policy: MigrationPolicy): PolicyViolation[] {
  const violations: PolicyViolation[] = [];
  if (!isAdminNamespace(dvmNamespace, policy)) {
    const ownNamespaceOnly = `must be the DVM's namespace "${dvmNamespace}": only DVMs in an admin namespace may reference other namespaces`;
    // A selector selects within one namespace: the same rule as a listed PVC's (checked before it is expanded).
    const named = [
      ...(spec.persistentVolumeClaims ?? []).map((pvc, i) => ({ pvc, field: `spec.persistentVolumeClaims[${i}]` })),
      ...(spec.persistentVolumeClaimSelector ? [{ pvc: spec.persistentVolumeClaimSelector, field: "spec.persistentVolumeClaimSelector" }] : []),
    ];
    for (const { pvc, field } of named) {
      if (pvc.namespace !== dvmNamespace) violations.push({ field: `${field}.namespace`, message: ownNamespaceOnly });
      if (pvc.targetNamespace !== undefined && pvc.targetNamespace !== dvmNamespace) {
        violations.push({ field: `${field}.targetNamespace`, message: ownNamespaceOnly });
      }
    }
    for (const side of ["sourceCluster", "destinationCluster"] as const) {
      const secretNamespace = spec[side]?.kubeconfigSecretRef.namespace;
      if (secretNamespace !== undefined && secretNamespace !== dvmNamespace) {
        violations.push({ field: `spec.${side}.kubeconfigSecretRef.namespace`, message: ownNamespaceOnly });
      }
    }
    if (spec.runAsRoot) violations.push({ field: "spec.runAsRoot", message: "only DVMs in an admin namespace may run the transfer as root" });
  }
  if (spec.transferImage !== undefined && !imageAllowed(spec.transferImage, policy)) {
    violations.push({ field: "spec.transferImage", message: "is not in the operator's transfer image allow-list" });
  }
  violations.push(...transferViolations(spec.transfer, policy.transfer));
  // Before any pod: a client Secret outside the admin namespaces never gets the operator's proxy credential.
  violations.push(...proxyViolations(spec, policy.transfer, (namespace) => isAdminNamespace(namespace, policy)));
  for (const key of refusedAnnotationKeys(spec.transferPodAnnotations, policy.transfer.podAnnotations)) {
    violations.push({ field: annotationField(key), message: "is not on the operator's allow-list of transfer pod annotations" });
  }
  return violations;
}

/** The image the transfer pods run: the DVM's choice when allowed (policyViolations checks), else the default. */
export function transferImageFor(spec: Pick<DvmSpec, "transferImage">, policy: MigrationPolicy): string {
  return spec.transferImage !== undefined && imageAllowed(spec.transferImage, policy) ? spec.transferImage : policy.defaultTransferImage;
}

function imageAllowed(image: string, policy: MigrationPolicy): boolean {
  return image === policy.defaultTransferImage || allowList(policy.transferImages).allows(image);
}

export const formatViolation = (v: PolicyViolation): string => `${v.field}: ${v.message}`;
