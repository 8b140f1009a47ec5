/**
 * How the phase function is bundled: the one definition that serverless-esbuild (custom.esbuild.config
 * in serverless.yml) and bench/bundle.ts both use.
 *
 * - CommonJS: @kubernetes/client-node 1.x is ESM-only but esbuild converts it; a CJS bundle needs no
 *   createRequire banner. The file is .cjs because the repository is "type": "module" and
 *   serverless-offline runs the bundle from inside it; Lambda's runtime finds .cjs handlers too.
 * - Everything is bundled, the AWS SDK included: the versions pinned in package-lock.json run on
 *   Lambda, not whatever SDK the runtime happens to ship.
 * - target node24: Lambda runs nodejs24.x, and so do the tests (node_modules/.bin/node).
 * - Two trims, each of code that is loaded but can never run in the function (size and cold start):
 *   whatwg-url and zod's translated error messages. (Marking client-node's modules side-effect free
 *   saves another ~100 kB but makes every build 5-10 times slower: an onResolve hook on every import.)
 */
"use strict";

const path = require("node:path");

/**
 * zod 4 imports the error messages of ~50 languages (about 250 kB minified); only English is used
 * (zod's default). The locales index becomes English only.
 */
const zodEnglishOnly = {
  name: "zod-english-only",
  setup(build) {
    build.onLoad({ filter: /[\\/]zod[\\/]v4[\\/]locales[\\/]index\.js$/ }, (args) => ({
      contents: 'export { default as en } from "./en.js";',
      resolveDir: path.dirname(args.path),
      loader: "js",
    }));
  },
};

/** Plain esbuild options (bench/bundle.ts passes these to esbuild.build). */
const esbuildOptions = {
  bundle: true,
  minify: true,
  sourcemap: false,
  platform: "node",
  target: "node24",
  format: "cjs",
  // Prefer packages' ESM builds: they tree-shake, their CommonJS builds do not.
  mainFields: ["module", "main"],
  // The bundled packages carry no licence comments worth a file (Powertools marks only v8 hints).
  legalComments: "none",
  // node-fetch 2 (under client-node) only falls back to whatwg-url when Node has no URL class; the
  // real package would add ~280 kB of Unicode tables (tr46).
  alias: { "whatwg-url": path.join(__dirname, "whatwg-url.cjs") },
  plugins: [zodEnglishOnly],
  outExtension: { ".js": ".cjs" },
};

/** serverless-esbuild's own options on top of esbuild's. */
const pluginOptions = {
  // Nothing is external, so nothing is installed into the package with npm (works offline).
  exclude: [],
  external: [],
  outputFileExtension: ".cjs",
  packager: "npm",
};

/**
 * serverless-esbuild builds into a work folder under the service directory and deletes it after
 * packaging. Runs side by side (`osls package` while serverless-offline serves) would overwrite or
 * delete each other's build, so each names its own subfolder of .esbuild (git-ignored), relative to
 * the service directory: infra/dev/local/serverlessOffline.ts sets one per instance.
 */
const WORK_FOLDER_ENV = "DVM_ESBUILD_WORK_FOLDER";

// serverless-esbuild calls this with the Serverless instance. It derives outExtension from
// outputFileExtension itself.
function serverlessEsbuildConfig() {
  const { outExtension: _derived, ...options } = esbuildOptions;
  return { ...options, ...pluginOptions, outputWorkFolder: process.env[WORK_FOLDER_ENV] || path.join(".esbuild", "package") };
}

module.exports = serverlessEsbuildConfig;
module.exports.esbuildOptions = esbuildOptions;
module.exports.WORK_FOLDER_ENV = WORK_FOLDER_ENV;
