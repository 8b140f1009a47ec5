/**
 * The operator's migration policy (src/dvm/policy.ts) from the environment: the one reader for the phase
 * function (serverless.yml sets the variables), the local controller (which hands them to the function
 * it starts) and the tests. Every variable is checked here, once; a bad one is an error that names it.
 *
 * POLICY_SETTINGS is the one table of the policy's settings: each row's serverless.yml param (its key),
 * environment variable and parser (with its default). How the docs table states each setting's default,
 * values and meaning is in POLICY_DOCS (infra/dev/docs/policyDocs.ts), out of the bundle. The variable
 * names (POLICY_ENV), the parser (POLICY_ENV_SHAPE), the environment of a given policy (policyEnv), the
 * docs table (docs/operations.md, "Migration policy settings") and serverless.yml's params and
 * phase-function environment all come from it: `npx tsx infra/dev/docs/policySettings.ts` writes the
 * last two, and test/unit/dvm/policySettings.test.ts fails when they drift.
 */

import { z } from "zod";
import { type Environment, parseEnvironment } from "../config/environment";
import { ConfigurationError } from "../config/error";
import { definedFields } from "../lib/definedFields";
import { DEFAULT_ADMIN_NAMESPACES, DEFAULT_MIGRATION_POLICY, type MigrationPolicy } from "./policy";
import { annotationEntry, extraOptionEntry, flag, imagePattern, listOf, namespacePattern, pinnedImage, positiveInteger, proxy, quantity } from "./policyKinds";
import { proxyUrl } from "./proxyPolicy";
import type { TransferPolicy } from "./transferPolicy";

interface PolicySetting<Env extends string, Schema extends z.ZodType> {
  /** The phase function's environment variable. */
  env: Env;
  /** Its text read into the value policyOf takes; an issue is reported under the variable's name. */
  schema: Schema;
  /**
   * serverless.yml's default for the param; blank (the built-in default) unless blank means "none"
   * there, as for a list with a default.
   */
  paramDefault?: string;
  /** The variable's text that reads back as `policy`'s value; undefined leaves it unset. */
  write(policy: MigrationPolicy): string | undefined;
}

const setting = <const Env extends string, Schema extends z.ZodType>(row: PolicySetting<Env, Schema>) => row;
const transferDefaults = DEFAULT_MIGRATION_POLICY.transfer;

/** The policy's settings, by serverless.yml param, in the order serverless.yml and the docs list them. */
export const POLICY_SETTINGS = {
  adminNamespaces: setting({
    env: "DVM_ADMIN_NAMESPACES",
    schema: listOf(namespacePattern).default([...DEFAULT_ADMIN_NAMESPACES]),
    paramDefault: DEFAULT_ADMIN_NAMESPACES.join(","),
    write: (p) => p.adminNamespaces.join(","),
  }),
  transferImages: setting({
    env: "DVM_TRANSFER_IMAGES",
    schema: listOf(imagePattern).default([]),
    write: (p) => p.transferImages.join(","),
  }),
  defaultTransferImage: setting({
    env: "DVM_DEFAULT_TRANSFER_IMAGE",
    schema: pinnedImage(DEFAULT_MIGRATION_POLICY.defaultTransferImage),
    write: (p) => p.defaultTransferImage,
  }),
  transferDelete: setting({
    env: "DVM_TRANSFER_DELETE",
    schema: flag(transferDefaults.delete),
    write: (p) => String(p.transfer.delete),
  }),
  transferPartial: setting({
    env: "DVM_TRANSFER_PARTIAL",
    schema: flag(transferDefaults.partial),
    write: (p) => String(p.transfer.partial),
  }),
  transferHardLinks: setting({
    env: "DVM_TRANSFER_HARD_LINKS",
    schema: flag(transferDefaults.hardLinks),
    write: (p) => String(p.transfer.hardLinks),
  }),
  transferVerify: setting({
    env: "DVM_TRANSFER_VERIFY",
    schema: flag(transferDefaults.verify),
    write: (p) => String(p.transfer.verify),
  }),
  maxBandwidth: setting({
    env: "DVM_TRANSFER_MAX_BANDWIDTH_KIB",
    schema: positiveInteger,
    write: (p) => optionalText(p.transfer.maxBandwidthLimitKiBPerSecond),
  }),
  concurrentVolumes: setting({
    env: "DVM_TRANSFER_CONCURRENT_VOLUMES",
    schema: positiveInteger,
    write: (p) => String(p.transfer.concurrentVolumes),
  }),
  maxConcurrentVolumes: setting({
    env: "DVM_TRANSFER_MAX_CONCURRENT_VOLUMES",
    schema: positiveInteger,
    write: (p) => String(p.transfer.maxConcurrentVolumes),
  }),
  maxVolumesPerServerPod: setting({
    env: "DVM_TRANSFER_MAX_VOLUMES_PER_SERVER_POD",
    schema: positiveInteger,
    write: (p) => String(p.transfer.maxVolumesPerServerPod),
  }),
  extraOptions: setting({
    env: "DVM_RSYNC_EXTRA_OPTIONS",
    schema: listOf(extraOptionEntry).default([...transferDefaults.extraOptions]),
    paramDefault: transferDefaults.extraOptions.join(","),
    write: (p) => p.transfer.extraOptions.join(","),
  }),
  podAnnotations: setting({
    env: "DVM_TRANSFER_POD_ANNOTATIONS",
    schema: listOf(annotationEntry).default([...transferDefaults.podAnnotations]),
    write: (p) => p.transfer.podAnnotations.join(","),
  }),
  maxCpu: setting({
    env: "DVM_TRANSFER_MAX_CPU",
    schema: quantity,
    write: (p) => p.transfer.maxResources?.cpu,
  }),
  maxMemory: setting({
    env: "DVM_TRANSFER_MAX_MEMORY",
    schema: quantity,
    write: (p) => p.transfer.maxResources?.memory,
  }),
  tcpProxy: setting({
    env: "DVM_STUNNEL_TCP_PROXY",
    schema: proxy,
    write: (p) => (p.transfer.tcpProxy ? proxyUrl(p.transfer.tcpProxy) : undefined),
  }),
  tenantTcpProxy: setting({
    env: "DVM_STUNNEL_TCP_PROXY_TENANT",
    schema: proxy,
    write: (p) => (p.transfer.tenantTcpProxy ? proxyUrl(p.transfer.tenantTcpProxy) : undefined),
  }),
};

function optionalText(value: number | undefined): string | undefined {
  return value === undefined ? undefined : String(value);
}

type Settings = typeof POLICY_SETTINGS;
type PolicyParam = keyof Settings;
const SETTINGS = Object.entries(POLICY_SETTINGS) as [PolicyParam, Settings[PolicyParam]][];

/** The policy's variables, by serverless.yml param (serverless-offline passes them as `--param=KEY=...`). */
export const POLICY_ENV = Object.fromEntries(SETTINGS.map(([param, row]) => [param, row.env])) as { readonly [K in PolicyParam]: Settings[K]["env"] };

/** The policy's part of a deployable's environment schema (the phase function's, the local controller's). */
export const POLICY_ENV_SHAPE = Object.fromEntries(SETTINGS.map(([, row]) => [row.env, row.schema])) as {
  [K in PolicyParam as Settings[K]["env"]]: Settings[K]["schema"];
};

type PolicyEnvironment = z.output<z.ZodObject<typeof POLICY_ENV_SHAPE>>;

function transferPolicyOf(e: PolicyEnvironment): TransferPolicy {
  const maxConcurrentVolumes = e[POLICY_ENV.maxConcurrentVolumes] ?? transferDefaults.maxConcurrentVolumes;
  const concurrentVolumes = e[POLICY_ENV.concurrentVolumes] ?? Math.min(transferDefaults.concurrentVolumes, maxConcurrentVolumes);
  if (concurrentVolumes > maxConcurrentVolumes) {
    throw new ConfigurationError(
      `migration policy: ${POLICY_ENV.concurrentVolumes}: must not exceed ${POLICY_ENV.maxConcurrentVolumes} (${maxConcurrentVolumes})`,
      POLICY_ENV.concurrentVolumes,
    );
  }
  const maxCpu = e[POLICY_ENV.maxCpu];
  const maxMemory = e[POLICY_ENV.maxMemory];
  return definedFields({
    delete: e[POLICY_ENV.transferDelete],
    partial: e[POLICY_ENV.transferPartial],
    hardLinks: e[POLICY_ENV.transferHardLinks],
    verify: e[POLICY_ENV.transferVerify],
    maxBandwidthLimitKiBPerSecond: e[POLICY_ENV.maxBandwidth],
    concurrentVolumes,
    maxConcurrentVolumes,
    maxVolumesPerServerPod: e[POLICY_ENV.maxVolumesPerServerPod] ?? transferDefaults.maxVolumesPerServerPod,
    extraOptions: e[POLICY_ENV.extraOptions],
    maxResources: maxCpu !== undefined || maxMemory !== undefined ? definedFields({ cpu: maxCpu, memory: maxMemory }) : undefined,
    tcpProxy: e[POLICY_ENV.tcpProxy],
    tenantTcpProxy: e[POLICY_ENV.tenantTcpProxy],
    podAnnotations: e[POLICY_ENV.podAnnotations],
  });
}

/** The policy out of an environment parsed with POLICY_ENV_SHAPE. */
export function policyOf(e: PolicyEnvironment): MigrationPolicy {
  return {
    adminNamespaces: e[POLICY_ENV.adminNamespaces],
    transferImages: e[POLICY_ENV.transferImages],
    defaultTransferImage: e[POLICY_ENV.defaultTransferImage],
    transfer: transferPolicyOf(e),
  };
}

/**
 * Reads the policy from `env`; throws ConfigurationError naming every bad variable.
 * @internal the deployables parse it inside their own schemas; tests read a policy alone
 */
export function parsePolicyEnv(env: Environment): MigrationPolicy {
  return policyOf(parseEnvironment(z.object(POLICY_ENV_SHAPE), env, "migration policy"));
}

/**
 * The environment that makes parsePolicyEnv return `policy` (for a function started with it).
 * @internal for tests that start functions, and infra/dev's renderer
 */
export function policyEnv(policy: MigrationPolicy): Record<string, string> {
  return Object.fromEntries(
    SETTINGS.flatMap(([, row]) => {
      const value = row.write(policy);
      return value === undefined ? [] : [[row.env, value]];
    }),
  );
}
