/**
 * spec.persistentVolumeClaimSelector: the selector's meaning and validation, its bound, the namespace
 * rules of the security model, and its one expansion by Started (src/dvm/selection.ts, src/phases/started.ts).
 */
import { describe, expect, it } from "vitest";
import { MAX_PVCS_PER_DVM } from "../../../src/dvm/limits";
import { DEFAULT_MIGRATION_POLICY, policyViolations } from "../../../src/dvm/policy";
import { matchesLabelSelector, resolvedPvcs, selectPvcs } from "../../../src/dvm/selection";
import { type DvmSpec, type PvcSelector, parseDvmSpec } from "../../../src/dvm/types";
import { started } from "../../../src/phases/started";
import { specField, volumePairs } from "../../../src/phases/volumes";
import { fakeContext, pvc, storageClass } from "../../support/phaseContext";

const SELECTOR: PvcSelector = {
  namespace: "shop",
  labelSelector: { matchLabels: { tier: "data" } },
  targetStorageClass: "fast",
  targetAccessModes: ["ReadWriteOnce"],
};

const parsedSpec = (spec: unknown): DvmSpec => {
  const parsed = parseDvmSpec(spec);
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.issues));
  return parsed.spec;
};

const labelled = (namespace: string, name: string, labels: Record<string, string>) => pvc(namespace, name, { metadata: { name, namespace, labels } });

describe("a label selector", () => {
  it("means what metav1.LabelSelector means: every matchLabel and every expression holds", () => {
    const labels = { tier: "data", app: "shop", zone: "a" };
    expect(matchesLabelSelector(labels, undefined)).toBe(true);
    expect(matchesLabelSelector(labels, {})).toBe(true);
    expect(matchesLabelSelector(labels, { matchLabels: { tier: "data", app: "shop" } })).toBe(true);
    expect(matchesLabelSelector(labels, { matchLabels: { tier: "data", app: "web" } })).toBe(false);
    expect(matchesLabelSelector(labels, { matchExpressions: [{ key: "zone", operator: "In", values: ["a", "b"] }] })).toBe(true);
    expect(matchesLabelSelector(labels, { matchExpressions: [{ key: "zone", operator: "NotIn", values: ["a"] }] })).toBe(false);
    expect(matchesLabelSelector(labels, { matchExpressions: [{ key: "gone", operator: "NotIn", values: ["a"] }] })).toBe(true);
    expect(matchesLabelSelector(labels, { matchExpressions: [{ key: "gone", operator: "In", values: ["a"] }] })).toBe(false);
    expect(matchesLabelSelector(labels, { matchExpressions: [{ key: "app", operator: "Exists" }] })).toBe(true);
    expect(matchesLabelSelector(labels, { matchExpressions: [{ key: "app", operator: "DoesNotExist" }] })).toBe(false);
    expect(matchesLabelSelector(labels, { matchLabels: { tier: "data" }, matchExpressions: [{ key: "legacy", operator: "DoesNotExist" }] })).toBe(true);
  });

  it("selects the matches sorted by name, whatever order the API server listed them in", () => {
    const listed = [
      { name: "media", labels: { tier: "data" } },
      { name: "cache", labels: { tier: "scratch" } },
      { name: "db", labels: { tier: "data" } },
      { name: "plain" },
    ];
    expect(selectPvcs(SELECTOR, listed)).toEqual({
      ok: true,
      selected: [
        { namespace: "shop", name: "db" },
        { namespace: "shop", name: "media" },
      ],
    });
  });

  it(`fails on no match, and on more than ${MAX_PVCS_PER_DVM} matches, naming the field`, () => {
    expect(selectPvcs(SELECTOR, [{ name: "cache", labels: { tier: "scratch" } }])).toEqual({
      ok: false,
      error: 'spec.persistentVolumeClaimSelector: no PersistentVolumeClaim in namespace "shop" matches the selector',
    });
    const many = (n: number) => Array.from({ length: n }, (_, i) => ({ name: `pvc-${i}`, labels: { tier: "data" } }));
    expect(selectPvcs(SELECTOR, many(MAX_PVCS_PER_DVM))).toMatchObject({ ok: true });
    const over = selectPvcs(SELECTOR, many(MAX_PVCS_PER_DVM + 1));
    expect(over).toEqual({
      ok: false,
      error: `spec.persistentVolumeClaimSelector: matches ${MAX_PVCS_PER_DVM + 1} PersistentVolumeClaims in namespace "shop", more than the ${MAX_PVCS_PER_DVM} one DVM may move; narrow the selector or split the migration`,
    });
  });
});

describe("spec.persistentVolumeClaimSelector in the parser", () => {
  it("is accepted instead of a list, and refused together with one or when neither is set", () => {
    expect(parseDvmSpec({ persistentVolumeClaimSelector: SELECTOR }).ok).toBe(true);
    expect(parseDvmSpec({})).toEqual({
      ok: false,
      issues: [{ field: "spec.persistentVolumeClaims", message: "is required unless spec.persistentVolumeClaimSelector is set" }],
    });
    const both = parseDvmSpec({
      persistentVolumeClaimSelector: SELECTOR,
      persistentVolumeClaims: [{ name: "db", namespace: "shop", targetStorageClass: "fast", targetAccessModes: ["ReadWriteOnce"] }],
    });
    expect(both).toEqual({
      ok: false,
      issues: [{ field: "spec.persistentVolumeClaimSelector", message: "must not be set together with spec.persistentVolumeClaims: use one or the other" }],
    });
  });

  it("names the field of a malformed selector", () => {
    const bad = parseDvmSpec({
      persistentVolumeClaimSelector: {
        ...SELECTOR,
        namespace: "Shop",
        labelSelector: {
          matchLabels: { "bad key!": "x", tier: "-dash" },
          matchExpressions: [
            { key: "zone", operator: "In" },
            { key: "app", operator: "Exists", values: ["x"] },
            { key: "app", operator: "Near", values: ["x"] },
          ],
        },
      },
    });
    expect(bad.ok).toBe(false);
    const fields = bad.ok ? [] : bad.issues.map((i) => i.field).sort();
    expect(fields).toEqual(
      [
        "spec.persistentVolumeClaimSelector.namespace",
        'spec.persistentVolumeClaimSelector.labelSelector.matchLabels["bad key!"]',
        "spec.persistentVolumeClaimSelector.labelSelector.matchLabels.tier",
        "spec.persistentVolumeClaimSelector.labelSelector.matchExpressions[0].values",
        "spec.persistentVolumeClaimSelector.labelSelector.matchExpressions[1].values",
        "spec.persistentVolumeClaimSelector.labelSelector.matchExpressions[2].operator",
      ].sort(),
    );
  });

  it("bounds the selector's lists", () => {
    const matchLabels = Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`k${i}`, "v"]));
    const matchExpressions = Array.from({ length: 17 }, (_, i) => ({ key: `k${i}`, operator: "Exists" }));
    const values = Array.from({ length: 33 }, (_, i) => `v${i}`);
    const over = parseDvmSpec({
      persistentVolumeClaimSelector: { ...SELECTOR, labelSelector: { matchLabels, matchExpressions } },
    });
    expect(over.ok ? [] : over.issues.map((i) => i.field).sort()).toEqual([
      "spec.persistentVolumeClaimSelector.labelSelector.matchExpressions",
      "spec.persistentVolumeClaimSelector.labelSelector.matchLabels",
    ]);
    const longValues = parseDvmSpec({
      persistentVolumeClaimSelector: { ...SELECTOR, labelSelector: { matchExpressions: [{ key: "k", operator: "In", values }] } },
    });
    expect(longValues.ok ? [] : longValues.issues.map((i) => i.field)).toEqual(["spec.persistentVolumeClaimSelector.labelSelector.matchExpressions[0].values"]);
  });
});

describe("a selector under the migration policy", () => {
  it("may select and target only the DVM's own namespace outside an admin namespace, like a listed PVC", () => {
    const own = parsedSpec({ persistentVolumeClaimSelector: { ...SELECTOR, namespace: "team-a", targetNamespace: "team-a" } });
    expect(policyViolations("team-a", own, DEFAULT_MIGRATION_POLICY)).toEqual([]);
    const crossing = parsedSpec({ persistentVolumeClaimSelector: { ...SELECTOR, namespace: "team-b", targetNamespace: "team-c" } });
    const violations = policyViolations("team-a", crossing, DEFAULT_MIGRATION_POLICY);
    expect(violations.map((v) => v.field)).toEqual(["spec.persistentVolumeClaimSelector.namespace", "spec.persistentVolumeClaimSelector.targetNamespace"]);
    for (const v of violations) expect(v.message).toContain("only DVMs in an admin namespace may reference other namespaces");
    // An admin namespace's DVM may select anywhere.
    expect(policyViolations("dvm-system", crossing, DEFAULT_MIGRATION_POLICY)).toEqual([]);
  });
});

describe("the volumes of a selector DVM", () => {
  it("are none before the first phase, then the recorded selection with the selector's target fields", () => {
    const spec = parsedSpec({ persistentVolumeClaimSelector: { ...SELECTOR, targetNamespace: "shop-new", verify: true } });
    expect(resolvedPvcs(spec, {})).toEqual({ source: "selector", pvcs: [] });
    const pairs = volumePairs(spec, { selectedPersistentVolumeClaims: [{ namespace: "shop", name: "db" }] }, "VolumeMigration");
    expect(pairs).toEqual([
      expect.objectContaining({
        index: 0,
        selected: "shop/db",
        from: { namespace: "shop", name: "db" },
        to: { namespace: "shop-new", name: "db" },
        targetStorageClass: "fast",
        targetAccessModes: ["ReadWriteOnce"],
        verify: true,
      }),
    ]);
    expect(specField(pairs[0]!, "targetStorageClass")).toBe("spec.persistentVolumeClaimSelector.targetStorageClass (selected shop/db)");
    expect(specField(pairs[0]!, "name")).toBe("spec.persistentVolumeClaimSelector (selected shop/db)");
  });
});

describe("Started with a selector", () => {
  it("expands it into the status (recorded with the completion), checking each selected PVC", async () => {
    const { ctx, source, destination } = fakeContext({ persistentVolumeClaimSelector: SELECTOR });
    source.add(labelled("shop", "media", { tier: "data" }), labelled("shop", "db", { tier: "data" }), labelled("shop", "cache", { tier: "scratch" }));
    source.add(labelled("other", "db2", { tier: "data" }));
    destination.add(storageClass("fast"));
    expect(await started(ctx)).toEqual({
      kind: "advance",
      status: {
        selectedPersistentVolumeClaims: [
          { namespace: "shop", name: "db" },
          { namespace: "shop", name: "media" },
        ],
      },
    });
  });

  it("keeps a selection already recorded: a repeated Started reads it, not the cluster", async () => {
    const recorded = [{ namespace: "shop", name: "db" }];
    const { ctx, source, destination } = fakeContext({ persistentVolumeClaimSelector: SELECTOR }, { status: { selectedPersistentVolumeClaims: recorded } });
    // Created (or labelled) after the first run selected: it must not join.
    source.add(labelled("shop", "db", { tier: "data" }), labelled("shop", "late", { tier: "data" }));
    destination.add(storageClass("fast"));
    expect(await started(ctx)).toEqual({ kind: "advance", status: { selectedPersistentVolumeClaims: recorded } });
  });

  it("fails naming the selector when it selects too many, or a selected PVC cannot be moved", async () => {
    const { ctx, source, destination } = fakeContext({ persistentVolumeClaimSelector: SELECTOR });
    source.add(...Array.from({ length: MAX_PVCS_PER_DVM + 1 }, (_, i) => labelled("shop", `pvc-${i}`, { tier: "data" })));
    destination.add(storageClass("fast"));
    expect(await started(ctx)).toMatchObject({ kind: "fail", errors: [expect.stringMatching(/^spec\.persistentVolumeClaimSelector: matches 101 /)] });

    const missingClass = fakeContext({ persistentVolumeClaimSelector: SELECTOR });
    missingClass.source.add(labelled("shop", "db", { tier: "data" }));
    expect(await started(missingClass.ctx)).toEqual({
      kind: "fail",
      category: "Critical",
      errors: ['spec.persistentVolumeClaimSelector.targetStorageClass (selected shop/db): StorageClass "fast" not found on the destination cluster'],
      status: { selectedPersistentVolumeClaims: [{ namespace: "shop", name: "db" }] },
    });
  });
});
