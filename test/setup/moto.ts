/**
 * Global setup "moto": one moto_server for the deployed project's run, started here and stopped at
 * teardown. Without moto_server installed nothing is provided, and the suites say so (test/support/
 * requirements.ts: a failure in CI, a printed skip elsewhere).
 */
import type { TestProject } from "vitest/node";
import { MOTO_REGION, motoInstalled, startMoto } from "../support/moto";

declare module "vitest" {
  export interface ProvidedContext {
    moto: { endpoint: string; region: string } | undefined;
  }
}

export default async function setup({ provide }: TestProject): Promise<(() => Promise<void>) | void> {
  if (!motoInstalled()) {
    provide("moto", undefined);
    return;
  }
  const moto = await startMoto();
  provide("moto", { endpoint: moto.endpoint, region: MOTO_REGION });
  return () => moto.stop();
}
