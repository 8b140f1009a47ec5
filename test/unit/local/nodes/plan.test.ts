import { describe, expect, it } from "vitest";
import { MAX_SLOTS, NODES_PER_CLUSTER, slotPlan } from "../../../../infra/dev/local/nodes/plan";

const inBenchmarkRange = (address: string) => /^198\.(18|19)\.\d+\.\d+(\/24)?$/.test(address) && Number(address.split(".")[2]) < 256;

describe("the node-mode address plan", () => {
  it("gives each of two clusters two nodes, each with its own namespace, address and pod range", () => {
    const plan = slotPlan(1, ["source", "destination"]);
    expect(plan.clusters.map((c) => c.nodes.map((n) => n.nodeName))).toEqual([
      ["source-node-1", "source-node-2"],
      ["destination-node-1", "destination-node-2"],
    ]);
    expect(plan.nodes).toHaveLength(2 * NODES_PER_CLUSTER);
    expect(plan.nodes.map((n) => [n.netns, n.hostVeth, n.nodeIp, n.podCidr])).toEqual([
      ["dvm1-source-1", "dvm1v0", "198.18.64.10", "198.18.80.0/24"],
      ["dvm1-source-2", "dvm1v1", "198.18.64.11", "198.18.88.0/24"],
      ["dvm1-destination-1", "dvm1v2", "198.18.64.12", "198.18.96.0/24"],
      ["dvm1-destination-2", "dvm1v3", "198.18.64.13", "198.18.104.0/24"],
    ]);
    // The nodes of a cluster share its service range; the two clusters' ranges differ.
    expect(plan.clusters.map((c) => [...new Set(c.nodes.map((n) => n.serviceCidr))])).toEqual([["198.19.80.0/24"], ["198.19.96.0/24"]]);
  });

  it("keeps every address of every slot inside 198.18.0.0/15, with no range used twice", () => {
    const ranges = new Set<string>();
    for (let slot = 0; slot < MAX_SLOTS; slot++) {
      const plan = slotPlan(slot, ["source", "destination"]);
      const all = [plan.fabricCidr, ...plan.nodes.map((n) => n.podCidr), ...plan.clusters.map((c) => c.serviceCidr)];
      for (const range of all) {
        expect(inBenchmarkRange(range), range).toBe(true);
        expect(ranges.has(range), `${range} twice`).toBe(false);
        ranges.add(range);
      }
      // The nodes' fabric addresses stay clear of the bridge (.1) and the proxy (.200).
      expect(plan.nodes.map((n) => Number(n.nodeIp.split(".")[3]))).toEqual([10, 11, 12, 13]);
    }
  });

  it("refuses a slot or a cluster count outside the plan, naming the limit", () => {
    expect(() => slotPlan(MAX_SLOTS, ["a"])).toThrow(/slot must be 0\.\.3/);
    expect(() => slotPlan(0, ["a", "b", "c"])).toThrow(/1 to 2 clusters per slot/);
  });
});
