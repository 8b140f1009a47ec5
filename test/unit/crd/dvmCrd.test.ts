/**
 * The committed DVM CRD is what infra/dev/crd/dvmCrd.ts generates from the parser's zod schemas: a bound,
 * pattern, field or description changed on one side only fails here, naming the path.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { FIELD_DESCRIPTIONS } from "../../../infra/dev/crd/descriptions";
import { DVM_CRD_PATH, dvmCrd, dvmCrdYaml } from "../../../infra/dev/crd/dvmCrd";

type Node = { [key: string]: unknown };

/** Every leaf of an object by its path ("a.b[0].c"), so a drift is reported where it is. */
function leaves(value: unknown, path = "", out = new Map<string, unknown>()): Map<string, unknown> {
  if (Array.isArray(value)) for (const [i, item] of value.entries()) leaves(item, `${path}[${i}]`, out);
  else if (value !== null && typeof value === "object" && Object.keys(value).length > 0)
    for (const [key, child] of Object.entries(value)) leaves(child, path ? `${path}.${key}` : key, out);
  else out.set(path, value);
  return out;
}

/** The paths where two CRDs differ, with both values. */
function drift(committed: unknown, generated: unknown): string[] {
  const a = leaves(committed);
  const b = leaves(generated);
  return [...new Set([...a.keys(), ...b.keys()])]
    .filter((path) => JSON.stringify(a.get(path)) !== JSON.stringify(b.get(path)))
    .map((path) => `${path}: committed ${JSON.stringify(a.get(path))}, generated ${JSON.stringify(b.get(path))}`);
}

const SCHEMA = "spec.versions[0].schema.openAPIV3Schema.properties";
const committedText = readFileSync(DVM_CRD_PATH, "utf8");

describe("the DirectVolumeMigration CRD", () => {
  it("is exactly what `npm run crd` generates from the zod schemas, field by field", () => {
    expect(drift(parse(committedText), dvmCrd())).toEqual([]);
  });

  it("is the generated text itself (comments and layout included)", () => {
    expect(committedText === dvmCrdYaml(), "infra/deploy/crds/directvolumemigrations.yaml is stale: run npm run crd").toBe(true);
  });

  it("reports a drift in a bound, a rule or a status field by its path", () => {
    const edited = parse(committedText) as Node;
    const schema = (edited.spec as { versions: { schema: { openAPIV3Schema: { properties: Record<string, Node> } } }[] }).versions[0]!.schema.openAPIV3Schema;
    const spec = schema.properties.spec as { properties: Record<string, Node>; "x-kubernetes-validations": unknown[] };
    spec.properties.persistentVolumeClaims!.maxItems = 101;
    spec["x-kubernetes-validations"].pop();
    delete (schema.properties.status as { properties: Record<string, unknown> }).properties.step;
    expect(drift(edited, dvmCrd())).toEqual([
      `${SCHEMA}.spec.properties.persistentVolumeClaims.maxItems: committed 101, generated 100`,
      `${SCHEMA}.spec.x-kubernetes-validations[3].rule: committed undefined, generated "!(has(self.quiesce) && self.quiesce && (!has(self.migrationType) || self.migrationType == 'Stage'))"`,
      `${SCHEMA}.spec.x-kubernetes-validations[3].fieldPath: committed undefined, generated ".quiesce"`,
      `${SCHEMA}.spec.x-kubernetes-validations[3].message: committed undefined, generated "is for a CutOver (or a Rollback's restore), not a Stage (a Stage runs while the applications keep running)"`,
      `${SCHEMA}.status.properties.step.description: committed undefined, generated "Position in the itinerary, e.g. \\"3/18\\"."`,
      `${SCHEMA}.status.properties.step.type: committed undefined, generated "string"`,
    ]);
  });

  it("takes each description from FIELD_DESCRIPTIONS: one dropped there is a drift at its path, one for a missing field an error", () => {
    const { "spec.transfer.delete": dropped, ...rest } = FIELD_DESCRIPTIONS;
    expect(drift(parse(committedText), dvmCrd(rest))).toEqual([
      `${SCHEMA}.spec.properties.transfer.properties.delete.description: committed ${JSON.stringify(dropped)}, generated undefined`,
    ]);
    expect(() => dvmCrd({ ...FIELD_DESCRIPTIONS, "spec.transfer.compress": "rsync --compress." })).toThrow(
      "FIELD_DESCRIPTIONS: spec.transfer.compress is not in the generated schema",
    );
  });

  it("is a structural schema: no reference, no combinator", () => {
    const keys = new Set<string>();
    const collect = (value: unknown): void => {
      if (Array.isArray(value)) value.forEach(collect);
      else if (value !== null && typeof value === "object")
        for (const [key, child] of Object.entries(value)) {
          keys.add(key);
          collect(child);
        }
    };
    collect(dvmCrd());
    for (const keyword of ["$ref", "$defs", "anyOf", "oneOf", "allOf", "not", "propertyNames", "const"]) expect(keys).not.toContain(keyword);
  });
});
