/**
 * The address plan of the node-mode clusters: every node, pod and service address comes from
 * 198.18.0.0/15 (RFC 2544, reserved for benchmarking), so nothing here can be mistaken for a real network,
 * and no namespace gets a route off the machine.
 *
 * A "slot" is one pair of clusters on this machine (a test run and `npm start` can each have one):
 *   fabric (the bridge in the root namespace)   198.18.<64s>.0/24, the bridge itself .1, node i at .<10+i>
 *   pods of node i                              198.18.<64s+16+16i>.0/24 (a CNI bridge inside the node)
 *   services of cluster i                       198.19.<64s+16+16i>.0/24
 */
export const MAX_SLOTS = 4;
export const MAX_NODES_PER_SLOT = 2;

export interface NodeAddresses {
  /** The cluster's name, e.g. "source". */
  name: string;
  index: number;
  /** Network namespace holding the node (kubelet, containerd, kube-proxy and its pods). */
  netns: string;
  /** The root-namespace end of the node's veth pair (the other end is "eth0" inside the node). */
  hostVeth: string;
  nodeName: string;
  nodeIp: string;
  podCidr: string;
  /** The pod bridge's own address inside the node: the pods' gateway. */
  podGateway: string;
  serviceCidr: string;
}

export interface SlotPlan {
  slot: number;
  bridge: string;
  /** The bridge's address: where the API servers listen, reachable from every node. */
  bridgeIp: string;
  fabricCidr: string;
  /** Everything this plan hands out; the only destinations routed inside the nodes and pods. */
  supernet: string;
  nodes: NodeAddresses[];
}

export function slotPlan(slot: number, names: readonly string[]): SlotPlan {
  if (!Number.isInteger(slot) || slot < 0 || slot >= MAX_SLOTS) throw new RangeError(`slot must be 0..${MAX_SLOTS - 1}, got ${slot}`);
  if (names.length < 1 || names.length > MAX_NODES_PER_SLOT) throw new RangeError(`1 to ${MAX_NODES_PER_SLOT} clusters per slot, got ${names.length}`);
  const base = 64 * slot;
  return {
    slot,
    bridge: `dvm-br${slot}`,
    bridgeIp: `198.18.${base}.1`,
    fabricCidr: `198.18.${base}.0/24`,
    supernet: "198.18.0.0/15",
    nodes: names.map((name, index) => {
      const third = base + 16 + 16 * index;
      return {
        name,
        index,
        netns: `dvm${slot}-${name}`,
        hostVeth: `dvm${slot}v${index}`,
        nodeName: `${name}-node`,
        nodeIp: `198.18.${base}.${10 + index}`,
        podCidr: `198.18.${third}.0/24`,
        podGateway: `198.18.${third}.1`,
        serviceCidr: `198.19.${third}.0/24`,
      };
    }),
  };
}
