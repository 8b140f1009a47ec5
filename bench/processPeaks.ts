/**
 * The peak memory of the rsync processes of a transfer: every 100 ms, each live process named rsync on
 * this machine (pods of node mode included: their processes are this machine's) with its parent, its
 * command line, its cgroup and the kernel's high-water mark of its resident memory (VmHWM, which only
 * grows, so the last sample before the process ends is within 100 ms of its peak). The caller picks its
 * own processes afterwards: by a pod's uid or its containers' ids in the cgroup path, or by descent from a process it started.
 */
import { readdirSync, readFileSync } from "node:fs";

export interface SampledProcess {
  pid: number;
  ppid: number;
  cmdline: string;
  cgroup: string;
  peakKiB: number;
}

export interface ProcessSampler {
  /** Stops sampling; every process seen, with the highest VmHWM read. */
  stop(): SampledProcess[];
}

const read = (path: string): string | undefined => {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return undefined; // the process ended between the listing and the read
  }
};

export function sampleProcesses(name: string, intervalMs = 100): ProcessSampler {
  const seen = new Map<number, SampledProcess>();
  const sample = () => {
    for (const entry of readdirSync("/proc")) {
      if (!/^\d+$/.test(entry)) continue;
      if (read(`/proc/${entry}/comm`)?.trim() !== name) continue;
      const status = read(`/proc/${entry}/status`);
      const hwm = status && /^VmHWM:\s+(\d+) kB/m.exec(status);
      if (!hwm) continue;
      const pid = Number(entry);
      const known = seen.get(pid);
      if (known) known.peakKiB = Math.max(known.peakKiB, Number(hwm[1]));
      else
        seen.set(pid, {
          pid,
          ppid: Number(/^PPid:\s+(\d+)/m.exec(status)?.[1] ?? 0),
          cmdline: (read(`/proc/${entry}/cmdline`) ?? "").split("\0").join(" ").trim(),
          cgroup: read(`/proc/${entry}/cgroup`) ?? "",
          peakKiB: Number(hwm[1]),
        });
    }
  };
  sample();
  const timer = setInterval(sample, intervalMs);
  return {
    stop() {
      clearInterval(timer);
      sample();
      return [...seen.values()];
    },
  };
}

/** The processes whose cgroup path contains one of `marks` (a pod's uid, with - or _, or a container's id). */
export function inCgroupOf(processes: readonly SampledProcess[], marks: readonly string[]): SampledProcess[] {
  const forms = marks.filter(Boolean).flatMap((mark) => [mark, mark.replaceAll("-", "_")]);
  return processes.filter((p) => forms.some((form) => p.cgroup.includes(form)));
}

/** `roots` and every sampled process descended from one of them. */
export function descendedFrom(processes: readonly SampledProcess[], roots: readonly number[]): SampledProcess[] {
  const byPid = new Map(processes.map((p) => [p.pid, p]));
  const isDescendant = (p: SampledProcess): boolean => {
    for (let current: SampledProcess | undefined = p, hops = 0; current && hops < 64; current = byPid.get(current.ppid), hops++)
      if (roots.includes(current.pid)) return true;
    return false;
  };
  return processes.filter(isDescendant);
}

/** "N processes, X MiB together (largest Y MiB)". */
export function describePeaks(processes: readonly SampledProcess[]): string {
  if (processes.length === 0) return "no process seen";
  const mib = (kib: number) => (kib / 1024).toFixed(1);
  const total = processes.reduce((sum, p) => sum + p.peakKiB, 0);
  const largest = Math.max(...processes.map((p) => p.peakKiB));
  return `${processes.length} process${processes.length === 1 ? "" : "es"}, ${mib(total)} MiB together (largest ${mib(largest)} MiB)`;
}
