/**
 * An HTTP CONNECT proxy between the node-mode clusters, for clusters that reach each other only through
 * one (the operator's DVM_STUNNEL_TCP_PROXY): Debian's tinyproxy in a network namespace of its own,
 * `dvm<slot>-proxy`, joined to the slot's fabric bridge by a veth at .200 of the fabric /24, with routes
 * to every node's pods (pod addresses are kept end to end, so the proxy answers them through their node).
 * `rejectDirect` closes the direct way from one cluster's pods to another's node and pods, so the proxy is
 * the only way through. Used by test/nodes/proxy.test.ts; the data-phase benchmark can use it the same way.
 *
 * Nothing outlives a crashed owner: the namespace is added to the slot's plan.env (NETNS) before it is
 * made, so infra/dev/nodes/teardown.sh deletes it (its veth goes with it); tinyproxy's configuration is in
 * the slot's state folder, so the teardown's sweep of processes that name that folder stops it; the
 * iptables rule lives in the node's namespace and goes with it.
 */
import { appendFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type ManagedProcess, spawnLogged, stopProcess, tailFile } from "../processes";
import { GiveUp, waitFor } from "../wait";
import { host, hostQuiet } from "./host";
import type { NodeAddresses, SlotPlan } from "./plan";

export interface ProxyNamespace {
  netns: string;
  /** The root-namespace end of the veth (on the slot's bridge); the other end is "eth0" inside. */
  hostVeth: string;
  /** The proxy's address on the fabric. */
  address: string;
}

/** The proxy's names and address in `plan`: `dvm<slot>-proxy`, veth `dvm<slot>vp`, fabric .200. */
export function proxyAddresses(plan: SlotPlan): ProxyNamespace {
  const fabric = plan.bridgeIp.split(".").slice(0, 3).join(".");
  return { netns: `dvm${plan.slot}-proxy`, hostVeth: `dvm${plan.slot}vp`, address: `${fabric}.200` };
}

/**
 * Creates the proxy's namespace on the slot's fabric. `stateDir` is the slot's state folder: its
 * plan.env learns the namespace first, so a teardown after a crash removes it.
 */
export async function createProxyNamespace(plan: SlotPlan, stateDir: string): Promise<ProxyNamespace> {
  const ns = proxyAddresses(plan);
  const planEnv = join(stateDir, "plan.env");
  if (!readFileSync(planEnv, "utf8").includes(ns.netns)) appendFileSync(planEnv, `NETNS="$NETNS ${ns.netns}"\n`);
  // One left by an owner that died between this and the teardown: start clean.
  await deleteProxyNamespace(ns);
  await host("ip", ["netns", "add", ns.netns]);
  await host("ip", ["link", "add", ns.hostVeth, "type", "veth", "peer", "name", "eth0", "netns", ns.netns]);
  await host("ip", ["link", "set", ns.hostVeth, "master", plan.bridge, "up"]);
  const inside = (...args: string[]) => host("ip", ["-n", ns.netns, ...args]);
  await inside("addr", "add", `${ns.address}/24`, "dev", "eth0");
  await inside("link", "set", "eth0", "up");
  await inside("link", "set", "lo", "up");
  // The pods' own addresses arrive (no NAT): answer them through their node. No default route.
  for (const node of plan.nodes) await inside("route", "add", node.podCidr, "via", node.nodeIp, "dev", "eth0");
  return ns;
}

/** Deletes the namespace (its veth and everything in it go too); a namespace already gone is fine. */
export async function deleteProxyNamespace(ns: ProxyNamespace): Promise<void> {
  await hostQuiet("ip", ["netns", "delete", ns.netns]);
  await hostQuiet("ip", ["link", "delete", ns.hostVeth]);
}

export interface TinyproxyOptions {
  /** Where its configuration and log go: a folder inside the slot's state folder. */
  dir: string;
  /** Default 3128. */
  port?: number;
  /** Source addresses or CIDRs it serves (tinyproxy `Allow`); everyone else is refused. */
  allow: readonly string[];
  /** The only ports it CONNECTs to (tinyproxy `ConnectPort`). */
  connectPorts: readonly number[];
  /** Basic authentication (tinyproxy `BasicAuth`: letters, digits, '_' and '-' only). */
  basicAuth?: { user: string; password: string };
  /** The slot's pid file, read by the teardown of a crashed run. */
  pidFile?: string;
}

export interface Tinyproxy {
  host: string;
  port: number;
  /** tinyproxy's own log (every connection and request line at LogLevel Connect). */
  logFile: string;
  process: ManagedProcess;
  log(): string;
  stop(): Promise<void>;
}

const TINYPROXY_WORD = /^[A-Za-z0-9_-]+$/;

/** tinyproxy.conf(5) for `options`, listening on `address`. */
export function tinyproxyConfig(address: string, logFile: string, options: TinyproxyOptions): string {
  if (options.allow.length === 0) throw new Error("tinyproxy: allow at least one source");
  if (options.connectPorts.length === 0) throw new Error("tinyproxy: name the ports it may CONNECT to");
  if (options.basicAuth && !(TINYPROXY_WORD.test(options.basicAuth.user) && TINYPROXY_WORD.test(options.basicAuth.password)))
    throw new Error("tinyproxy: BasicAuth takes letters, digits, '_' and '-' only");
  return [
    "# Generated by infra/dev/local/nodes/proxy.ts.",
    "User nobody",
    "Group nogroup",
    `Port ${options.port ?? 3128}`,
    `Listen ${address}`,
    "Timeout 600",
    `LogFile "${logFile}"`,
    // Connect: each connection and its request line ("CONNECT host:port HTTP/1.1"), nothing more.
    "LogLevel Connect",
    "MaxClients 64",
    "DisableViaHeader Yes",
    ...options.allow.map((source) => `Allow ${source}`),
    ...options.connectPorts.map((port) => `ConnectPort ${port}`),
    ...(options.basicAuth ? [`BasicAuth ${options.basicAuth.user} ${options.basicAuth.password}`] : []),
    "",
  ].join("\n");
}

/** Starts tinyproxy in the foreground inside the proxy's namespace and waits until it listens. */
export async function startTinyproxy(ns: ProxyNamespace, options: TinyproxyOptions): Promise<Tinyproxy> {
  const port = options.port ?? 3128;
  mkdirSync(options.dir, { recursive: true });
  const logFile = join(options.dir, "tinyproxy.log");
  const configFile = join(options.dir, "tinyproxy.conf");
  writeFileSync(configFile, tinyproxyConfig(ns.address, logFile, options));
  // It drops to nobody: the log must be theirs.
  writeFileSync(logFile, "");
  await host("chown", ["nobody:nogroup", logFile]);
  const child = spawnLogged({
    name: `${ns.netns}-tinyproxy`,
    command: "ip",
    // `ip netns exec` execs tinyproxy: one pid, whose command line names the config in the state folder.
    args: ["netns", "exec", ns.netns, "tinyproxy", "-d", "-c", configFile],
    logFile: join(options.dir, "tinyproxy.out"),
    ...(options.pidFile ? { pidFile: options.pidFile } : {}),
  });
  await waitFor(
    `tinyproxy on ${ns.address}:${port}`,
    async () => {
      if (!child.isRunning()) throw new GiveUp(`tinyproxy exited:\n${tailFile(child.logFile)}\n${tailFile(logFile)}`);
      const listening = await host("ip", ["netns", "exec", ns.netns, "ss", "-Hltn", `sport = :${port}`]);
      return listening.includes(`${ns.address}:${port}`);
    },
    10_000,
    () => tailFile(child.logFile),
    100,
  );
  return {
    host: ns.address,
    port,
    logFile,
    process: child,
    log: () => (existsSync(logFile) ? readFileSync(logFile, "utf8") : ""),
    stop: () => stopProcess(child, 2_000),
  };
}

/**
 * Rejects (ICMP port unreachable: "connection refused") what `from`'s pods send to `to`'s node address
 * and pods, in `from`'s node, where its pods' traffic is forwarded. Returns the undo.
 */
export async function rejectDirect(from: NodeAddresses, to: NodeAddresses): Promise<() => Promise<void>> {
  const rules = [`${to.nodeIp}/32`, to.podCidr].map((destination) => [
    "FORWARD",
    "-s",
    from.podCidr,
    "-d",
    destination,
    "-m",
    "comment",
    "--comment",
    "dvm-proxy-only",
    "-j",
    "REJECT",
  ]);
  const iptables = (...args: string[]) => host("ip", ["netns", "exec", from.netns, "iptables", "-w", "5", ...args]);
  const added: string[][] = [];
  const undo = async () => {
    for (const rule of added.splice(0)) await iptables("-D", ...rule).catch(() => undefined);
  };
  try {
    for (const rule of rules) {
      // First in the chain: ahead of kube-proxy's, which accept only established and marked traffic.
      await iptables("-I", rule[0]!, "1", ...rule.slice(1));
      added.push(rule);
    }
  } catch (error) {
    await undo();
    throw error;
  }
  return undo;
}
