/**
 * Global setup of the `deployed` project's node-mode clusters: the whole migration of
 * test/deployed/migration.test.ts runs on real pods. The same clusters as the `nodes` project's in one
 * run (test/setup/nodes.ts shares them per process). Where node mode cannot run, no clusters are
 * provided and the suite says so (test/support/requirements.ts: a failure in CI, a printed skip
 * elsewhere), so the rest of the project still runs on a machine without root. DVM_TEST_SERVICES without
 * "nodes" (e.g. "none") leaves them out the same way: for running test/deployed/stack.test.ts alone.
 */
import type { TestProject } from "vitest/node";
import { nodeModeUnsupported, provideNodeClusters } from "./nodes";
import { wantsService } from "./services";

export default async function setup(project: TestProject): Promise<(() => Promise<void>) | void> {
  const unsupported = wantsService("nodes") ? nodeModeUnsupported() : "not in DVM_TEST_SERVICES";
  if (unsupported) {
    console.warn(`[deployed] no node-mode clusters: ${unsupported}`);
    project.provide("clusters", null);
    return;
  }
  return provideNodeClusters(project);
}
