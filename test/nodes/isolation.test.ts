/**
 * What node mode promises about the machine it runs on: no namespace of it has a route off the machine,
 * every address is in 198.18.0.0/15, and pods are not masqueraded. (That no image is ever pulled is
 * checked at the end of migration.test.ts, after every pod it started.)
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { CoreV1Api } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { testClusters } from "../support/clusters";
import { testNodes } from "../support/nodes";

const run = promisify(execFile);
const clusters = testClusters();
const nodes = testNodes();
const sides = ["source", "destination"] as const;

/** Whether an IPv4 address or prefix lies inside 198.18.0.0/15. */
const inBenchmarkRange = (address: string) => /^198\.1[89]\.\d+\.\d+(\/\d+)?$/.test(address);

describe("node mode keeps to itself", () => {
  it.each(sides)("the %s node's namespace has no default route and routes only 198.18.0.0/15", async (side) => {
    const { stdout } = await run("ip", ["-n", nodes[side].netns, "-j", "-4", "route", "show"]);
    const routes = JSON.parse(stdout) as { dst: string }[];
    expect(routes.length).toBeGreaterThan(0);
    expect(routes.map((r) => r.dst).filter((dst) => !inBenchmarkRange(dst))).toEqual([]);
    expect(inBenchmarkRange(nodes[side].nodeIp)).toBe(true);
  });

  it.each(sides)("the %s cluster's pods, services and node use only 198.18.0.0/15", async (side) => {
    const core = clusters[side].makeApiClient(CoreV1Api);
    const podIps = (await core.listPodForAllNamespaces()).items.flatMap((p) => (p.status?.podIP && !p.spec?.hostNetwork ? [p.status.podIP] : []));
    const serviceIps = (await core.listServiceForAllNamespaces()).items.flatMap((s) => s.spec?.clusterIPs ?? []);
    const nodeIps = (await core.listNode()).items.flatMap((n) => (n.status?.addresses ?? []).filter((a) => a.type === "InternalIP").map((a) => a.address));
    expect(serviceIps.length).toBeGreaterThan(0);
    expect([...podIps, ...serviceIps, ...nodeIps].filter((ip) => !inBenchmarkRange(ip))).toEqual([]);
  });

  it.each(sides)("the %s node's pods are not masqueraded: no NAT rule outside kube-proxy's own", async (side) => {
    const { stdout } = await run("ip", ["netns", "exec", nodes[side].netns, "iptables-save", "-t", "nat"]);
    // kube-proxy masquerades only packets it marked itself (NodePort and hairpin traffic, inside the
    // node); the CNI bridge adds no rule of its own.
    const masquerade = stdout.split("\n").filter((line) => line.includes("MASQUERADE") && !line.startsWith("-A KUBE-"));
    expect(masquerade).toEqual([]);
  });
});
