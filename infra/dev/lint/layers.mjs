/**
 * The layers of src/ and what each may import (docs/ARCHITECTURE.md, "Layers"): the one source of the
 * import rule. `node infra/dev/lint/layers.mjs` writes it into biome.json as one noRestrictedImports
 * override per layer, so a wrong-way import fails `npm run lint`; test/unit/ci/lintRules.test.ts checks
 * that biome.json matches this table and that the rule bites.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

/** Each folder of src/ with the folders it may import from (besides itself and npm packages), bottom first. */
export const LAYERS = {
  contracts: [],
  lib: [],
  config: ["lib", "contracts"],
  transfer: ["lib", "contracts"],
  dvm: ["lib", "contracts", "config", "transfer"],
  kube: ["lib", "contracts", "config", "dvm"],
  ledger: ["lib", "contracts", "config", "dvm"],
  phases: ["lib", "contracts", "config", "dvm", "transfer", "kube"],
  runner: ["lib", "contracts", "config", "dvm", "transfer", "kube", "ledger", "phases"],
  events: ["lib", "contracts", "config", "dvm", "kube", "ledger", "runner"],
  relay: ["lib", "contracts", "config", "dvm", "kube"],
  report: ["lib", "contracts", "dvm", "ledger"],
  aws: ["lib", "contracts", "config", "transfer", "dvm", "kube", "ledger", "phases", "runner", "events", "relay"],
  cli: ["lib", "contracts", "config", "transfer", "dvm", "kube", "ledger", "phases", "runner", "events", "relay", "report", "aws"],
};

/** Composition roots: the entry of a deployable wires the adapters its layer may not otherwise import. */
export const ENTRY_EXCEPTIONS = { "src/relay/main.ts": ["aws"] };

/** The AWS SDK stays in the adapters (infra/dev/local's stand-ins that emulate AWS are outside src/). */
const AWS_SDK_LAYERS = ["aws"];
const AWS_SDK_RULE = { group: ["@aws-sdk/**"], message: "the AWS SDK is used only in src/aws (docs/ARCHITECTURE.md, Layers)" };

/** What ships (src/, functions/) never imports what runs only on a developer's machine or in CI. */
const DEV_RULE = {
  group: ["**/infra/dev/**", "**/test/**", "**/bench/**"],
  message:
    "src/ and functions/ ship to Lambda, the relay image and the dvm CLI: they may not import infra/dev/, test/ or bench/ (docs/ARCHITECTURE.md, Layers)",
};

/** The rule for a file of `layer` that may import `allowed`: one option set, since a later override replaces an earlier one's. */
function forbidden(layer, allowed) {
  const names = Object.keys(LAYERS).filter((other) => other !== layer && !allowed.includes(other));
  const patterns = names.map((other) => ({
    group: [`../${other}`, `../${other}/**`, `../../${other}`, `../../${other}/**`],
    message: `src/${layer} may not import src/${other} (layers: docs/ARCHITECTURE.md, infra/dev/lint/layers.mjs)`,
  }));
  const shipped = [...patterns, DEV_RULE];
  return { level: "error", options: { patterns: AWS_SDK_LAYERS.includes(layer) ? shipped : [...shipped, AWS_SDK_RULE] } };
}

/** The overrides this table makes, in the order Biome applies them (a later one wins). */
export function layerOverrides() {
  const rule = (noRestrictedImports) => ({ linter: { rules: { style: { noRestrictedImports } } } });
  const overrides = [{ includes: ["functions/**"], ...rule({ level: "error", options: { patterns: [AWS_SDK_RULE, DEV_RULE] } }) }];
  for (const [layer, allowed] of Object.entries(LAYERS)) overrides.push({ includes: [`src/${layer}/**`], ...rule(forbidden(layer, allowed)) });
  for (const [file, extra] of Object.entries(ENTRY_EXCEPTIONS)) {
    const layer = file.split("/")[1];
    overrides.push({ includes: [file], ...rule(forbidden(layer, [...LAYERS[layer], ...extra])) });
  }
  return overrides;
}

/** biome.json with its layer overrides replaced by the table's (others kept, before them). */
export function withLayerRules(config) {
  const others = (config.overrides ?? []).filter((o) => !isLayerOverride(o));
  return { ...config, overrides: [...others, ...layerOverrides()] };
}

function isLayerOverride(override) {
  return JSON.stringify(override.linter?.rules?.style?.noRestrictedImports ?? null) !== "null";
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const path = fileURLToPath(new URL("../../../biome.json", import.meta.url));
  writeFileSync(path, `${JSON.stringify(withLayerRules(JSON.parse(readFileSync(path, "utf8"))), null, 2)}\n`);
  console.log(`biome.json: ${layerOverrides().length} layer overrides written`);
}
