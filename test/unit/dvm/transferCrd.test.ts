/** The CRD's spec.transfer and the parser's TransferOptionsSchema describe the same fields and bounds. */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { QUANTITY_PATTERN } from "../../../src/dvm/quantity";
import { RSYNC_LONG_OPTION_PATTERN, TransferOptionsSchema } from "../../../src/dvm/types";
import { TRANSFER_POD_ANNOTATION_BOUNDS } from "../../../src/transfer/podAnnotations";

type Schema = {
  properties?: Record<string, Schema>;
  items?: Schema;
  additionalProperties?: Schema;
  pattern?: string;
  minimum?: number;
  maximum?: number;
  maxItems?: number;
  maxProperties?: number;
  maxLength?: number;
  "x-kubernetes-validations"?: { rule: string }[];
};
const crd = parse(readFileSync(fileURLToPath(new URL("../../../infra/deploy/crds/directvolumemigrations.yaml", import.meta.url)), "utf8")) as {
  spec: { versions: { schema: { openAPIV3Schema: Schema } }[] };
};
const transfer = crd.spec.versions[0]!.schema.openAPIV3Schema.properties!.spec!.properties!.transfer!;

describe("spec.transfer in the CRD", () => {
  it("has exactly the parser's fields", () => {
    expect(Object.keys(transfer.properties!).sort()).toEqual(Object.keys(TransferOptionsSchema.shape).sort());
  });

  it("uses the parser's patterns and bounds", () => {
    const p = transfer.properties!;
    expect(p.extraOptions!.items!.pattern).toBe(RSYNC_LONG_OPTION_PATTERN.source);
    expect(p.extraOptions!.maxItems).toBe(32);
    for (const kind of ["requests", "limits"])
      for (const resource of ["cpu", "memory"]) expect(p.resources!.properties![kind]!.properties![resource]!.pattern).toBe(QUANTITY_PATTERN.source);
    expect([p.bandwidthLimitKiBPerSecond!.minimum, p.maxConcurrentVolumes!.minimum, p.maxConcurrentVolumes!.maximum]).toEqual([1, 1, 1000]);
  });
});

describe("spec.transferPodAnnotations in the CRD", () => {
  it("has the parser's bounds (src/transfer/podAnnotations.ts)", () => {
    const annotations = crd.spec.versions[0]!.schema.openAPIV3Schema.properties!.spec!.properties!.transferPodAnnotations!;
    const { maxCount, maxKeyLength, maxValueLength } = TRANSFER_POD_ANNOTATION_BOUNDS;
    expect([annotations.maxProperties, annotations.additionalProperties?.maxLength]).toEqual([maxCount, maxValueLength]);
    expect(annotations["x-kubernetes-validations"]?.map((v) => v.rule)).toEqual([`self.all(k, size(k) <= ${maxKeyLength})`]);
  });
});
