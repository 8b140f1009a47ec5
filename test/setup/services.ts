/**
 * Which real services this test run starts. Default: all of them. DVM_TEST_SERVICES=dynamo (or
 * "clusters", "nodes", or "none") narrows it while working on one part. "nodes" is the deployed
 * project's node-mode clusters (the nodes project always starts its own).
 */
export type TestService = "dynamo" | "clusters" | "nodes";

export function wantsService(service: TestService): boolean {
  const wanted = process.env.DVM_TEST_SERVICES;
  if (!wanted) return true;
  return wanted
    .split(",")
    .map((s) => s.trim())
    .includes(service);
}
