#!/usr/bin/env node
// The `dvm` command. The project runs TypeScript through tsx: register its loader, then run the CLI.
import { register } from "tsx/esm/api";

register();
await import("../src/cli/main.ts");
