/**
 * The relay-pod test's helpers (infra/dev/local/relayPod.ts): its overlay renders the kind run's manifests with
 * only the image and the function name changed (one source of truth), and repeatedPhases reads the phase
 * function's log (what counts as a phase run twice, and what does not).
 */
import { spawnSync } from "node:child_process";
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { RELAY_OVERLAY, repeatedPhases, writeRelayOverlay } from "../../../infra/dev/local/relayPod";
import { otherEnvironment } from "../../support/requirements";

const ROOT = join(import.meta.dirname, "..", "..", "..");
const kubectl = spawnSync("kubectl", ["version", "--client"], { encoding: "utf8" }).status === 0;
const render = (dir: string): unknown[] => {
  const out = spawnSync("kubectl", ["kustomize", dir], { encoding: "utf8" });
  expect(out.status, out.stderr).toBe(0);
  return parseAllDocuments(out.stdout).map((d) => d.toJS() as unknown);
};

describe("the relay-pod overlay", () => {
  it("wraps the overlay e2e.sh applies on kind", () => {
    expect(RELAY_OVERLAY).toBe(join(ROOT, "infra", "dev", "kind", "host"));
    expect(readFileSync(join(ROOT, "infra", "dev", "kind", "e2e.sh"), "utf8")).toContain("src apply -k infra/dev/kind/host");
  });

  it.skipIf(otherEnvironment("kubectl on the PATH", kubectl, "kubectl kustomize renders the overlays"))(
    "renders the kind overlay's objects with only the image and the function name changed",
    () => {
      const dir = writeRelayOverlay("localhost/dvm-relay:0.1.0-0123456789ab", "dvm-serverless-offline-phase");
      try {
        const ours = JSON.stringify(render(dir));
        const kind = JSON.stringify(render(RELAY_OVERLAY))
          .replace('"image":"dvm-relay:e2e"', '"image":"localhost/dvm-relay:0.1.0-0123456789ab"')
          .replace('"RELAY_FUNCTION_NAME":"dvm-serverless-local-phase"', '"RELAY_FUNCTION_NAME":"dvm-serverless-offline-phase"');
        expect(ours).toBe(kind);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
    30_000,
  );
});

const line = (message: string, phase: string, uid = "u1") =>
  `offline: ${JSON.stringify({ level: "INFO", message, timestamp: "2026-12-03T11:36:52.541Z", dvm: "ns/dvm", uid, phase, generation: 1 })}`;

describe("repeatedPhases", () => {
  it("counts nothing for one start and one completion per phase, and ignores lines that are not JSON", () => {
    const log = ["Offline [http for lambda] listening", line("phase started", "Started"), line("phase completed", "Started"), "{not json"].join("\n");
    expect(repeatedPhases(log)).toEqual([]);
  });

  it("a waiting phase started once per poll is no repeat; a second completion is", () => {
    const polls = [line("phase started", "RunRsyncOperations"), line("phase started", "RunRsyncOperations"), line("phase completed", "RunRsyncOperations")];
    expect(repeatedPhases(polls.join("\n"))).toEqual([]);
    expect(repeatedPhases([...polls, line("phase completed", "RunRsyncOperations")].join("\n"))).toEqual(["u1/RunRsyncOperations"]);
  });

  it("a phase that does not wait, started twice, is a repeat even if it completed once; other DVMs are left out when a uid is given", () => {
    const log = [
      line("phase started", "CreateRsyncConfig"),
      line("phase started", "CreateRsyncConfig"),
      line("phase completed", "CreateRsyncConfig"),
      line("phase started", "Started", "u2"),
      line("phase started", "Started", "u2"),
    ].join("\n");
    expect(repeatedPhases(log)).toEqual(["u1/CreateRsyncConfig", "u2/Started"]);
    expect(repeatedPhases(log, "u2")).toEqual(["u2/Started"]);
  });
});
