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
import { ENV, type Environment, parseEnvironment } from "../config/environment";
import { DEFAULT_ADMIN_NAMESPACES, DEFAULT_MIGRATION_POLICY, type MigrationPolicy } from "./policy";

/** The policy's variables (src/config/environment.ts), by the MigrationPolicy field each sets. */
export const POLICY_ENV = {
  adminNamespaces: ENV.adminNamespaces,
  transferImages: ENV.transferImages,
  defaultTransferImage: ENV.defaultTransferImage,
} as const satisfies Record<keyof MigrationPolicy, string>;

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

/** The policy's part of a deployable's environment schema (the phase function's, the local controller's). */
export const POLICY_ENV_SHAPE = {
  [POLICY_ENV.adminNamespaces]: listOf(namespacePattern).default([...DEFAULT_ADMIN_NAMESPACES]),
  [POLICY_ENV.transferImages]: listOf(imagePattern).default([]),
  [POLICY_ENV.defaultTransferImage]: z.preprocess(
    (value) => (typeof value === "string" && value.trim() === "" ? undefined : typeof value === "string" ? value.trim() : value),
    imagePattern.refine(isPinnedImage, 'must be pinned: a tag other than "latest", or @sha256:<digest>').default(DEFAULT_MIGRATION_POLICY.defaultTransferImage),
  ),
};

/** The policy out of an environment parsed with POLICY_ENV_SHAPE. */
export function policyOf(e: z.output<z.ZodObject<typeof POLICY_ENV_SHAPE>>): MigrationPolicy {
  return {
    adminNamespaces: e[POLICY_ENV.adminNamespaces],
    transferImages: e[POLICY_ENV.transferImages],
    defaultTransferImage: e[POLICY_ENV.defaultTransferImage],
  };
}

/** Reads the policy from `env`; throws ConfigurationError naming every bad variable. */
export function parsePolicyEnv(env: Environment): MigrationPolicy {
  return policyOf(parseEnvironment(z.object(POLICY_ENV_SHAPE), env, "migration policy"));
}

/** The environment that makes parsePolicyEnv return `policy` (for a function started with it). */
export function policyEnv(policy: MigrationPolicy): Record<string, string> {
  return {
    [POLICY_ENV.adminNamespaces]: policy.adminNamespaces.join(","),
    [POLICY_ENV.transferImages]: policy.transferImages.join(","),
    [POLICY_ENV.defaultTransferImage]: policy.defaultTransferImage,
  };
}
