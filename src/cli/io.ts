/** What a command touches outside itself, passed in so commands can be unit-tested without a terminal. */
import { cliEnvironment } from "./config";

export interface CliOutput {
  write(text: string): unknown;
  isTTY?: boolean;
  columns?: number;
}

export interface CliIo {
  stdout: CliOutput;
  stderr: CliOutput;
  env: Record<string, string | undefined>;
  /** ms since the epoch. */
  now: () => number;
  sleep: (ms: number) => Promise<void>;
  /** Where files such as --svg are written, and -f read, relative to. */
  cwd: string;
}

export function processIo(): CliIo {
  return {
    stdout: process.stdout,
    stderr: process.stderr,
    env: cliEnvironment(),
    now: Date.now,
    sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
    cwd: process.cwd(),
  };
}

export function println(out: CliOutput, text = ""): void {
  out.write(`${text}\n`);
}
