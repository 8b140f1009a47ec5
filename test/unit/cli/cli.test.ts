/**
 * The `dvm` command's pure parts: flags and files to a DVM spec, validation messages naming field and
 * flag, status summaries, progress records, the plain watch output; and runCli's exits for input that
 * never reaches a cluster. Against real clusters and DynamoDB: test/integration/cli.test.ts.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { CliContext } from "../../../src/cli/context";
import { explainError } from "../../../src/cli/errors";
import type { CliIo } from "../../../src/cli/io";
import { retryWhileBusy } from "../../../src/cli/lookup";
import { runCli } from "../../../src/cli/program";
import { parsePercent, volumeProgressOf } from "../../../src/cli/progress";
import { draftFromDocument, flagForField, formatIssue, parsePvcFlag, parseSecretRef, specFromFlags, validateDraft } from "../../../src/cli/spec";
import { formatAge, summarizeDvm, volumesSummary } from "../../../src/cli/summary";
import { renderTable } from "../../../src/cli/table";
import { BarWatchView, PlainWatchView, snapshotOf } from "../../../src/cli/watchView";
import { ENV } from "../../../src/config/environment";
import { ITINERARIES } from "../../../src/dvm/itinerary";
import type { DirectVolumeMigration } from "../../../src/dvm/types";
import { KubeApiError } from "../../../src/kube/errors";
import { LedgerError, LedgerUnavailableError } from "../../../src/ledger/errors";

function fakeIo(env: Record<string, string | undefined> = {}, cwd = tmpdir()) {
  let out = "";
  let err = "";
  const io: CliIo = {
    stdout: { write: (text: string) => (out += text) },
    stderr: { write: (text: string) => (err += text) },
    env,
    now: () => Date.parse("2026-01-02T03:04:05Z"),
    sleep: async () => {},
    cwd,
  };
  return { io, out: () => out, err: () => err };
}

describe("--pvc and secret flags", () => {
  it("reads NAMESPACE/NAME with an optional target namespace and name", () => {
    expect(parsePvcFlag("shop/db")).toEqual({ namespace: "shop", name: "db" });
    expect(parsePvcFlag("shop/db=shop-new")).toEqual({ namespace: "shop", name: "db", targetNamespace: "shop-new" });
    expect(parsePvcFlag("shop/db=shop-new/db2")).toEqual({ namespace: "shop", name: "db", targetNamespace: "shop-new", targetName: "db2" });
    for (const bad of ["db", "a/b/c", "a/b=c/d/e", "a/b=c=d"]) expect(parsePvcFlag(bad), bad).toBeUndefined();
  });

  it("reads [NAMESPACE/]NAME[:KEY] secret references", () => {
    expect(parseSecretRef("dst")).toEqual({ name: "dst" });
    expect(parseSecretRef("infra/dst:config")).toEqual({ name: "dst", namespace: "infra", key: "config" });
  });
});

describe("specFromFlags + validateDraft", () => {
  it("builds the spec the controller expects, with ReadWriteOnce by default", () => {
    const { spec, issues } = specFromFlags({
      pvc: ["shop/db", "shop/media=shop-new/media2"],
      storageClass: "fast",
      destinationKubeconfigSecret: "dst",
      backoffLimit: "3",
      endpointType: "NodePort",
      verify: true,
      rollback: true,
    });
    expect(issues).toEqual([]);
    expect(spec).toEqual({
      persistentVolumeClaims: [
        { namespace: "shop", name: "db", targetStorageClass: "fast", targetAccessModes: ["ReadWriteOnce"], verify: true },
        {
          namespace: "shop",
          name: "media",
          targetNamespace: "shop-new",
          targetName: "media2",
          targetStorageClass: "fast",
          targetAccessModes: ["ReadWriteOnce"],
          verify: true,
        },
      ],
      destinationCluster: { kubeconfigSecretRef: { name: "dst" } },
      backOffLimit: 3,
      endpointType: "NodePort",
      migrationType: "Rollback",
    });
    expect(validateDraft({ name: "move", spec }, true, issues)).toEqual([]);
  });

  it("names every failing field and the flag that sets it", () => {
    const { spec, issues: early } = specFromFlags({
      pvc: ["shop/db", "nonsense"],
      accessMode: ["ReadWriteSometimes"],
      backoffLimit: "many",
      endpointType: "Tunnel",
    });
    const issues = validateDraft({ name: "Bad_Name", spec }, true, early).map(formatIssue);
    expect(issues).toEqual([
      'spec.persistentVolumeClaims[1] (--pvc): "nonsense" is not NAMESPACE/NAME[=TARGET_NAMESPACE[/TARGET_NAME]]',
      `metadata.name: "Bad_Name" must be a DNS-1123 name (lower case letters, digits, '-' and '.')`,
      "spec.persistentVolumeClaims[0].targetStorageClass (--storage-class): is required",
      expect.stringMatching(/^spec\.persistentVolumeClaims\[0\]\.targetAccessModes\[0\] \(--access-mode\): /),
      "spec.backOffLimit (--backoff-limit): Invalid input: expected number, received string",
      expect.stringMatching(/^spec\.endpointType \(--endpoint-type\): .*ClusterIP/),
    ]);
  });

  it("asks for at least one --pvc and for a name", () => {
    const { spec } = specFromFlags({ storageClass: "fast" });
    expect(validateDraft({ spec }, true).map(formatIssue)).toEqual([
      "metadata.name: is required: give NAME (or metadata.name in the file)",
      expect.stringMatching(/^spec\.persistentVolumeClaims \(--pvc\): /),
    ]);
  });

  it("maps spec fields to flags", () => {
    expect(flagForField("spec.persistentVolumeClaims[2].namespace")).toBe("--pvc #3");
    expect(flagForField("spec.destinationCluster.kubeconfigSecretRef.name")).toBe("--destination-kubeconfig-secret");
    expect(flagForField("spec.transferImage")).toBeUndefined();
  });
});

describe("draftFromDocument", () => {
  const spec = { persistentVolumeClaims: [{ name: "db", namespace: "shop", targetStorageClass: "fast", targetAccessModes: ["ReadWriteOnce"] }] };

  it("reads a whole DVM in YAML, or just a spec in JSON", () => {
    const yaml = `apiVersion: migration.openshift.io/v1alpha1\nkind: DirectVolumeMigration\nmetadata:\n  name: move\n  namespace: dvm\n  labels: {team: shop}\nspec:\n  persistentVolumeClaims:\n    - {name: db, namespace: shop, targetStorageClass: fast, targetAccessModes: [ReadWriteOnce]}\n`;
    expect(draftFromDocument(yaml, "dvm.yaml")).toEqual({ draft: { name: "move", namespace: "dvm", labels: { team: "shop" }, spec }, issues: [] });
    expect(draftFromDocument(JSON.stringify(spec), "spec.json")).toEqual({ draft: { spec }, issues: [] });
  });

  it("names the file when it is not one readable document, and the field when the kind is wrong", () => {
    expect(() => draftFromDocument("a: [1, 2", "broken.yaml")).toThrow(/^broken\.yaml is not valid YAML or JSON/);
    expect(() => draftFromDocument("a: 1\n---\nb: 2\n", "two.yaml")).toThrow(/holds 2 documents/);
    expect(() => draftFromDocument("- 1\n", "list.yaml")).toThrow(/does not hold an object/);
    expect(draftFromDocument("kind: Pod\nspec: {}\n", "pod.yaml").issues).toEqual([{ field: "kind", message: 'must be DirectVolumeMigration (got "Pod")' }]);
    const { draft } = draftFromDocument("kind: DirectVolumeMigration\nmetadata: {name: x}\n", "nospec.yaml");
    expect(validateDraft(draft, false).map(formatIssue)).toEqual(["spec: is required"]);
  });
});

describe("runCli without a cluster", () => {
  it("rejects a bad spec before loading any kubeconfig, printing every field, and creates nothing", async () => {
    const { io, out, err } = fakeIo({ [ENV.home]: "/nonexistent" });
    const code = await runCli(["migrate", "move", "--pvc", "shop/db", "--backoff-limit", "-1"], io);
    expect(code).toBe(1);
    expect(out()).toBe("");
    expect(err()).toContain("nothing was created");
    expect(err()).toContain("spec.persistentVolumeClaims[0].targetStorageClass (--storage-class): is required");
    expect(err()).toMatch(/spec\.backOffLimit \(--backoff-limit\): .*>=0/);
    expect(err()).not.toContain("no cluster configured");
  });

  it("reads -f relative to the working directory and refuses mixing it with spec flags", async () => {
    const dir = mkdtempSync(join(tmpdir(), "dvm-cli-"));
    writeFileSync(join(dir, "dvm.yaml"), "kind: DirectVolumeMigration\nmetadata: {name: move, namespace: x}\nspec: {persistentVolumeClaims: []}\n");
    const bad = fakeIo({ [ENV.home]: "/nonexistent" }, dir);
    expect(await runCli(["migrate", "-f", "dvm.yaml"], bad.io)).toBe(1);
    expect(bad.err()).toMatch(/spec\.persistentVolumeClaims: .*>=1/);
    const mixed = fakeIo({ [ENV.home]: "/nonexistent" }, dir);
    expect(await runCli(["migrate", "-f", "dvm.yaml", "--pvc", "a/b"], mixed.io)).toBe(1);
    expect(mixed.err()).toMatch(/^error: -f\/--file and the spec flags .* cannot be combined/);
    const missing = fakeIo({ [ENV.home]: "/nonexistent" }, dir);
    expect(await runCli(["migrate", "-f", "nope.yaml"], missing.io)).toBe(1);
    expect(missing.err()).toBe(`error: cannot read ${join(dir, "nope.yaml")}: ENOENT\n`);
  });

  it("says in one line that no cluster is configured", async () => {
    const { io, err } = fakeIo({ [ENV.home]: "/nonexistent" });
    expect(await runCli(["get", "move"], io)).toBe(1);
    expect(err()).toBe("error: no cluster configured: pass --kubeconfig FILE or set KUBECONFIG (there is no ~/.kube/config)\n");
    const named = fakeIo({ [ENV.home]: "/nonexistent" });
    expect(await runCli(["--kubeconfig", "/nonexistent/kc", "list"], named.io)).toBe(1);
    expect(named.err()).toBe("error: kubeconfig /nonexistent/kc does not exist: fix --kubeconfig\n");
  });

  it("asks for the ledger table when --uid skips the cluster", async () => {
    const { io, err } = fakeIo({});
    expect(await runCli(["report", "--uid", "abc"], io)).toBe(1);
    expect(err()).toBe("error: no ledger table: pass --table NAME or set LEDGER_TABLE_NAME\n");
  });

  it("leaves usage errors to commander, with exit code 1", async () => {
    const { io, err } = fakeIo({});
    expect(await runCli(["watch"], io)).toBe(1);
    expect(err()).toContain("missing required argument 'name'");
    const bad = fakeIo({});
    expect(await runCli(["watch", "x", "--interval", "0"], bad.io)).toBe(1);
    expect(bad.err()).toContain("expected a positive number of seconds");
  });
});

const completedDvm: DirectVolumeMigration = {
  apiVersion: "migration.openshift.io/v1alpha1",
  kind: "DirectVolumeMigration",
  metadata: { name: "move", namespace: "dvm", uid: "u-1", generation: 1, resourceVersion: "9", creationTimestamp: "2026-01-02T02:54:05Z" },
  spec: {
    persistentVolumeClaims: [
      { name: "db", namespace: "shop", targetStorageClass: "fast", targetAccessModes: ["ReadWriteOnce"] },
      { name: "logs", namespace: "ops", targetNamespace: "ops-new", targetStorageClass: "fast", targetAccessModes: ["ReadWriteOnce"] },
    ],
  },
  status: {
    phase: "Completed",
    itinerary: "VolumeMigration",
    step: "16/16",
    conditions: [
      {
        type: "Succeeded",
        status: "True",
        category: "Advisory",
        reason: "Completed",
        message: "The migration has succeeded",
        lastTransitionTime: "2026-01-02T03:00:00Z",
        durable: true,
      },
    ],
    rsyncOperations: [
      { pvcReference: { namespace: "shop", name: "db" }, currentAttempt: 1, succeeded: true },
      { pvcReference: { namespace: "ops", name: "logs" }, currentAttempt: 2, failed: true },
    ],
    successfulPods: [
      { name: "p1", namespace: "shop", pvcRef: { namespace: "shop", name: "db" }, lastObservedProgressPercent: "100%", lastObservedTransferRate: "10MB/s" },
    ],
  },
};

describe("summarizeDvm", () => {
  it("reads step numbers from the itinerary table and a result per PVC", () => {
    const s = summarizeDvm(completedDvm, Date.parse("2026-01-02T03:04:05Z"));
    const total = ITINERARIES.VolumeMigration.length;
    expect(s).toMatchObject({
      phase: "Completed",
      step: total,
      totalSteps: total,
      stepLabel: `Step ${total}/${total}`,
      result: "Succeeded",
      age: "10m",
      conditionsSummary: "Succeeded",
    });
    expect(s.volumes).toEqual([
      { pvc: "shop/db", target: "shop/db", attempt: 1, state: "succeeded", progress: "100%", rate: "10MB/s", pod: "shop/p1" },
      { pvc: "ops/logs", target: "ops-new/logs", attempt: 2, state: "failed" },
    ]);
    expect(volumesSummary(s.volumes)).toBe("1/2 succeeded, 1 failed");
  });

  it("says Pending before the controller wrote a status, and Failed after a failed migration", () => {
    expect(summarizeDvm({ ...completedDvm, status: {} }, 0)).toMatchObject({
      result: "Pending",
      stepLabel: "",
      volumes: [{ state: "waiting" }, { state: "waiting" }],
    });
    const failed = {
      ...completedDvm,
      status: {
        ...completedDvm.status,
        itinerary: "VolumeMigrationFailed",
        conditions: [{ type: "Failed", status: "True" as const, category: "Critical" as const, lastTransitionTime: "" }],
      },
    };
    expect(summarizeDvm(failed, 0)).toMatchObject({ result: "Failed", step: 5, totalSteps: 5, conditionsSummary: "Failed(Critical)" });
  });

  it("formats ages as kubectl does", () => {
    const now = Date.parse("2026-01-10T00:00:00Z");
    expect(["2026-01-09T23:59:30Z", "2026-01-09T23:30:00Z", "2026-01-09T21:15:00Z", "2026-01-07T22:00:00Z"].map((t) => formatAge(t, now))).toEqual([
      "30s",
      "30m",
      "2h45m",
      "2d2h",
    ]);
  });
});

describe("progress records and the plain watch output", () => {
  it("reads a DirectVolumeMigrationProgress status", () => {
    const record = {
      apiVersion: "migration.openshift.io/v1alpha1",
      kind: "DirectVolumeMigrationProgress",
      metadata: { name: "dvm-abc-0", namespace: "dvm" },
      spec: { pvcName: "db", pvcNamespace: "shop" },
      status: {
        podName: "dvm-abc-rsync-0-1",
        attempt: 1,
        phase: "running",
        lastObservedProgressPercent: "42%",
        lastObservedTransferRate: "1.2MB/s",
        bytesTransferred: 1234,
      },
    };
    expect(volumeProgressOf(record)).toEqual({
      pvc: "shop/db",
      record: "dvm-abc-0",
      pod: "dvm-abc-rsync-0-1",
      attempt: 1,
      state: "running",
      percent: 42,
      rate: "1.2MB/s",
      bytesTransferred: 1234,
    });
    expect(volumeProgressOf({ ...record, status: { phase: "succeeded" } })).toMatchObject({ state: "succeeded", percent: 100 });
    expect(volumeProgressOf({ ...record, status: undefined })).toEqual({ pvc: "shop/db", record: "dvm-abc-0", state: "waiting" });
    expect([parsePercent("7.5%"), parsePercent("x"), parsePercent(140)]).toEqual([7.5, undefined, 100]);
  });

  it("prints a timestamped line only when something changed, then the result", () => {
    let out = "";
    const view = new PlainWatchView({ write: (t: string) => (out += t) });
    const running = { ...completedDvm, status: { phase: "RunRsyncOperations", itinerary: "VolumeMigration" } };
    const at = Date.parse("2026-01-02T03:04:05Z");
    const volume = { pvc: "shop/db", record: "r", state: "running", attempt: 1, percent: 40 };
    view.show(snapshotOf(running, [volume], at));
    view.show(snapshotOf(running, [volume], at + 1_000));
    view.show(snapshotOf(running, [{ ...volume, percent: 80, rate: "5MB/s" }], at + 2_000));
    const done = snapshotOf(completedDvm, [{ ...volume, state: "succeeded", percent: 100 }], at + 3_000);
    view.show(done);
    view.close(done);
    expect(out.split("\n").filter(Boolean)).toEqual([
      "2026-01-02T03:04:05Z  Step 15/18  RunRsyncOperations: Transferring data with rsync client pods on the source",
      "2026-01-02T03:04:05Z  shop/db  running  attempt 1  40%",
      "2026-01-02T03:04:07Z  shop/db  running  attempt 1  80%  5MB/s",
      "2026-01-02T03:04:08Z  Step 18/18  Completed: The migration is complete",
      "2026-01-02T03:04:08Z  shop/db  succeeded  attempt 1  100%",
      "2026-01-02T03:04:08Z  Completed: the migration succeeded",
    ]);
  });
});

describe("the terminal watch output", () => {
  it("draws a progress bar per volume under the current step, and the result after the bars", () => {
    let out = "";
    // Enough of a TTY stream for cli-progress: it moves the cursor with escape sequences written to it.
    const terminal = { isTTY: true, columns: 120, write: (text: string) => ((out += text), true) } as unknown as NodeJS.WriteStream;
    const view = new BarWatchView(terminal);
    const at = Date.parse("2026-01-02T03:04:05Z");
    const running = { ...completedDvm, status: { phase: "RunRsyncOperations", itinerary: "VolumeMigration" } };
    view.show(snapshotOf(running, [{ pvc: "shop/db", record: "r", state: "running", attempt: 1, percent: 50, rate: "9MB/s" }], at));
    const done = snapshotOf(completedDvm, [{ pvc: "shop/db", record: "r", state: "succeeded", attempt: 1, percent: 100 }], at + 1_000);
    view.show(done);
    view.close(done);
    const plain = out.replace(/\u001b\[[0-9;?]*[A-Za-z]/g, "");
    expect(plain).toContain("2026-01-02T03:04:05Z  Step 15/18  RunRsyncOperations: Transferring data");
    expect(plain).toMatch(/shop\/db +\u2588{40} 100% \| succeeded/);
    expect(plain.trimEnd().endsWith("2026-01-02T03:04:06Z  Completed: the migration succeeded")).toBe(true);
  });
});

describe("retryWhileBusy", () => {
  it("reads again while the API server answers 429 or 503, and gives any other answer at once", async () => {
    const { io } = fakeIo();
    const ctx = new CliContext({}, io);
    const answers = [new KubeApiError("busy", 429, "TooManyRequests"), new KubeApiError("unavailable", 503, undefined), "dvm"];
    expect(
      await retryWhileBusy(ctx, async () => {
        const next = answers.shift();
        if (next instanceof Error) throw next;
        return next;
      }),
    ).toBe("dvm");
    let reads = 0;
    const forbidden = new KubeApiError("forbidden", 403, "Forbidden");
    await expect(retryWhileBusy(ctx, async () => (reads++, Promise.reject(forbidden)))).rejects.toBe(forbidden);
    expect(reads).toBe(1);
    reads = 0;
    await expect(retryWhileBusy(ctx, async () => (reads++, Promise.reject(new KubeApiError("busy", 429, undefined))))).rejects.toMatchObject({
      statusCode: 429,
    });
    expect(reads).toBe(4);
  });
});

describe("explainError", () => {
  const where = { server: "https://10.0.0.1:6443", dynamoEndpoint: "http://localhost:8000", table: "dvm-ledger" };
  const named = (name: string, message: string) => Object.assign(new Error(message), { name });

  it("turns API server failures into one line naming the server and what to check", () => {
    const refused = new KubeApiError("host: discover migration.openshift.io/v1alpha1: connect ECONNREFUSED 10.0.0.1:6443", undefined, undefined);
    expect(explainError(refused, where).message).toBe(
      "cannot reach the Kubernetes API server at https://10.0.0.1:6443 (connect ECONNREFUSED 10.0.0.1:6443): check --kubeconfig/--context or KUBECONFIG",
    );
    expect(explainError(new KubeApiError("read x: Unauthorized", 401, "Unauthorized"), where).message).toMatch(/rejected the credentials \(401 Unauthorized\)/);
    expect(explainError(new KubeApiError("read x: forbidden: no", 403, "Forbidden"), where).message).toBe(
      "not allowed by the API server at https://10.0.0.1:6443: read x: forbidden: no",
    );
  });

  it("turns ledger failures into one line naming the table and the endpoint", () => {
    const missing = new LedgerError("ledger history u failed: ResourceNotFoundException: Cannot do operations on a non-existent table", {
      cause: named("ResourceNotFoundException", "Cannot do operations on a non-existent table"),
    });
    expect(explainError(missing, where).message).toBe(
      'ledger table "dvm-ledger" not found at http://localhost:8000: check --table (LEDGER_TABLE_NAME) and --dynamodb-endpoint',
    );
    const down = new LedgerUnavailableError("history u", 3, Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:8000"), { code: "ECONNREFUSED" }));
    expect(explainError(down, where).message).toBe(
      'cannot reach DynamoDB at http://localhost:8000 for table "dvm-ledger" (connect ECONNREFUSED 127.0.0.1:8000): check --dynamodb-endpoint (AWS_ENDPOINT_URL_DYNAMODB)',
    );
    const noCredentials = new LedgerError("x", { cause: named("CredentialsProviderError", "Could not load credentials from any providers") });
    expect(explainError(noCredentials, where).message).toMatch(/^DynamoDB at http:\/\/localhost:8000 did not accept the AWS credentials/);
    const noRegion = new LedgerError("x", { cause: new Error("Region is missing") });
    expect(explainError(noRegion, where).message).toMatch(/^no AWS region for DynamoDB: set AWS_REGION/);
  });

  it("keeps anything else to its first line", () => {
    expect(explainError(new Error("first\n    at somewhere (file.ts:1:2)"), {}).message).toBe("first");
  });
});

describe("renderTable", () => {
  it("pads columns and aligns numbers right", () => {
    expect(
      renderTable(
        ["A", "NUM", "C"],
        [
          ["x", "1", "long text"],
          ["yyy", "22", ""],
        ],
        ["left", "right"],
      ),
    ).toBe("A    NUM  C\nx      1  long text\nyyy   22");
  });
});
