/**
 * The annotations a DVM may put on its transfer pods (spec.transferPodAnnotations). An annotation can
 * change what runs beside the data (a sidecar injector's image and volumes) or how it is confined
 * (AppArmor), so only keys on the operator's allow-list pass, and their count and sizes are bounded
 * (an oversize pod would be refused by the API server on every retry).
 */
import { allowList } from "../lib/allowList";

export const TRANSFER_POD_ANNOTATION_BOUNDS = {
  maxCount: 16,
  /** A DNS-subdomain prefix (253), "/", a name (63). */
  maxKeyLength: 317,
  maxValueLength: 4096,
} as const;

/** A Kubernetes qualified name with an optional DNS-subdomain prefix ("example.com/name"). */
export const ANNOTATION_KEY_PATTERN = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;

/** Why `key` cannot be an annotation key, or undefined. */
export function annotationKeyProblem(key: string): string | undefined {
  const slash = key.lastIndexOf("/");
  const prefix = slash < 0 ? "" : key.slice(0, slash);
  const name = key.slice(slash + 1);
  if (!ANNOTATION_KEY_PATTERN.test(key) || key.length > TRANSFER_POD_ANNOTATION_BOUNDS.maxKeyLength || prefix.length > 253 || name.length > 63)
    return 'must be a qualified name: an optional DNS-subdomain prefix (up to 253 characters) and "/", then a name of up to 63 letters, digits, "-", "_" or "."';
  return undefined;
}

/** The field a refusal names: spec.transferPodAnnotations["sidecar.istio.io/inject"]. */
export const annotationField = (key: string): string => `spec.transferPodAnnotations[${JSON.stringify(key)}]`;

/** The keys of `annotations` the operator's allow-list (exact keys or "prefix*") does not allow. */
export function refusedAnnotationKeys(annotations: Readonly<Record<string, string>> | undefined, allowed: readonly string[]): string[] {
  const list = allowList(allowed);
  return Object.keys(annotations ?? {}).filter((key) => !list.allows(key));
}
