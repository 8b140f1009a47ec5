/**
 * What `dvm migrate` sends: a DVM built from flags or read from a file, validated with the controller's
 * own parseDvmSpec before anything reaches the cluster. Every problem names its field (and, for a DVM
 * built from flags, the flag that sets it). Pure: no I/O here.
 */
import { parseAllDocuments, parse as parseYaml } from "yaml";
import { DVM_API_VERSION, DVM_KIND, parseDvmSpec, type SpecIssue } from "../dvm/types";
import { definedFields } from "../lib/definedFields";

export interface MigrateFlags {
  pvc?: string[];
  storageClass?: string;
  accessMode?: string[];
  sourceKubeconfigSecret?: string;
  destinationKubeconfigSecret?: string;
  backoffLimit?: string;
  endpointType?: string;
  verify?: boolean;
  rollback?: boolean;
}

/** A problem with the input: the spec field, and the flag that set it when the DVM came from flags. */
export interface InputIssue extends SpecIssue {
  flag?: string;
}

export interface DvmDraft {
  name?: string;
  namespace?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  spec: unknown;
}

export const DEFAULT_ACCESS_MODES = ["ReadWriteOnce"];
export const SPEC_FLAGS = [
  "pvc",
  "storageClass",
  "accessMode",
  "sourceKubeconfigSecret",
  "destinationKubeconfigSecret",
  "backoffLimit",
  "endpointType",
  "verify",
  "rollback",
] as const;

const DNS_1123 = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;

export function hasSpecFlags(flags: MigrateFlags): boolean {
  return SPEC_FLAGS.some((flag) => {
    const value = flags[flag];
    return Array.isArray(value) ? value.length > 0 : value !== undefined && value !== false;
  });
}

interface PvcFlagValue {
  namespace: string;
  name: string;
  targetNamespace?: string;
  targetName?: string;
}

/** NAMESPACE/NAME[=TARGET_NAMESPACE[/TARGET_NAME]]; undefined when the text does not have that shape. */
export function parsePvcFlag(value: string): PvcFlagValue | undefined {
  const [from, to, ...rest] = value.split("=");
  if (from === undefined || rest.length > 0) return undefined;
  const source = from.split("/");
  if (source.length !== 2) return undefined;
  const pvc: PvcFlagValue = { namespace: source[0]!, name: source[1]! };
  if (to === undefined) return pvc;
  const target = to.split("/");
  if (target.length > 2) return undefined;
  pvc.targetNamespace = target[0]!;
  if (target.length === 2) pvc.targetName = target[1]!;
  return pvc;
}

/** [NAMESPACE/]NAME[:KEY] of a Secret holding a kubeconfig. */
export function parseSecretRef(value: string): { name: string; namespace?: string; key?: string } {
  const colon = value.lastIndexOf(":");
  const ref = colon < 0 ? value : value.slice(0, colon);
  const key = colon < 0 ? undefined : value.slice(colon + 1);
  const slash = ref.indexOf("/");
  return {
    name: slash < 0 ? ref : ref.slice(slash + 1),
    ...(slash < 0 ? {} : { namespace: ref.slice(0, slash) }),
    ...(key !== undefined ? { key } : {}),
  };
}

/** A whole number stays a number; anything else is passed on so the schema names it. */
function integerOrText(value: string): number | string {
  return /^-?\d+$/.test(value.trim()) ? Number(value) : value;
}

/** The spec the flags describe, and the flag syntax problems found on the way. */
export function specFromFlags(flags: MigrateFlags): { spec: Record<string, unknown>; issues: InputIssue[] } {
  const issues: InputIssue[] = [];
  const accessModes = flags.accessMode && flags.accessMode.length > 0 ? flags.accessMode : DEFAULT_ACCESS_MODES;
  const persistentVolumeClaims = (flags.pvc ?? []).map((value, i) => {
    const parsed = parsePvcFlag(value);
    if (!parsed) {
      issues.push({
        field: `spec.persistentVolumeClaims[${i}]`,
        flag: "--pvc",
        message: `"${value}" is not NAMESPACE/NAME[=TARGET_NAMESPACE[/TARGET_NAME]]`,
      });
    }
    return {
      ...(parsed ?? { namespace: "", name: "" }),
      ...(flags.storageClass !== undefined ? { targetStorageClass: flags.storageClass } : {}),
      targetAccessModes: accessModes,
      ...(flags.verify ? { verify: true } : {}),
    };
  });
  const spec: Record<string, unknown> = { persistentVolumeClaims };
  if (flags.sourceKubeconfigSecret !== undefined) spec.sourceCluster = { kubeconfigSecretRef: parseSecretRef(flags.sourceKubeconfigSecret) };
  if (flags.destinationKubeconfigSecret !== undefined) {
    spec.destinationCluster = { kubeconfigSecretRef: parseSecretRef(flags.destinationKubeconfigSecret) };
  }
  if (flags.backoffLimit !== undefined) spec.backOffLimit = integerOrText(flags.backoffLimit);
  if (flags.endpointType !== undefined) spec.endpointType = flags.endpointType;
  if (flags.rollback) spec.migrationType = "Rollback";
  return { spec, issues };
}

/** The flag that sets a spec field, for messages about a DVM built from flags. */
export function flagForField(field: string): string | undefined {
  const pvc = /^spec\.persistentVolumeClaims(?:\[(\d+)\])?(?:\.(\w+))?/.exec(field);
  if (pvc) {
    const [, index, property] = pvc;
    if (property === "targetStorageClass") return "--storage-class";
    if (property === "targetAccessModes") return "--access-mode";
    if (property === "verify") return "--verify";
    return index === undefined ? "--pvc" : `--pvc #${Number(index) + 1}`;
  }
  if (field.startsWith("spec.sourceCluster")) return "--source-kubeconfig-secret";
  if (field.startsWith("spec.destinationCluster")) return "--destination-kubeconfig-secret";
  if (field.startsWith("spec.backOffLimit")) return "--backoff-limit";
  if (field.startsWith("spec.endpointType")) return "--endpoint-type";
  if (field.startsWith("spec.migrationType")) return "--rollback";
  return undefined;
}

/** zod says "expected string, received undefined" where a person would say "required". */
function plainMessage(message: string): string {
  return /received undefined$/.test(message) ? "is required" : message;
}

export function validateDraft(draft: DvmDraft, fromFlags: boolean, earlier: readonly InputIssue[] = []): InputIssue[] {
  const issues: InputIssue[] = [...earlier];
  if (!draft.name) issues.push({ field: "metadata.name", message: "is required: give NAME (or metadata.name in the file)" });
  else if (draft.name.length > 253 || !DNS_1123.test(draft.name))
    issues.push({ field: "metadata.name", message: `"${draft.name}" must be a DNS-1123 name (lower case letters, digits, '-' and '.')` });
  if (draft.namespace !== undefined && !DNS_1123.test(draft.namespace))
    issues.push({ field: "metadata.namespace", message: `"${draft.namespace}" must be a DNS-1123 name` });
  const parsed = parseDvmSpec(draft.spec);
  if (!parsed.ok) {
    // A PVC flag that did not parse already has its issue; the schema's complaints about it add nothing.
    const broken = new Set(earlier.map((i) => i.field));
    for (const issue of parsed.issues) {
      if ([...broken].some((field) => issue.field.startsWith(`${field}.`))) continue;
      const flag = fromFlags ? flagForField(issue.field) : undefined;
      issues.push({ field: issue.field, message: plainMessage(issue.message), ...(flag ? { flag } : {}) });
    }
  }
  return issues;
}

export function formatIssue(issue: InputIssue): string {
  return `${issue.field}${issue.flag ? ` (${issue.flag})` : ""}: ${issue.message}`;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function stringMap(value: unknown): Record<string, string> | undefined {
  if (!isRecord(value)) return undefined;
  return Object.fromEntries(Object.entries(value).filter((e): e is [string, string] => typeof e[1] === "string"));
}

/**
 * A DVM from a YAML or JSON document: a whole DirectVolumeMigration (apiVersion/kind/metadata/spec) or
 * just its spec. Throws a message naming the file when it is not one readable document.
 */
export function draftFromDocument(text: string, source: string): { draft: DvmDraft; issues: InputIssue[] } {
  const documents = parseAllDocuments(text);
  const docs = Array.isArray(documents) ? documents : [documents];
  const errors = docs.flatMap((d) => d.errors);
  if (errors.length > 0) throw new Error(`${source} is not valid YAML or JSON: ${errors[0]!.message.split("\n")[0]}`);
  const contents = docs.filter((d) => d.contents !== null);
  if (contents.length !== 1) throw new Error(`${source} holds ${contents.length} documents: give exactly one DirectVolumeMigration or spec`);
  const value: unknown = parseYaml(String(contents[0]));
  if (!isRecord(value)) throw new Error(`${source} does not hold an object: give a DirectVolumeMigration or its spec`);
  const whole = "spec" in value || "kind" in value || "apiVersion" in value || "metadata" in value;
  if (!whole) return { draft: { spec: value }, issues: [] };
  const issues: InputIssue[] = [];
  if (value.kind !== undefined && value.kind !== DVM_KIND) issues.push({ field: "kind", message: `must be ${DVM_KIND} (got ${JSON.stringify(value.kind)})` });
  if (value.apiVersion !== undefined && value.apiVersion !== DVM_API_VERSION) {
    issues.push({ field: "apiVersion", message: `must be ${DVM_API_VERSION} (got ${JSON.stringify(value.apiVersion)})` });
  }
  const metadata = isRecord(value.metadata) ? value.metadata : {};
  const labels = stringMap(metadata.labels);
  const annotations = stringMap(metadata.annotations);
  return {
    draft: {
      ...(typeof metadata.name === "string" ? { name: metadata.name } : {}),
      ...(typeof metadata.namespace === "string" ? { namespace: metadata.namespace } : {}),
      ...definedFields({ labels, annotations }),
      spec: value.spec,
    },
    issues,
  };
}

/** The object sent to the API server. The spec goes as written: validation was only a check. */
export function dvmObject(draft: DvmDraft & { name: string; namespace: string }): Record<string, unknown> {
  return {
    apiVersion: DVM_API_VERSION,
    kind: DVM_KIND,
    metadata: {
      name: draft.name,
      namespace: draft.namespace,
      ...definedFields({ labels: draft.labels, annotations: draft.annotations }),
    },
    spec: draft.spec,
  };
}
