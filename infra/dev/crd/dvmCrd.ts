/**
 * The DirectVolumeMigration CRD, built from the parser's zod schemas (DvmSpecSchema, DvmStatusSchema in
 * src/dvm/types.ts) so the API server and the controller check the same fields, bounds and patterns.
 * What JSON Schema cannot say, or what the parser checks in a refinement, is added from KUBERNETES_ADDITIONS
 * below (the CEL rules among it); the field descriptions from FIELD_DESCRIPTIONS (descriptions.ts), kept
 * out of the zod schemas because those ship in the Lambda bundles. `npm run crd` writes the file;
 * test/unit/crd/dvmCrd.test.ts fails on drift.
 */
import { fileURLToPath } from "node:url";
import { Document } from "yaml";
import { z } from "zod";
import { MAX_SELECTOR_LABELS } from "../../../src/dvm/limits";
import { DVM_GROUP, DVM_KIND, DVM_PLURAL, DVM_VERSION, DvmSpecSchema, DvmStatusSchema } from "../../../src/dvm/types";
import { TRANSFER_POD_ANNOTATION_BOUNDS } from "../../../src/transfer/podAnnotations";
import { FIELD_DESCRIPTIONS } from "./descriptions";

export const DVM_CRD_PATH = fileURLToPath(new URL(`../../deploy/crds/${DVM_PLURAL}.yaml`, import.meta.url));

type Schema = { [keyword: string]: unknown };
interface CelRule {
  rule: string;
  message: string;
  fieldPath?: string;
}

/** The parser's quantity pattern has no length bound of its own (src/dvm/quantity.ts); the CRD's is 32. */
const quantityBound: Schema = { maxLength: 32 };

/**
 * What the CRD adds to the generated schema, by path ("[]" an array's items, "{}" a map's values). A keyword
 * the generated schema already has is an error: the table adds, it never overrides the parser's facts.
 */
const KUBERNETES_ADDITIONS: Record<string, Schema> = {
  spec: {
    "x-kubernetes-validations": [
      // The controller records each phase per generation: a spec edited mid-migration would run later
      // phases for volumes the earlier ones never prepared.
      {
        rule: "self == oldSelf",
        message:
          "spec is immutable once the DirectVolumeMigration is created; to migrate with a different spec, create a new DirectVolumeMigration (and delete this one)",
      },
      // The volumes are named one way: a list, or a selector expanded once by the first phase.
      {
        rule: "has(self.persistentVolumeClaims) != has(self.persistentVolumeClaimSelector)",
        message: "exactly one of persistentVolumeClaims and persistentVolumeClaimSelector must be set",
      },
      {
        rule: "!(has(self.migrationType) && self.migrationType == 'CutOver' && has(self.transfer) && has(self.transfer.delete) && !self.transfer.delete)",
        fieldPath: ".transfer.delete",
        message: "must not be false for a CutOver (the final pass removes what is gone from the source)",
      },
      {
        rule: "!(has(self.quiesce) && self.quiesce && (!has(self.migrationType) || self.migrationType == 'Stage'))",
        fieldPath: ".quiesce",
        message: "is for a CutOver (or a Rollback's restore), not a Stage (a Stage runs while the applications keep running)",
      },
    ] satisfies CelRule[],
  },
  "spec.persistentVolumeClaimSelector.labelSelector.matchLabels": {
    maxProperties: MAX_SELECTOR_LABELS,
    "x-kubernetes-validations": [
      {
        rule: "self.all(k, size(k) <= 317)",
        message: 'a label key is at most 317 characters (a 253-character prefix, "/" and a 63-character name)',
      },
    ] satisfies CelRule[],
  },
  "spec.transferPodAnnotations": {
    maxProperties: TRANSFER_POD_ANNOTATION_BOUNDS.maxCount,
    "x-kubernetes-validations": [
      {
        rule: `self.all(k, size(k) <= ${TRANSFER_POD_ANNOTATION_BOUNDS.maxKeyLength})`,
        message: `annotation keys must be at most ${TRANSFER_POD_ANNOTATION_BOUNDS.maxKeyLength} characters (a 253-character prefix, "/", a 63-character name)`,
      },
    ] satisfies CelRule[],
  },
  "spec.transferPodAnnotations{}": { maxLength: TRANSFER_POD_ANNOTATION_BOUNDS.maxValueLength },
  "spec.transfer.extraOptions": { "x-kubernetes-list-type": "set" },
  "spec.transfer.resources": {
    "x-kubernetes-validations": (["cpu", "memory"] as const).map((resource) => ({
      rule: `!has(self.requests) || !has(self.limits) || !has(self.requests.${resource}) || !has(self.limits.${resource}) || quantity(self.requests.${resource}).compareTo(quantity(self.limits.${resource})) <= 0`,
      fieldPath: `.requests.${resource}`,
      message: `must not exceed limits.${resource}`,
    })) satisfies CelRule[],
  },
  "spec.transfer.resources.requests.cpu": quantityBound,
  "spec.transfer.resources.requests.memory": quantityBound,
  "spec.transfer.resources.limits.cpu": quantityBound,
  "spec.transfer.resources.limits.memory": quantityBound,
  // The controller owns the status: fields another version of it writes are kept, not pruned.
  status: { "x-kubernetes-preserve-unknown-fields": true },
  "status.observedGeneration": { format: "int64" },
  // Names of PVCs that exist: the API server's own bounds.
  "status.selectedPersistentVolumeClaims[].name": { maxLength: 253 },
  "status.selectedPersistentVolumeClaims[].namespace": { maxLength: 63 },
};

/** The keywords of a structural OpenAPI v3 schema this CRD uses, in the order the file lists them. */
const KEYWORD_ORDER = [
  "description",
  "type",
  "nullable",
  "format",
  "required",
  "enum",
  "default",
  "minimum",
  "maximum",
  "minLength",
  "maxLength",
  "pattern",
  "minItems",
  "maxItems",
  "maxProperties",
  "x-kubernetes-list-type",
  "x-kubernetes-preserve-unknown-fields",
  "x-kubernetes-validations",
  "properties",
  "items",
  "additionalProperties",
];

/**
 * zod's `.int()` is a safe integer and says so as ±(2^53 - 1); Kubernetes integers are int64 and the
 * bound is no user's concern, so the CRD leaves it out.
 */
const SAFE_INTEGER_BOUNDS = new Set([Number.MAX_SAFE_INTEGER, Number.MIN_SAFE_INTEGER]);

/** The schema as a CRD takes it: known keywords only, in a fixed order, no zod-only bounds. */
function structural(schema: Schema, path: string): Schema {
  const out: Schema = {};
  // $ref, anyOf (a union: an int-or-string would need x-kubernetes-int-or-string), propertyNames...: a
  // construct the CRD cannot express fails here, by path, instead of at the API server.
  const unknown = Object.keys(schema).find((keyword) => !KEYWORD_ORDER.includes(keyword));
  if (unknown) throw new Error(`${path || "(root)"}: the CRD cannot take the keyword "${unknown}" zod generated`);
  for (const keyword of KEYWORD_ORDER) {
    const value = schema[keyword];
    // additionalProperties: false is a closed object, which a structural schema is already (unknown fields are pruned).
    if (value === undefined || (keyword === "additionalProperties" && value === false)) continue;
    if ((keyword === "minimum" || keyword === "maximum") && SAFE_INTEGER_BOUNDS.has(value as number)) continue;
    if (keyword === "properties")
      out.properties = Object.fromEntries(Object.entries(value as Record<string, Schema>).map(([name, child]) => [name, structural(child, `${path}.${name}`)]));
    else if (keyword === "items") out.items = structural(value as Schema, `${path}[]`);
    else if (keyword === "additionalProperties") out.additionalProperties = structural(value as Schema, `${path}{}`);
    else out[keyword] = value;
  }
  return out;
}

/** The sub-schema at a `table`'s path; throws when the path names nothing (a field was renamed). */
function at(root: Schema, path: string, table: string): Schema {
  let node: Schema | undefined = root;
  for (const step of path.match(/[^.[{]+|\[\]|\{\}/g) ?? []) {
    if (step === "[]") node = node?.items as Schema | undefined;
    else if (step === "{}") node = node?.additionalProperties as Schema | undefined;
    else node = (node?.properties as Record<string, Schema> | undefined)?.[step];
    if (node === undefined) throw new Error(`${table}: ${path} is not in the generated schema`);
  }
  return node;
}

function withAdditions(root: Schema, descriptions: Readonly<Record<string, string>>): Schema {
  for (const [path, description] of Object.entries(descriptions)) at(root, path, "FIELD_DESCRIPTIONS").description = description;
  for (const [path, additions] of Object.entries(KUBERNETES_ADDITIONS)) {
    const node = at(root, path, "KUBERNETES_ADDITIONS");
    for (const [keyword, value] of Object.entries(additions)) {
      if (node[keyword] !== undefined) throw new Error(`KUBERNETES_ADDITIONS: ${path} already has ${keyword} from the zod schema`);
      node[keyword] = value;
    }
  }
  return structural(root, "");
}

/**
 * A zod schema's `.describe()` text would ship in every bundle that parses a DVM: the first path that has
 * one is an error, so the texts stay in descriptions.ts.
 */
function refuseDescriptions(schema: Schema, path: string): void {
  if (schema.description !== undefined)
    throw new Error(`${path}: the zod schema has a .describe() text; put it in FIELD_DESCRIPTIONS (infra/dev/crd/descriptions.ts), out of the bundle`);
  for (const [name, child] of Object.entries((schema.properties ?? {}) as Record<string, Schema>)) refuseDescriptions(child, `${path}.${name}`);
  if (typeof schema.items === "object") refuseDescriptions(schema.items as Schema, `${path}[]`);
  if (typeof schema.additionalProperties === "object") refuseDescriptions(schema.additionalProperties as Schema, `${path}{}`);
}

function fromZod(schema: z.ZodType, path: string): Schema {
  // "input": what a user writes (defaults are the API server's to apply); objects are not closed.
  const { $schema: _, ...json } = z.toJSONSchema(schema, { target: "openapi-3.0", io: "input", unrepresentable: "throw" }) as Schema;
  refuseDescriptions(json, path);
  return json;
}

/**
 * The status is the controller's: the CRD declares only what the printer columns read and the lists a
 * selector or quiesce bounds, and keeps the rest unpruned and unchecked (x-kubernetes-preserve-unknown-fields).
 * A status another version of the controller wrote, or garbage, must still reach the relay and the
 * function, which read it with DvmStatusSchema and report what is wrong (test/integration/relay.test.ts).
 */
const DECLARED_STATUS_FIELDS = {
  phase: true,
  itinerary: true,
  step: true,
  phaseDescription: true,
  observedGeneration: true,
  selectedPersistentVolumeClaims: true,
  quiescedApplications: true,
} as const;

/** The printer columns: what `kubectl get` shows, and what the relay lists DVMs by (priority 2). */
const PRINTER_COLUMNS = [
  { name: "Phase", type: "string", jsonPath: ".status.phase" },
  { name: "Step", type: "string", jsonPath: ".status.step" },
  { name: "Itinerary", type: "string", jsonPath: ".status.itinerary", priority: 1 },
  { name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" },
  // The relay lists DVMs as a Table of these columns (src/relay/resources.ts): the API server sends a few
  // hundred bytes per DVM instead of the whole object, whose labels and annotations are its creator's.
  { name: "Namespace", type: "string", jsonPath: ".metadata.namespace", priority: 2 },
  { name: "UID", type: "string", jsonPath: ".metadata.uid", priority: 2 },
  { name: "Generation", type: "integer", jsonPath: ".metadata.generation", priority: 2 },
  { name: "Resource Version", type: "string", jsonPath: ".metadata.resourceVersion", priority: 2 },
  { name: "Deletion", type: "string", jsonPath: ".metadata.deletionTimestamp", priority: 2 },
];

/** The CRD as an object; `descriptions` replaced only by a test. */
export function dvmCrd(descriptions: Readonly<Record<string, string>> = FIELD_DESCRIPTIONS): Schema {
  const openAPIV3Schema = withAdditions(
    {
      type: "object",
      required: ["spec"],
      properties: {
        apiVersion: { type: "string" },
        kind: { type: "string" },
        metadata: { type: "object" },
        spec: fromZod(DvmSpecSchema, "spec"),
        status: fromZod(DvmStatusSchema.pick(DECLARED_STATUS_FIELDS), "status"),
      },
    },
    descriptions,
  );
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: `${DVM_PLURAL}.${DVM_GROUP}` },
    spec: {
      group: DVM_GROUP,
      scope: "Namespaced",
      names: { kind: DVM_KIND, listKind: `${DVM_KIND}List`, plural: DVM_PLURAL, singular: DVM_KIND.toLowerCase(), shortNames: ["dvm"] },
      versions: [
        {
          name: DVM_VERSION,
          served: true,
          storage: true,
          // Only spec changes bump metadata.generation, which the ledger keys on (uid#phase#generation),
          // and status writes cannot change the spec.
          subresources: { status: {} },
          additionalPrinterColumns: PRINTER_COLUMNS,
          schema: { openAPIV3Schema },
        },
      ],
    },
  };
}

const HEADER = `DirectVolumeMigration: what to move (PVCs) and between which clusters.
GENERATED by \`npm run crd\` (infra/dev/crd/dvmCrd.ts) from DvmSpecSchema and DvmStatusSchema in
src/dvm/types.ts: edit those (descriptions: infra/dev/crd/descriptions.ts) and regenerate. The API server
refuses what the controller would refuse, with the field's path; test/unit/crd/dvmCrd.test.ts fails when
this file and the schemas drift.`;

/** The CRD as the committed file holds it. */
export function dvmCrdYaml(): string {
  const document = new Document(dvmCrd());
  document.commentBefore = HEADER.split("\n")
    .map((line) => ` ${line}`)
    .join("\n");
  return document.toString({ indentSeq: false, lineWidth: 120 });
}
