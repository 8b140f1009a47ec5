import { describe, expect, it } from "vitest";
import { slotPlan } from "../../../../infra/dev/local/nodes/plan";
import { proxyAddresses, tinyproxyConfig } from "../../../../infra/dev/local/nodes/proxy";

describe("the node-mode proxy", () => {
  it("sits in the slot's style: dvm<slot>-proxy, a veth on the slot's bridge, .200 of the fabric", () => {
    const plan = slotPlan(2, ["source", "destination"]);
    expect(proxyAddresses(plan)).toEqual({ netns: "dvm2-proxy", hostVeth: "dvm2vp", address: "198.18.128.200" });
    // Free on the fabric: the bridge is .1, the nodes .10 and .11.
    expect([plan.bridgeIp, ...plan.nodes.map((n) => n.nodeIp)]).not.toContain(proxyAddresses(plan).address);
  });

  it("serves only the sources it allows, CONNECTs only to the ports it names, and logs each request", () => {
    const config = tinyproxyConfig("198.18.0.200", "/var/tmp/dvm-nodes/slot0/proxy/tinyproxy.log", {
      dir: "/var/tmp/dvm-nodes/slot0/proxy",
      allow: ["198.18.16.0/24"],
      connectPorts: [31234],
      basicAuth: { user: "dvm", password: "pw123" },
    });
    expect(config.split("\n")).toEqual(
      expect.arrayContaining([
        "User nobody",
        "Port 3128",
        "Listen 198.18.0.200",
        'LogFile "/var/tmp/dvm-nodes/slot0/proxy/tinyproxy.log"',
        "LogLevel Connect",
        "Allow 198.18.16.0/24",
        "ConnectPort 31234",
        "BasicAuth dvm pw123",
      ]),
    );
    const base = { dir: "/d", allow: ["198.18.16.0/24"], connectPorts: [1] };
    expect(() => tinyproxyConfig("a", "/l", { ...base, allow: [] })).toThrow(/allow/);
    expect(() => tinyproxyConfig("a", "/l", { ...base, connectPorts: [] })).toThrow(/ports/);
    expect(() => tinyproxyConfig("a", "/l", { ...base, basicAuth: { user: "dvm", password: "a b" } })).toThrow(/BasicAuth/);
  });
});
