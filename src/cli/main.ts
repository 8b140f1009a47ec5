#!/usr/bin/env node
/** Entry point of the `dvm` command (bin/dvm.mjs runs it through tsx; so does `npm run dvm --`). */
import { processIo } from "./io";
import { runCli } from "./program";

// The SDK's notice about future Node versions is for the project's maintainers, not for each command run.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true";
process.exitCode = await runCli(process.argv.slice(2), processIo());
