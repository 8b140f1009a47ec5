/**
 * `npm run crd`: writes infra/deploy/crds/directvolumemigrations.yaml from the zod schemas (see dvmCrd.ts).
 * `npm run crd -- --check` writes nothing and exits 1 when the committed file differs.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { DVM_CRD_PATH, dvmCrdYaml } from "./dvmCrd";

const generated = dvmCrdYaml();
if (process.argv.includes("--check")) {
  const same = readFileSync(DVM_CRD_PATH, "utf8") === generated;
  console.log(same ? `${DVM_CRD_PATH} is up to date` : `${DVM_CRD_PATH} differs from the zod schemas: run npm run crd`);
  process.exitCode = same ? 0 : 1;
} else {
  writeFileSync(DVM_CRD_PATH, generated);
  console.log(`wrote ${DVM_CRD_PATH}`);
}
