/**
 * A stand-in `sleep` for the transfer pods' shell scripts: put first on the PATH, it records what it
 * was asked and returns at once, so a test reads how often a script polls without waiting for it.
 */
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export interface RecordingSleep {
  /** The folder to put first on the PATH. */
  bin: string;
  /** The distinct arguments it was called with, in order of first use. */
  asked(): string[];
}

/**
 * Writes the stand-in into `<dir>/bin-<name>`. `wholeSecondsOnly` makes it refuse fractions as such an
 * image's sleep does; `alsoRun` is a shell line it runs on every call (say, playing another container).
 */
export function recordingSleep(dir: string, name: string, options: { wholeSecondsOnly?: boolean; alsoRun?: string } = {}): RecordingSleep {
  const bin = join(dir, `bin-${name}`);
  const record = join(dir, `sleeps-${name}`);
  mkdirSync(bin);
  const refuseFractions = options.wholeSecondsOnly ? 'case "$1" in *.*) exit 1;; esac\n' : "";
  writeFileSync(join(bin, "sleep"), `#!/bin/sh\n${refuseFractions}echo "$1" >> ${record}\n${options.alsoRun ? `${options.alsoRun}\n` : ""}`);
  chmodSync(join(bin, "sleep"), 0o755);
  return { bin, asked: () => (existsSync(record) ? [...new Set(readFileSync(record, "utf8").trim().split("\n"))] : []) };
}
