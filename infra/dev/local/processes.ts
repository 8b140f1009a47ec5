/**
 * Child processes of the local control plane (etcd, kube-apiserver, kwok), kept on a short leash.
 *
 * - Each child runs in its own process group (detached), so stopping it also stops anything it forked,
 *   and a Ctrl-C aimed at the test runner does not half-kill it behind our back.
 * - Output goes to a log file, never to the parent's stdout/stderr (test output stays readable).
 * - Every live child and temp dir is in a registry that an exit/signal handler cleans up synchronously,
 *   so a test process that throws or is interrupted leaves nothing behind. When the program handles the
 *   signal itself (an orderly stop), only the exit handler does, once that stop is done.
 * - A process-death watchdog (a tiny shell loop, see startReaper) covers the one case no handler can:
 *   the parent being SIGKILLed.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { appendFileSync, closeSync, openSync, readFileSync, rmSync } from "node:fs";
import { childEnvironment } from "./config";

export interface ProcessSpec {
  name: string;
  command: string;
  args: string[];
  logFile: string;
  env?: NodeJS.ProcessEnv;
  /** File the pid is appended to, read by the reaper if this process dies without cleaning up. */
  pidFile?: string;
  /**
   * A watchdog meant to outlive this process (it cleans up after it): not killed by the exit handler.
   * Stop it with stopProcess on a normal shutdown.
   */
  outlivesParent?: boolean;
}

export interface ManagedProcess {
  readonly name: string;
  readonly pid: number;
  readonly logFile: string;
  /** Resolves when the process has exited (and has been reaped). */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  isRunning(): boolean;
  /** Lets the process keep the parent's event loop alive again (while we wait for it to stop). */
  ref(): void;
}

const liveGroups = new Set<number>();
const tempDirs = new Set<string>();
let handlersInstalled = false;

export function spawnLogged(spec: ProcessSpec): ManagedProcess {
  installExitHandlers();
  const fd = openSync(spec.logFile, "a");
  let child: ChildProcess;
  try {
    child = spawn(spec.command, spec.args, {
      detached: true,
      stdio: ["ignore", fd, fd],
      env: spec.env ?? childEnvironment(),
    });
  } finally {
    closeSync(fd); // the child has its own copy
  }
  const pid = child.pid;
  if (pid === undefined) throw new Error(`${spec.name}: could not start ${spec.command} (see ${spec.logFile})`);
  if (!spec.outlivesParent) liveGroups.add(pid);
  if (spec.pidFile) appendFileSync(spec.pidFile, `${pid}\n`);
  let running = true;
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once("exit", (code, signal) => {
      running = false;
      liveGroups.delete(pid);
      resolve({ code, signal });
    });
    child.once("error", () => {
      running = false;
      liveGroups.delete(pid);
      resolve({ code: null, signal: null });
    });
  });
  // Do not keep the parent alive just because a service runs; the exit handler stops it.
  child.unref();
  return { name: spec.name, pid, logFile: spec.logFile, exited, isRunning: () => running, ref: () => child.ref() };
}

/** SIGTERM the process group, then SIGKILL it if it has not exited after `timeoutMs`. */
export async function stopProcess(p: ManagedProcess, timeoutMs = 5_000): Promise<void> {
  if (!p.isRunning()) return;
  p.ref(); // an unref'd child would let the parent exit before we see it go
  signalGroup(p.pid, "SIGTERM");
  let timer: NodeJS.Timeout | undefined;
  const timedOut = await Promise.race([p.exited.then(() => false), new Promise<boolean>((r) => (timer = setTimeout(() => r(true), timeoutMs)))]);
  clearTimeout(timer);
  if (timedOut) signalGroup(p.pid, "SIGKILL");
  await p.exited;
  // The leader is gone; make sure nothing it forked outlives it.
  signalGroup(p.pid, "SIGKILL");
}

function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    // ESRCH: already gone.
  }
}

/** Removes `dir` (recursively) when this process exits, unless forgotten first. */
export function removeOnExit(dir: string): void {
  installExitHandlers();
  tempDirs.add(dir);
}

export function removeNow(dir: string): void {
  tempDirs.delete(dir);
  rmSync(dir, { recursive: true, force: true });
}

/**
 * Starts a watchdog that outlives a SIGKILLed parent: once `parentPid` is gone it SIGTERMs then
 * SIGKILLs every process group listed in `pidFile` and removes `dirs`. Stop it (stopProcess) on a
 * normal shutdown.
 */
export function startReaper(name: string, pidFile: string, dirs: string[], logFile: string): ManagedProcess {
  // POSIX sh (dash: no "kill --"). Only plain numbers > 1 are signalled: "kill -TERM -1" would hit
  // every process we may signal.
  const script = [
    'parent="$1"; pidfile="$2"; shift 2',
    'groups() { for p in $(cat "$pidfile" 2>/dev/null); do case $p in \'\'|*[!0-9]*) ;; *) [ "$p" -gt 1 ] && echo "$p";; esac; done; }',
    'while kill -0 "$parent" 2>/dev/null; do sleep 1; done',
    'for p in $(groups); do kill -TERM -"$p" 2>/dev/null; done',
    "sleep 3",
    'for p in $(groups); do kill -KILL -"$p" 2>/dev/null; done',
    'for d in "$@"; do rm -rf "$d"; done',
  ].join("\n");
  return spawnLogged({
    name: `${name}-reaper`,
    command: "sh",
    args: ["-c", script, "reaper", String(process.pid), pidFile, ...dirs],
    logFile,
  });
}

/** Last `lines` lines of a log file, for error messages. */
export function tailFile(file: string, lines = 30): string {
  try {
    return readFileSync(file, "utf8").trimEnd().split("\n").slice(-lines).join("\n");
  } catch {
    return "(no log)";
  }
}

function cleanupSync(): void {
  for (const pgid of liveGroups) signalGroup(pgid, "SIGKILL");
  liveGroups.clear();
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
  tempDirs.clear();
}

function installExitHandlers(): void {
  if (handlersInstalled) return;
  handlersInstalled = true;
  process.on("exit", cleanupSync);
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
    const onSignal = (): void => {
      // Someone else handles this signal (npm start, npm run clusters): it stops the services in order
      // (the relay releases its Lease while the API server still answers) and exits, and the exit
      // handler kills whatever is left then. Killing everything here would pull the API server from
      // under that orderly stop.
      if (process.listenerCount(signal) > 1) return;
      cleanupSync();
      // Nobody else handles this signal: behave as if we never had, and die by it.
      process.off(signal, onSignal);
      process.kill(process.pid, signal);
    };
    process.on(signal, onSignal);
  }
}
