/**
 * What node mode needs from this machine, and a small helper to run the host tools it drives (ip,
 * nsenter, ctr, runc). Node mode runs real containers: it needs root, runc, containerd, the CNI plugins,
 * iptables and the node binaries. When something is missing, `nodeModeSupport` says what in one line, and
 * callers fall back to kwok mode (or fail, where node mode was required).
 */
import { execFile } from "node:child_process";
import { accessSync, constants, existsSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { localTools } from "../config";

const execFileAsync = promisify(execFile);

export const CNI_BIN_DIR = "/usr/lib/cni";
export const NODE_BINARIES = ["kubelet", "kube-proxy", "kube-controller-manager", "kube-scheduler"] as const;
const HOST_TOOLS = ["ip", "nsenter", "unshare", "containerd", "containerd-shim-runc-v2", "ctr", "runc", "iptables", "mount", "losetup"] as const;
const CNI_PLUGINS = ["bridge", "host-local", "loopback", "portmap"] as const;

/** Runs a host tool; rejects with its stderr (not just "exit 1") when it fails. */
export async function host(command: string, args: readonly string[], options: { timeoutMs?: number; input?: string } = {}): Promise<string> {
  try {
    const { stdout } = await execFileAsync(command, [...args], { timeout: options.timeoutMs ?? 60_000, maxBuffer: 16 * 1024 * 1024 });
    return stdout;
  } catch (error) {
    const e = error as { stderr?: string; message?: string };
    throw new Error(`${command} ${args.join(" ")}: ${(e.stderr || e.message || String(error)).trim()}`);
  }
}

/** Like `host`, but a failure is not an error (teardown of things that may already be gone). */
export async function hostQuiet(command: string, args: readonly string[]): Promise<boolean> {
  return host(command, args).then(
    () => true,
    () => false,
  );
}

function onPath(tool: string): boolean {
  const dirs = localTools().path.concat(["/usr/sbin", "/sbin"]);
  return dirs.some((dir) => {
    try {
      accessSync(join(dir, tool), constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

export type NodeModeSupport = { ok: true } | { ok: false; reason: string };

/** Whether this machine can run node mode, and if not, the one thing to do about it. */
export function nodeModeSupport(binDir: string): NodeModeSupport {
  if (process.platform !== "linux") return { ok: false, reason: "node mode needs Linux (network namespaces, runc)" };
  if (typeof process.getuid === "function" && process.getuid() !== 0) {
    return { ok: false, reason: "node mode needs root (it creates network namespaces and runs containers); run as root, or use kwok mode" };
  }
  const tools = HOST_TOOLS.filter((tool) => !onPath(tool));
  const plugins = CNI_PLUGINS.filter((plugin) => !existsSync(join(CNI_BIN_DIR, plugin)));
  if (tools.length > 0 || plugins.length > 0) {
    return {
      ok: false,
      reason: `node mode needs ${[...tools, ...plugins.map((p) => `CNI plugin ${p}`)].join(", ")}: apt-get install -y containerd runc containernetworking-plugins iptables iproute2 util-linux`,
    };
  }
  const binaries = NODE_BINARIES.filter((binary) => !existsSync(join(binDir, binary)));
  if (binaries.length > 0) return { ok: false, reason: `node mode needs ${binaries.join(", ")} in ${binDir}: bash infra/dev/controlplane/build.sh` };
  return { ok: true };
}
