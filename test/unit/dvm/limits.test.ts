/**
 * The size limits of a DVM (src/dvm/limits.ts): the parser and the CRD refuse a larger one naming the
 * field, free text is cut by bytes, and a DVM at the limits, at its worst, fits every store with room.
 */

import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { checkOutcomeSize, MAX_OUTCOME_BYTES } from "../../../src/aws/ledger/codec";
import { boundedErrors, MAX_CONDITION_MESSAGE_BYTES, MAX_ERROR_TEXT_BYTES, MAX_PVCS_PER_DVM, MAX_RECORDED_ERRORS } from "../../../src/dvm/limits";
import { type DvmStatus, parseDvmSpec, type RsyncOperation } from "../../../src/dvm/types";
import { truncateUtf8 } from "../../../src/lib/textBounds";

type Schema = {
  type?: string;
  properties?: Record<string, Schema>;
  additionalProperties?: Schema;
  items?: Schema;
  maxLength?: number;
  maxItems?: number;
  enum?: string[];
  pattern?: string;
};
const crd = parse(readFileSync(fileURLToPath(new URL("../../../infra/deploy/crds/directvolumemigrations.yaml", import.meta.url)), "utf8")) as {
  spec: { versions: { schema: { openAPIV3Schema: Schema } }[] };
};
const specSchema = crd.spec.versions[0]!.schema.openAPIV3Schema.properties!.spec!;

const pvc = (i: number, over: Record<string, unknown> = {}) => ({
  name: `pvc-${i}`,
  namespace: "shop",
  targetStorageClass: "fast",
  targetAccessModes: ["ReadWriteOnce"],
  ...over,
});

/** Every string and list of the schema below `path`, with its bound (undefined: none). */
function unbounded(schema: Schema, path: string): string[] {
  const own = (schema.type === "string" && schema.maxLength === undefined && !schema.enum) || (schema.type === "array" && schema.maxItems === undefined);
  return [
    ...(own ? [path] : []),
    ...Object.entries(schema.properties ?? {}).flatMap(([name, child]) => unbounded(child, `${path}.${name}`)),
    ...(schema.items ? unbounded(schema.items, `${path}[]`) : []),
    ...(schema.additionalProperties ? unbounded(schema.additionalProperties, `${path}{}`) : []),
  ];
}

describe("the size of a DVM's spec", () => {
  it(`refuses more than ${MAX_PVCS_PER_DVM} PVCs, naming the field`, () => {
    const at = parseDvmSpec({ persistentVolumeClaims: Array.from({ length: MAX_PVCS_PER_DVM }, (_, i) => pvc(i)) });
    expect(at.ok).toBe(true);
    const over = parseDvmSpec({ persistentVolumeClaims: Array.from({ length: MAX_PVCS_PER_DVM + 1 }, (_, i) => pvc(i)) });
    expect(over).toEqual({ ok: false, issues: [{ field: "spec.persistentVolumeClaims", message: expect.stringMatching(/100/) }] });
  });

  it("refuses over-long strings, naming the field", () => {
    const over = parseDvmSpec({
      persistentVolumeClaims: [pvc(0, { targetNamespace: "n".repeat(64), targetStorageClass: "s".repeat(254) })],
      transferImage: `registry.example/${"i".repeat(600)}:1`,
    });
    expect(over.ok ? [] : over.issues.map((i) => i.field).sort()).toEqual([
      "spec.persistentVolumeClaims[0].targetNamespace",
      "spec.persistentVolumeClaims[0].targetStorageClass",
      "spec.transferImage",
    ]);
  });

  // A namespace with a dot passed both checks and then failed on every attempt at the API server (second
  // audit, item 17): a namespace is a DNS label, in the parser and the CRD alike.
  it("refuses a namespace with a dot, in the parser and the CRD's pattern", () => {
    const dotted = parseDvmSpec({ persistentVolumeClaims: [pvc(0, { namespace: "shop.eu", targetNamespace: "shop.us" })] });
    expect(dotted.ok ? [] : dotted.issues.map((i) => i.field).sort()).toEqual([
      "spec.persistentVolumeClaims[0].namespace",
      "spec.persistentVolumeClaims[0].targetNamespace",
    ]);
    const properties = specSchema.properties!.persistentVolumeClaims!.items!.properties!;
    for (const field of ["namespace", "targetNamespace"] as const) {
      const pattern = new RegExp((properties[field] as { pattern: string }).pattern);
      expect(pattern.test("shop.eu"), field).toBe(false);
      expect(pattern.test("shop-eu"), field).toBe(true);
    }
  });

  it("has the parser's bounds in the CRD, and a bound on every string and list of the spec", () => {
    const pvcs = specSchema.properties!.persistentVolumeClaims!;
    expect(pvcs.maxItems).toBe(MAX_PVCS_PER_DVM);
    expect(pvcs.items!.properties!.namespace!.maxLength).toBe(63);
    expect(pvcs.items!.properties!.targetNamespace!.maxLength).toBe(63);
    // spec.transferPodAnnotations are bounded by the operator's annotation policy (issue #24, item 4).
    expect(unbounded(specSchema, "spec").filter((p) => !p.startsWith("spec.transferPodAnnotations"))).toEqual([]);
  });
});

describe("bounded free text", () => {
  it("cuts by UTF-8 bytes on a character boundary and marks the cut", () => {
    expect(truncateUtf8("short", 10)).toBe("short");
    const cut = truncateUtf8("é".repeat(100), 11);
    expect(cut).toBe(`${"é".repeat(4)}…`);
    expect(Buffer.byteLength(cut)).toBeLessThanOrEqual(11);
    expect(truncateUtf8("😀😀😀", 6)).toBe("…");
  });

  it("bounds a list of errors in count and in bytes, saying how many were left out", () => {
    const errors = boundedErrors(Array.from({ length: 500 }, (_, i) => `${i}: ${"x".repeat(5_000)}`));
    expect(errors).toHaveLength(MAX_RECORDED_ERRORS);
    expect(errors.at(-1)).toBe(`... and ${500 - MAX_RECORDED_ERRORS + 1} more`);
    expect(Math.max(...errors.map((e) => Buffer.byteLength(e)))).toBe(MAX_ERROR_TEXT_BYTES);
  });
});

describe("a DVM at the limits, at its worst", () => {
  // Every name at the longest the CRD allows, every PVC failed after its last attempt.
  const longName = (i: number) => `${String(i).padStart(3, "0")}${"n".repeat(250)}`;
  const namespace = (i: number) => `${String(i).padStart(3, "0")}${"s".repeat(60)}`;
  const spec = {
    persistentVolumeClaims: Array.from({ length: MAX_PVCS_PER_DVM }, (_, i) => ({
      name: longName(i),
      namespace: namespace(i),
      targetName: longName(i),
      targetNamespace: namespace(i),
      targetStorageClass: "c".repeat(253),
      targetAccessModes: ["ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod"],
      targetVolumeMode: "Filesystem",
      verify: true,
    })),
  };
  const figures = { bytesTransferred: 2 ** 50, totalBytes: 2 ** 50, percent: 99.99, bytesPerSecond: 1e12, secondsLeft: 1e9, elapsedSeconds: 1e9 };
  const verification = {
    filesTransferred: 2 ** 40,
    filesSkipped: 2 ** 40,
    filesVanished: 2 ** 40,
    filesFailed: 2 ** 40,
    filesDeleted: 2 ** 40,
    bytesTransferred: 2 ** 50,
    transferredFileSize: 2 ** 50,
    totalFiles: 2 ** 40,
    totalBytes: 2 ** 50,
    checksumVerified: true,
    checksumMismatches: 2 ** 40,
  };
  const ref = (i: number) => ({ name: longName(i), namespace: namespace(i) });
  const rsyncOperations: RsyncOperation[] = spec.persistentVolumeClaims.map((_, i) => ({
    pvcReference: ref(i),
    currentAttempt: 20,
    failed: true,
    ...figures,
    verification,
  }));
  const pods = spec.persistentVolumeClaims.map((_, i) => ({
    name: `dvm-0123456789-rsync-0123456789-20`,
    namespace: namespace(i),
    pvcRef: ref(i),
    lastObservedProgressPercent: "99.99%",
    lastObservedTransferRate: "1023.99GB/s",
    totalElapsedTime: "999999999s",
  }));
  const errors = boundedErrors(spec.persistentVolumeClaims.map((_, i) => `spec.persistentVolumeClaims[${i}]: ${"e".repeat(5_000)}`));
  const statusUpdate = { rsyncOperations, failedPods: pods, progress: figures };

  it("records the completion of RunRsyncOperations within a ledger item, with room", () => {
    const record = { result: "failed" as const, nextPhase: "MigrationFailed" as const, finishedAt: Date.now(), errors, statusUpdate };
    expect(() => checkOutcomeSize(record)).not.toThrow();
    const bytes = Buffer.byteLength(JSON.stringify(record));
    // The arithmetic of docs/security.md: about 1.5 KB of status and 1 KB of error per PVC.
    expect(bytes).toBeLessThan(0.8 * MAX_OUTCOME_BYTES);
  });

  it("keeps the DVM object well below etcd's 1.5 MiB request limit", () => {
    const status: DvmStatus = {
      ...statusUpdate,
      targetSizes: spec.persistentVolumeClaims.map((_, i) => ({
        pvcReference: ref(i),
        usedBytes: 2 ** 50,
        headroomPercent: 1000,
        requested: "1099511627776Mi",
        sourceSize: "1099511627776Mi",
      })),
      skippedVolumes: spec.persistentVolumeClaims.map((_, i) => `${namespace(i)}/${longName(i)}`),
      errors,
      conditions: Array.from({ length: 12 }, (_, i) => ({
        type: `Condition${i}`,
        status: "True" as const,
        category: "Warn" as const,
        reason: "Reason",
        message: "m".repeat(MAX_CONDITION_MESSAGE_BYTES),
        lastTransitionTime: new Date().toISOString(),
      })),
    };
    const bytes = Buffer.byteLength(JSON.stringify({ spec, status }));
    expect(bytes).toBeLessThan(0.5 * 1.5 * 1024 * 1024);
  });
});
