/**
 * Which real services this test run starts. Default: all of them. DVM_TEST_SERVICES=dynamo (or
 * "clusters", or "none") narrows it while working on one part.
 */
export type TestService = "dynamo" | "clusters";

export function wantsService(service: TestService): boolean {
  const wanted = process.env.DVM_TEST_SERVICES;
  if (!wanted) return true;
  return wanted
    .split(",")
    .map((s) => s.trim())
    .includes(service);
}
