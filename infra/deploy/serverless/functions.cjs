/**
 * The Serverless `functions` block, generated from the itinerary table (src/dvm/itinerary.ts), so the
 * function list never drifts from the phase list. serverless.yml includes it:
 *
 *   functions: ${file(./infra/deploy/serverless/functions.cjs):functions}
 *
 * osls 4 `require()`s .js/.cjs files for the `file` source and calls an exported function with
 * `{ resolveConfigurationProperty, resolveVariable }`. The package is "type": "module", so this file is
 * .cjs; the TypeScript modules (the itinerary and the layout rule, src/aws/functionLayout.ts) are loaded
 * with tsx's CommonJS API, which osls itself depends on. Nothing is generated into the repository, so
 * nothing can go stale.
 */
"use strict";

const path = require("node:path");
const { require: tsxRequire } = require("tsx/cjs/api");

/** Lambda's limit; Serverless names a function `${service}-${stage}-${key}`. */
const MAX_FUNCTION_NAME = 64;

const load = (file) => tsxRequire(path.join(__dirname, "../../../src", file), __filename);
const { EXECUTABLE_PHASES, PHASES } = load("dvm/itinerary.ts");
const { DEFAULT_FUNCTION_LAYOUT, FUNCTION_LAYOUTS, isFunctionLayout, phaseFunctionKey, phaseFunctionKeys } = load("aws/functionLayout.ts");

/** CloudFormation logical id Serverless gives a function key (osls lib/plugins/aws/lib/naming.js). */
function lambdaLogicalId(key) {
  const normalized = key.replace(/-/g, "Dash").replace(/_/g, "Underscore");
  return `${normalized.charAt(0).toUpperCase()}${normalized.slice(1)}LambdaFunction`;
}

function checkLayout(layout) {
  if (!isFunctionLayout(layout)) {
    throw new Error(`custom.functionLayout must be one of ${FUNCTION_LAYOUTS.join(", ")} (got ${JSON.stringify(layout)})`);
  }
  return layout;
}

/**
 * The functions block for `layout`. `common` holds what every phase function shares (handler, timeout,
 * async retries, on-failure destination), written once in serverless.yml (custom.phaseFunction).
 * `names` (service and stage), when given, checks that the Lambda names fit.
 */
function phaseFunctions(layout, common, names) {
  checkLayout(layout);
  const entries =
    layout === "shared"
      ? [[phaseFunctionKeys(layout)[0], { ...common, description: "Runs one phase of a DirectVolumeMigration (any phase)" }]]
      : EXECUTABLE_PHASES.map((phase) => [phaseFunctionKey(layout, phase), { ...common, description: `${phase}: ${PHASES[phase].description}`.slice(0, 256) }]);
  for (const [key] of names ? entries : []) {
    const name = `${names.service}-${names.stage}-${key}`;
    if (name.length > MAX_FUNCTION_NAME) {
      throw new Error(`Lambda function name ${name} is longer than ${MAX_FUNCTION_NAME} characters: use a shorter stage name`);
    }
  }
  // `common` (and its destinations object) is shared by reference on purpose: Serverless adds the
  // destination's IAM statement once per distinct destination object, not once per function.
  return Object.fromEntries(entries);
}

async function resolveLayout(resolveConfigurationProperty) {
  return checkLayout((await resolveConfigurationProperty(["custom", "functionLayout"])) ?? DEFAULT_FUNCTION_LAYOUT);
}

module.exports = {
  lambdaLogicalId,
  phaseFunctions,

  /** `${file(./infra/deploy/serverless/functions.cjs):functions}` */
  async functions({ resolveConfigurationProperty, resolveVariable }) {
    const layout = await resolveLayout(resolveConfigurationProperty);
    const common = await resolveConfigurationProperty(["custom", "phaseFunction"]);
    if (!common || typeof common !== "object") throw new Error("custom.phaseFunction (the settings every phase function shares) is missing");
    const names = { service: await resolveConfigurationProperty(["service"]), stage: await resolveVariable("sls:stage") };
    return phaseFunctions(layout, common, names);
  },

  /** `${file(./infra/deploy/serverless/functions.cjs):functionArns}`: the ARN of every phase function, for IAM. */
  async functionArns({ resolveConfigurationProperty }) {
    const layout = await resolveLayout(resolveConfigurationProperty);
    return phaseFunctionKeys(layout).map((key) => ({ "Fn::GetAtt": [lambdaLogicalId(key), "Arn"] }));
  },
};
