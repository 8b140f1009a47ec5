/**
 * Stopping and starting again one component of a running node (its kubelet or its containerd), for the
 * fault tests: a node whose kubelet is down goes NotReady while its containers keep running; a containerd
 * restart leaves the containers to their shims and reconnects to them.
 *
 * The node's owner (node.ts) records, when it starts a component, how it started it (the nsenter command
 * line into the node's namespaces) in `<node dir>/components/<name>.json`, and the running process's pid
 * in `<name>.pid`. Any process of the machine can then stop it (SIGTERM to its process group, SIGKILL after
 * a while) and start it again from that record. A component started here is not this process's to stop:
 * it outlives it, is appended to the slot's pid file, and names the slot's state folder on its command
 * line, so the slot's teardown (infra/dev/nodes/teardown.sh) stops it like the first one.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { spawnLogged } from "../processes";

export type NodeComponent = "kubelet" | "containerd";

interface ComponentRecord {
  command: string;
  args: string[];
  logFile: string;
  /** The slot's pid file (read by its teardown). */
  slotPidFile: string;
}

const STOP_GRACE_MS = 10_000;
const recordFile = (nodeDir: string, name: NodeComponent) => join(nodeDir, "components", `${name}.json`);
const pidFile = (nodeDir: string, name: NodeComponent) => join(nodeDir, "components", `${name}.pid`);

/** Called by the node's owner once it started `name` (pid: the process, whose group is its own). */
export function recordComponent(nodeDir: string, name: NodeComponent, record: ComponentRecord, pid: number): void {
  mkdirSync(join(nodeDir, "components"), { recursive: true });
  writeFileSync(recordFile(nodeDir, name), JSON.stringify(record));
  writeFileSync(pidFile(nodeDir, name), `${pid}\n`);
}

function componentPid(nodeDir: string, name: NodeComponent): number {
  const file = pidFile(nodeDir, name);
  if (!existsSync(file)) throw new Error(`no ${name} was recorded for the node in ${nodeDir}`);
  return Number(readFileSync(file, "utf8").trim());
}

/** Alive and not a zombie (a zombie is gone, only not yet reaped by its parent). */
function alive(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}

export function nodeComponentRunning(nodeDir: string, name: NodeComponent): boolean {
  return alive(componentPid(nodeDir, name));
}

function signalGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    // ESRCH: already gone.
  }
}

/** Stops the node's `name` (SIGTERM to its process group, SIGKILL after 10 s); resolves once it is gone. */
export async function stopNodeComponent(nodeDir: string, name: NodeComponent): Promise<void> {
  const pid = componentPid(nodeDir, name);
  signalGroup(pid, "SIGTERM");
  const deadline = Date.now() + STOP_GRACE_MS;
  while (alive(pid) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
  if (alive(pid)) signalGroup(pid, "SIGKILL");
  while (alive(pid)) await new Promise((resolve) => setTimeout(resolve, 100));
}

/** Starts the node's `name` again, as the node's owner first started it; returns its pid. */
export function startNodeComponent(nodeDir: string, name: NodeComponent): number {
  if (nodeComponentRunning(nodeDir, name)) throw new Error(`the node's ${name} (pid ${componentPid(nodeDir, name)}) is still running`);
  const record = JSON.parse(readFileSync(recordFile(nodeDir, name), "utf8")) as ComponentRecord;
  const child = spawnLogged({
    name,
    command: record.command,
    args: record.args,
    logFile: record.logFile,
    pidFile: record.slotPidFile,
    outlivesParent: true,
  });
  writeFileSync(pidFile(nodeDir, name), `${child.pid}\n`);
  return child.pid;
}
