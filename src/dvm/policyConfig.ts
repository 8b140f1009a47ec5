/**
 * The operator's migration policy (src/dvm/policy.ts) from the environment: the one reader for the phase
 * function (serverless.yml sets the variables), the local controller (which hands them to the function
 * it starts) and the tests. Every variable is checked here, once; a bad one is an error that names it.
 *   DVM_ADMIN_NAMESPACES        comma-separated; "prefix*" matches a prefix. Unset: dvm-system.
 *                               Set but empty: no admin namespace at all.
 *   DVM_TRANSFER_IMAGES         images a DVM may name in spec.transferImage besides the default. Unset or
 *                               empty: only the default.
 *   DVM_DEFAULT_TRANSFER_IMAGE  pinned by a tag other than "latest" or by a digest. Unset: DEFAULT_TRANSFER_IMAGE.
 */
import { z } from "zod";
import { parseAllowList } from "../allowList";
import { DEFAULT_ADMIN_NAMESPACES, DEFAULT_MIGRATION_POLICY, type MigrationPolicy } from "./policy";

export const POLICY_ENV = {
  adminNamespaces: "DVM_ADMIN_NAMESPACES",
  transferImages: "DVM_TRANSFER_IMAGES",
  defaultTransferImage: "DVM_DEFAULT_TRANSFER_IMAGE",
} as const;

export class PolicyConfigError extends Error {
  override readonly name = "PolicyConfigError";
}

const namespacePattern = z.string().regex(/^([a-z0-9]([-a-z0-9]*[a-z0-9])?|[a-z0-9][-a-z0-9]*\*)$/, 'must be a namespace name or a "prefix*"');
const imagePattern = z.string().regex(/^[^\s,]+$/, "must be an image reference without spaces");

/** A tag other than "latest", or a digest: the reference names one image for good. */
export function isPinnedImage(image: string): boolean {
  if (/@sha256:[0-9a-f]{64}$/.test(image)) return true;
  const lastSegment = image.slice(image.lastIndexOf("/") + 1);
  const tag = lastSegment.includes(":") ? lastSegment.slice(lastSegment.indexOf(":") + 1) : undefined;
  return tag !== undefined && tag !== "" && tag !== "latest";
}

const listOf = (item: z.ZodString) =>
  z
    .string()
    .transform((text) => [...parseAllowList(text).patterns])
    .pipe(z.array(item));

const EnvSchema = z.object({
  [POLICY_ENV.adminNamespaces]: listOf(namespacePattern).default([...DEFAULT_ADMIN_NAMESPACES]),
  [POLICY_ENV.transferImages]: listOf(imagePattern).default([]),
  [POLICY_ENV.defaultTransferImage]: z.preprocess(
    (value) => (typeof value === "string" && value.trim() === "" ? undefined : typeof value === "string" ? value.trim() : value),
    imagePattern.refine(isPinnedImage, 'must be pinned: a tag other than "latest", or @sha256:<digest>').default(DEFAULT_MIGRATION_POLICY.defaultTransferImage),
  ),
});

/** Reads the policy from `env`; throws PolicyConfigError naming every bad variable. */
export function parsePolicyEnv(env: Record<string, string | undefined>): MigrationPolicy {
  const parsed = EnvSchema.safeParse(env);
  if (!parsed.success) {
    const message = parsed.error.issues.map((issue) => `${String(issue.path[0] ?? "environment")}: ${issue.message}`).join("; ");
    throw new PolicyConfigError(`migration policy: ${message}`);
  }
  const e = parsed.data;
  return {
    adminNamespaces: e[POLICY_ENV.adminNamespaces],
    transferImages: e[POLICY_ENV.transferImages],
    defaultTransferImage: e[POLICY_ENV.defaultTransferImage],
  };
}

/** The environment that makes parsePolicyEnv return `policy` (for a function started with it). */
export function policyEnv(policy: MigrationPolicy): Record<string, string> {
  return {
    [POLICY_ENV.adminNamespaces]: policy.adminNamespaces.join(","),
    [POLICY_ENV.transferImages]: policy.transferImages.join(","),
    [POLICY_ENV.defaultTransferImage]: policy.defaultTransferImage,
  };
}
