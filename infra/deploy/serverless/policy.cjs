/**
 * The migration policy's built-in defaults that serverless.yml passes on as parameter defaults, read from
 * the TypeScript source (src/dvm/transferPolicy.ts) so they cannot drift:
 *
 *   extraOptions: ${file(./infra/deploy/serverless/policy.cjs):defaultExtraOptions}
 *
 * Needed where blank is not "unset": DVM_RSYNC_EXTRA_OPTIONS set but empty allows no extra option at all.
 */
"use strict";

const path = require("node:path");
const { require: tsxRequire } = require("tsx/cjs/api");

const { DEFAULT_TRANSFER_POLICY } = tsxRequire(path.join(__dirname, "../../../src/dvm/transferPolicy.ts"), __filename);

module.exports.defaultExtraOptions = () => DEFAULT_TRANSFER_POLICY.extraOptions.join(",");
