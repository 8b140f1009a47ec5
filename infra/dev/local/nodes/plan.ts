/**
 * The address plan of the node-mode clusters: every node, pod and service address comes from
 * 198.18.0.0/15 (RFC 2544, reserved for benchmarking), so nothing here can be mistaken for a real network,
 * and no namespace gets a route off the machine.
 *
 * A "slot" is one pair of clusters on this machine (a test run and `npm start` can each have one), each
 * cluster of NODES_PER_CLUSTER nodes. Node j of the slot (j = cluster * NODES_PER_CLUSTER + n):
 *   fabric (the bridge in the root namespace)   198.18.<64s>.0/24, the bridge itself .1, node j at .<10+j>
 *   pods of node j                              198.18.<64s+16+8j>.0/24 (a CNI bridge inside the node)
 *   services of cluster c                       198.19.<64s+16+16c>.0/24
 */
export const MAX_SLOTS = 4;
export const MAX_CLUSTERS_PER_SLOT = 2;
/** Two nodes a cluster: enough for a volume bound to one node and a pod that must follow it. */
export const NODES_PER_CLUSTER = 2;

export interface NodeAddresses {
  /** The cluster's name, e.g. "source". */
  name: string;
  /** The node's place in the slot (0 .. clusters * NODES_PER_CLUSTER - 1). */
  index: number;
  /** The node's place in its cluster: 0 runs the cluster's controller-manager and scheduler too. */
  indexInCluster: number;
  /** Network namespace holding the node (kubelet, containerd, kube-proxy and its pods). */
  netns: string;
  /** The root-namespace end of the node's veth pair (the other end is "eth0" inside the node). */
  hostVeth: string;
  /** "<cluster>-node-<1..>": node 1 and node 2 of a cluster. */
  nodeName: string;
  nodeIp: string;
  podCidr: string;
  /** The pod bridge's own address inside the node: the pods' gateway. */
  podGateway: string;
  /** The cluster's service range. */
  serviceCidr: string;
}

export interface ClusterAddresses {
  name: string;
  serviceCidr: string;
  /** Every node of the cluster, node 1 first. */
  nodes: NodeAddresses[];
}

export interface SlotPlan {
  slot: number;
  bridge: string;
  /** The bridge's address: where the API servers listen, reachable from every node. */
  bridgeIp: string;
  fabricCidr: string;
  /** Everything this plan hands out; the only destinations routed inside the nodes and pods. */
  supernet: string;
  clusters: ClusterAddresses[];
  /** Every node of every cluster, in slot order. */
  nodes: NodeAddresses[];
}

export function slotPlan(slot: number, names: readonly string[]): SlotPlan {
  if (!Number.isInteger(slot) || slot < 0 || slot >= MAX_SLOTS) throw new RangeError(`slot must be 0..${MAX_SLOTS - 1}, got ${slot}`);
  if (names.length < 1 || names.length > MAX_CLUSTERS_PER_SLOT) throw new RangeError(`1 to ${MAX_CLUSTERS_PER_SLOT} clusters per slot, got ${names.length}`);
  const base = 64 * slot;
  const clusters = names.map((name, clusterIndex): ClusterAddresses => {
    const serviceCidr = `198.19.${base + 16 + 16 * clusterIndex}.0/24`;
    const nodes = Array.from({ length: NODES_PER_CLUSTER }, (_, indexInCluster): NodeAddresses => {
      const index = clusterIndex * NODES_PER_CLUSTER + indexInCluster;
      const third = base + 16 + 8 * index;
      return {
        name,
        index,
        indexInCluster,
        netns: `dvm${slot}-${name}-${indexInCluster + 1}`,
        hostVeth: `dvm${slot}v${index}`,
        nodeName: `${name}-node-${indexInCluster + 1}`,
        nodeIp: `198.18.${base}.${10 + index}`,
        podCidr: `198.18.${third}.0/24`,
        podGateway: `198.18.${third}.1`,
        serviceCidr,
      };
    });
    return { name, serviceCidr, nodes };
  });
  return {
    slot,
    bridge: `dvm-br${slot}`,
    bridgeIp: `198.18.${base}.1`,
    fabricCidr: `198.18.${base}.0/24`,
    supernet: "198.18.0.0/15",
    clusters,
    nodes: clusters.flatMap((c) => c.nodes),
  };
}
