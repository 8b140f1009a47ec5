/**
 * Where the data path bench runs each side of a transfer: two network namespaces joined by a veth
 * pair (as two pods on two nodes are, without the pods), and one cgroup v2 per data path that every
 * process of that path (both ends) is started in, so the path's CPU time is the cgroup's, children
 * and short-lived processes included. Needs root, `ip`, `nsenter` and a writable cgroup v2 hierarchy.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync } from "node:fs";
import { join } from "node:path";
import type { LocalProcess } from "../test/support/datapath";

const CGROUP2_MOUNTS = ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"];

export interface Namespace {
  name: string;
  /** This end's address on the veth pair. */
  address: string;
}

export interface NamespacePair {
  source: Namespace;
  destination: Namespace;
  remove(): void;
}

const ip = (...args: string[]) => execFileSync("ip", args, { stdio: ["ignore", "ignore", "pipe"] });

/** Two network namespaces joined by a veth pair (MTU 1500, as a pod network's), loopback up in each. */
export function createNamespacePair(tag: string): NamespacePair {
  if (process.getuid?.() !== 0) throw new Error("the data path bench needs root (network namespaces, cgroups)");
  const source = { name: `dvmb-${tag}-src`, address: "10.213.0.1" };
  const destination = { name: `dvmb-${tag}-dst`, address: "10.213.0.2" };
  const remove = () => {
    for (const ns of [source, destination]) spawnSync("ip", ["netns", "delete", ns.name], { stdio: "ignore" });
  };
  try {
    const veth = [`dvmb${tag}s`.slice(0, 15), `dvmb${tag}d`.slice(0, 15)] as const;
    for (const ns of [source, destination]) ip("netns", "add", ns.name);
    ip("link", "add", veth[0], "type", "veth", "peer", "name", veth[1]);
    for (const [ns, dev] of [
      [source, veth[0]],
      [destination, veth[1]],
    ] as const) {
      ip("link", "set", dev, "netns", ns.name);
      ip("-n", ns.name, "addr", "add", `${ns.address}/24`, "dev", dev);
      ip("-n", ns.name, "link", "set", dev, "up");
      ip("-n", ns.name, "link", "set", "lo", "up");
    }
  } catch (error) {
    remove();
    throw error;
  }
  return { source, destination, remove };
}

export interface PathCgroup {
  readonly path: string;
  /** CPU seconds (user + system) of every process that ran in the cgroup so far. */
  cpuSeconds(): number;
  pids(): number[];
  remove(): void;
}

function cgroup2Root(): string {
  for (const mount of CGROUP2_MOUNTS) if (existsSync(join(mount, "cgroup.procs")) && existsSync(join(mount, "cpu.stat"))) return mount;
  throw new Error(`no cgroup v2 hierarchy with cpu.stat at ${CGROUP2_MOUNTS.join(" or ")}: the data path bench measures CPU per path from one`);
}

/** A parent cgroup for one bench run; `child(name)` makes one cgroup per data path under it. */
export function createCgroups(tag: string): { child(name: string): PathCgroup; remove(): void } {
  const parent = join(cgroup2Root(), `dvm-bench-datapath-${tag}`);
  mkdirSync(parent);
  const children: PathCgroup[] = [];
  return {
    child(name) {
      const path = join(parent, name);
      mkdirSync(path);
      const cgroup: PathCgroup = {
        path,
        cpuSeconds: () => Number(/^usage_usec (\d+)$/m.exec(readFileSync(join(path, "cpu.stat"), "utf8"))?.[1] ?? Number.NaN) / 1e6,
        pids: () => readFileSync(join(path, "cgroup.procs"), "utf8").split("\n").filter(Boolean).map(Number),
        remove: () => rmdirSync(path),
      };
      children.push(cgroup);
      return cgroup;
    },
    remove() {
      for (const child of children) if (existsSync(child.path)) rmdirSync(child.path);
      if (existsSync(parent) && readdirSync(parent).every((f) => !f.startsWith("dvm"))) rmdirSync(parent);
    },
  };
}

/**
 * The command that runs `argv` in the cgroup, then in the network namespace: the shell moves itself
 * into the cgroup before exec, so everything the command starts is counted. nsenter (not
 * `ip netns exec`, which remounts /sys and would hide the cgroup files) enters only the network.
 */
export function placedIn(ns: Namespace, cgroup: PathCgroup): (argv: string[]) => string[] {
  // sh -c SCRIPT $0 $1 ARGV...: after `shift`, "$@" is the command.
  return (argv) => [
    "sh",
    "-c",
    'echo $$ > "$0" && ns="$1" && shift && exec nsenter --net=/run/netns/"$ns" -- "$@"',
    join(cgroup.path, "cgroup.procs"),
    ns.name,
    ...argv,
  ];
}

/** Waits until something listens on host:port inside the namespace (probed with bash's /dev/tcp). */
export async function waitInNamespace(ns: Namespace, port: number, host: string, process?: LocalProcess, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const probe = spawnSync("nsenter", [`--net=/run/netns/${ns.name}`, "--", "bash", "-c", `exec 3<>/dev/tcp/${host}/${port}`], { stdio: "ignore" });
    if (probe.status === 0) return;
    if (process && !process.running()) throw new Error(`${process.name} exited before listening on ${host}:${port}:\n${process.output()}`);
    if (Date.now() > deadline)
      throw new Error(`nothing listens on ${host}:${port} in ${ns.name} after ${timeoutMs} ms${process ? `; ${process.name} said:\n${process.output()}` : ""}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Peak resident memory (VmHWM, KiB) of each of these processes now, by command name. */
export function peakMemoryKiB(pids: number[]): Array<{ pid: number; command: string; kib: number }> {
  const out: Array<{ pid: number; command: string; kib: number }> = [];
  for (const pid of pids) {
    try {
      const status = readFileSync(`/proc/${pid}/status`, "utf8");
      const kib = Number(/^VmHWM:\s+(\d+) kB$/m.exec(status)?.[1] ?? 0);
      const command = /^Name:\s+(\S+)$/m.exec(status)?.[1] ?? "?";
      out.push({ pid, command, kib });
    } catch {
      // gone between the listing and the read
    }
  }
  return out;
}
