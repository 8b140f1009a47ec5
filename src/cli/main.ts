#!/usr/bin/env node
/**
 * Entry point of the `dvm` command: bundled into dist/dvm.mjs (the package's bin, infra/dev/cli/build.mjs),
 * run through tsx by `npm run dvm --` in this repository.
 */
import { processIo } from "./io";
import { runCli } from "./program";

// A reader that goes away (`dvm list | head`) ends the output, not the program with a stack trace.
process.stdout.on("error", (error: NodeJS.ErrnoException) => {
  if (error.code === "EPIPE") process.exit(process.exitCode ?? 0);
  throw error;
});
process.exitCode = await runCli(process.argv.slice(2), processIo());
