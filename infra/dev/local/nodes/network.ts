/**
 * The node-mode network: one bridge in the root namespace (the "fabric", where the API servers listen) and
 * one network namespace per node, joined to it by a veth pair. Pods get a CNI bridge inside their node.
 * Traffic between the clusters' pods crosses two namespaces and the fabric: a real network hop.
 *
 * Nothing routes off the machine: the namespaces have no default route (only the fabric and the other
 * nodes' pod ranges), the CNI bridge does not masquerade, and every address is in 198.18.0.0/15. The root
 * namespace gets a route to each node's pods through that node, on the bridge (so they go with it): pods
 * that call their API server (the local-path provisioner) are answered at their own address.
 */
import { host, hostQuiet } from "./host";
import type { SlotPlan } from "./plan";

export async function createNetwork(plan: SlotPlan): Promise<void> {
  // A bridge left by a crashed owner is the teardown's job; here it would mean two owners of one slot.
  if (await hostQuiet("ip", ["link", "show", plan.bridge]))
    throw new Error(`bridge ${plan.bridge} exists already: is another node-mode run using slot ${plan.slot}?`);
  await host("ip", ["link", "add", plan.bridge, "type", "bridge"]);
  await host("ip", ["addr", "add", `${plan.bridgeIp}/24`, "dev", plan.bridge]);
  await host("ip", ["link", "set", plan.bridge, "up"]);

  for (const node of plan.nodes) {
    await host("ip", ["netns", "add", node.netns]);
    await host("ip", ["link", "add", node.hostVeth, "type", "veth", "peer", "name", "eth0", "netns", node.netns]);
    await host("ip", ["link", "set", node.hostVeth, "master", plan.bridge, "up"]);
    const inNode = (...args: string[]) => host("ip", ["-n", node.netns, ...args]);
    await inNode("addr", "add", `${node.nodeIp}/24`, "dev", "eth0");
    await inNode("link", "set", "eth0", "up");
    await inNode("link", "set", "lo", "up");
    // The other nodes' pods, through their node: pod addresses are kept end to end (no NAT).
    for (const other of plan.nodes) {
      if (other !== node) await inNode("route", "add", other.podCidr, "via", other.nodeIp, "dev", "eth0");
    }
    // A node forwards between its pods and the fabric; bridged pod traffic passes iptables, so that
    // kube-proxy's NAT of a Service address also applies to replies between two pods of one node.
    for (const sysctl of ["net.ipv4.ip_forward=1", "net.bridge.bridge-nf-call-iptables=1"]) {
      await host("ip", ["netns", "exec", node.netns, "sysctl", "-q", "-w", sysctl]);
    }
    await host("ip", ["route", "add", node.podCidr, "via", node.nodeIp, "dev", plan.bridge]);
  }
}

/** The CNI configuration of one node's pods: a bridge, addresses from the node's range, no masquerade. */
export function cniConfig(plan: SlotPlan, nodeIndex: number, ipamDataDir: string): string {
  const node = plan.nodes[nodeIndex];
  if (!node) throw new RangeError(`no node ${nodeIndex} in slot ${plan.slot}`);
  return JSON.stringify(
    {
      cniVersion: "1.0.0",
      name: `dvm-${node.nodeName}`,
      plugins: [
        {
          type: "bridge",
          bridge: "cni0",
          isGateway: true,
          ipMasq: false,
          hairpinMode: true,
          ipam: {
            type: "host-local",
            ranges: [[{ subnet: node.podCidr, gateway: node.podGateway }]],
            // Pods reach only the plan's addresses: no default route, so nothing can leave the machine.
            routes: [{ dst: plan.supernet }],
            dataDir: ipamDataDir,
          },
        },
        { type: "portmap", capabilities: { portMappings: true }, snat: false },
      ],
    },
    null,
    2,
  );
}
