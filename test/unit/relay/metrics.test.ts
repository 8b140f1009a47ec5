/**
 * The relay's Prometheus metrics: per-DVM series are bounded and go with their DVM, label values are
 * names and known phases only, errors are sorted into a fixed set of kinds, the health server serves the
 * exposition, and docs/operations.md lists exactly the metrics the code registers.
 */

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { startHealthServer } from "../../../src/relay/health";
import { forwardErrorKind, RELAY_METRIC_NAMES, RelayMetrics } from "../../../src/relay/metrics";
import { dvmProgressOf, type ObservedDvm } from "../../../src/relay/observed";
import { LambdaInvokeError, RemoteFunctionError } from "../../../src/relay/transport";

const dvm = (i: number, phase?: string): ObservedDvm => ({
  uid: `uid-${i}`,
  namespace: "apps",
  name: `move-${i}`,
  resourceVersion: "1",
  ...(phase ? { phase } : {}),
});

/** The exposition's sample lines of one metric (no HELP/TYPE). */
async function samples(metrics: RelayMetrics, name: string): Promise<string[]> {
  const { body } = await metrics.render();
  return body.split("\n").filter((line) => line.startsWith(`${name}{`) || line.startsWith(`${name} `));
}

describe("per-DVM series", () => {
  it("export phase, bytes done, total and rate, and drop every series of a forgotten DVM", async () => {
    const metrics = new RelayMetrics({ maxDvmSeries: 10 });
    metrics.dvmObserved(dvm(1, "Started"));
    metrics.dvmObserved(dvm(1, "RunRsyncOperations"), { bytesTransferred: 1_048_576, totalBytes: 4_194_304, bytesPerSecond: 524_288 });
    expect(await samples(metrics, RELAY_METRIC_NAMES.dvmPhase)).toEqual([
      'dvm_relay_dvm_phase{namespace="apps",name="move-1",uid="uid-1",phase="RunRsyncOperations"} 1',
    ]);
    expect(await samples(metrics, RELAY_METRIC_NAMES.dvmBytes)).toEqual([
      'dvm_relay_dvm_bytes_transferred{namespace="apps",name="move-1",uid="uid-1"} 1048576',
    ]);
    expect(await samples(metrics, RELAY_METRIC_NAMES.dvmTotal)).toEqual(['dvm_relay_dvm_bytes_total{namespace="apps",name="move-1",uid="uid-1"} 4194304']);
    expect(await samples(metrics, RELAY_METRIC_NAMES.dvmRate)).toEqual(['dvm_relay_dvm_bytes_per_second{namespace="apps",name="move-1",uid="uid-1"} 524288']);
    // A list row carries no progress: the last numbers stay.
    metrics.dvmObserved(dvm(1, "RunRsyncOperations"));
    expect(await samples(metrics, RELAY_METRIC_NAMES.dvmBytes)).toHaveLength(1);

    metrics.dvmForgotten("uid-1");
    const { body } = await metrics.render();
    expect(body).not.toContain("uid-1");
    expect(metrics.exportedDvms()).toBe(0);
  });

  it("never export more DVMs than the maximum, and count the rest as unexported", async () => {
    const metrics = new RelayMetrics({ maxDvmSeries: 3, source: () => ({ role: "leader", liveDvms: 5 }) });
    for (let i = 0; i < 5; i += 1) metrics.dvmObserved(dvm(i, "Started"), { bytesTransferred: i });
    expect(metrics.exportedDvms()).toBe(3);
    expect(await samples(metrics, RELAY_METRIC_NAMES.dvmPhase)).toHaveLength(3);
    expect(await samples(metrics, RELAY_METRIC_NAMES.unexported)).toEqual(["dvm_relay_dvms_unexported 2"]);
    // A slot freed by a forgotten DVM goes to the next one seen.
    metrics.dvmForgotten("uid-0");
    metrics.dvmObserved(dvm(4, "Started"));
    expect((await metrics.render()).body).toContain('uid="uid-4"');
    expect(metrics.exportedDvms()).toBe(3);
  });

  it("export none with a maximum of 0", async () => {
    const metrics = new RelayMetrics({ maxDvmSeries: 0 });
    metrics.dvmObserved(dvm(1, "Started"), { bytesTransferred: 5 });
    expect(await samples(metrics, RELAY_METRIC_NAMES.dvmPhase)).toEqual([]);
  });

  it("label a phase outside the itinerary Unknown (a hand-written status mints no label value) and a missing one None", async () => {
    const metrics = new RelayMetrics({ maxDvmSeries: 10 });
    metrics.dvmObserved(dvm(1, "password=hunter2"));
    metrics.dvmObserved(dvm(2));
    const lines = await samples(metrics, RELAY_METRIC_NAMES.dvmPhase);
    expect(lines.join("\n")).not.toContain("hunter2");
    expect(lines).toEqual([
      'dvm_relay_dvm_phase{namespace="apps",name="move-1",uid="uid-1",phase="Unknown"} 1',
      'dvm_relay_dvm_phase{namespace="apps",name="move-2",uid="uid-2",phase="None"} 1',
    ]);
  });

  it("go when the replica stops leading (a standby does not watch), and the transition is counted", async () => {
    const metrics = new RelayMetrics({ maxDvmSeries: 10 });
    metrics.leadershipChanged(true);
    metrics.dvmObserved(dvm(1, "Started"));
    metrics.leadershipChanged(false);
    expect(await samples(metrics, RELAY_METRIC_NAMES.dvmPhase)).toEqual([]);
    expect(await samples(metrics, RELAY_METRIC_NAMES.transitions)).toEqual([
      'dvm_relay_leader_transitions_total{to="leader"} 1',
      'dvm_relay_leader_transitions_total{to="standby"} 1',
    ]);
  });
});

describe("relay-wide metrics", () => {
  it("count triggers, coalesced events, forwards by result and errors by kind, and time every invocation", async () => {
    const metrics = new RelayMetrics({ maxDvmSeries: 10 });
    metrics.triggered(false);
    metrics.triggered(true);
    metrics.forwarded(0.2, "advanced");
    metrics.forwardFailed(0.01, new RemoteFunctionError("f", "Unhandled", "boom"));
    const { body } = await metrics.render();
    expect(body).toContain("dvm_relay_triggers_total 2");
    expect(body).toContain("dvm_relay_coalesced_events_total 1");
    expect(body).toContain('dvm_relay_forwards_total{result="advanced"} 1');
    expect(body).toContain('dvm_relay_forward_errors_total{kind="function_error"} 1');
    expect(body).toContain('dvm_relay_invoke_duration_seconds_bucket{le="0.25",outcome="ok"} 1');
    expect(body).toContain('dvm_relay_invoke_duration_seconds_count{outcome="error"} 1');
  });

  it("read queue, in-flight, leader and watch gauges from the replica at scrape time", async () => {
    let role = "standby";
    const metrics = new RelayMetrics({
      maxDvmSeries: 10,
      source: () => ({ role, queueDepth: 3, inFlight: 2, delayed: 1, liveDvms: 4, watches: [{ name: "dvms", connected: true }] }),
    });
    expect(await samples(metrics, RELAY_METRIC_NAMES.leader)).toEqual(["dvm_relay_leader 0"]);
    role = "leader";
    const { body } = await metrics.render();
    for (const line of ["dvm_relay_leader 1", "dvm_relay_queue_depth 3", "dvm_relay_in_flight 2", "dvm_relay_delayed 1", "dvm_relay_live_dvms 4"]) {
      expect(body).toContain(line);
    }
    expect(body).toContain('dvm_relay_watch_connected{watch="dvms"} 1');
  });

  it.each([
    [new RemoteFunctionError("f", "Handled", "x"), "function_error"],
    [new LambdaInvokeError("f", 500), "invoke_status"],
    [Object.assign(new Error("slow down"), { name: "TooManyRequestsException" }), "throttled"],
    [Object.assign(new Error("no such function"), { name: "ResourceNotFoundException" }), "not_found"],
    [Object.assign(new Error("denied"), { name: "AccessDeniedException" }), "denied"],
    [Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:3002"), { code: "ECONNREFUSED" }), "network"],
    [new Error("anything else, with a secret=abc in its message"), "other"],
    ["a string", "other"],
  ])("sort a forward error into a fixed kind: %s", (error, kind) => {
    expect(forwardErrorKind(error)).toBe(kind);
  });
});

describe("progress from a DVM event", () => {
  it("keeps the three numbers only, each when it is a finite number >= 0", () => {
    expect(dvmProgressOf({ status: { progress: { bytesTransferred: 10, totalBytes: 20, bytesPerSecond: 1.5, percent: 50, secondsLeft: 7 } } })).toEqual({
      bytesTransferred: 10,
      totalBytes: 20,
      bytesPerSecond: 1.5,
    });
    expect(dvmProgressOf({ status: { progress: { bytesTransferred: "10", totalBytes: -1, bytesPerSecond: Number.NaN } } })).toEqual({});
    expect(dvmProgressOf({ status: {} })).toBeUndefined();
    expect(dvmProgressOf(null)).toBeUndefined();
  });
});

describe("the health server's /metrics", () => {
  it("serves the registry's exposition with Prometheus's content type; without metrics it is 404", async () => {
    const metrics = new RelayMetrics({ maxDvmSeries: 10 });
    metrics.triggered(false);
    const server = await startHealthServer({ port: 0, host: "127.0.0.1", ready: () => true, stats: () => ({}), metrics: () => metrics.render() });
    const bare = await startHealthServer({ port: 0, host: "127.0.0.1", ready: () => true, stats: () => ({}) });
    try {
      const response = await fetch(`http://127.0.0.1:${server.port}/metrics`);
      expect(response.status).toBe(200);
      expect(response.headers.get("content-type")).toBe(metrics.registry.contentType);
      expect(await response.text()).toContain("dvm_relay_triggers_total 1");
      expect((await fetch(`http://127.0.0.1:${bare.port}/metrics`)).status).toBe(404);
    } finally {
      await server.close();
      await bare.close();
    }
  });
});

describe("docs/operations.md", () => {
  it("lists exactly the metrics the relay registers, each with its type", async () => {
    const docs = readFileSync(join(import.meta.dirname, "..", "..", "..", "docs", "operations.md"), "utf8");
    const documented = [...docs.matchAll(/^\| `(dvm_relay_[a-z_]+)` \| (counter|gauge|histogram) \|/gm)].map((m) => `${m[1]} ${m[2]}`).sort();
    const metrics = new RelayMetrics({ maxDvmSeries: 1 });
    const registered = (await metrics.registry.getMetricsAsJSON()).map((m) => `${m.name} ${m.type}`).sort();
    expect(registered.map((line) => line.split(" ")[0]).sort()).toEqual(Object.values(RELAY_METRIC_NAMES).sort());
    expect(documented).toEqual(registered);
  });
});

describe("docs/grafana-relay-dashboard.json", () => {
  it("queries only metrics the relay registers, with the panels operations asks for", () => {
    const dashboard = JSON.parse(readFileSync(join(import.meta.dirname, "..", "..", "..", "docs", "grafana-relay-dashboard.json"), "utf8")) as {
      panels: { title: string; targets: { expr: string }[] }[];
    };
    const names = new Set<string>(Object.values(RELAY_METRIC_NAMES));
    const queried = dashboard.panels.flatMap((p) => p.targets.flatMap((t) => [...t.expr.matchAll(/dvm_relay_[a-z_]+/g)].map((m) => m[0])));
    expect(queried.filter((name) => !names.has(name.replace(/_bucket$/, "")))).toEqual([]);
    const titles = dashboard.panels.map((p) => p.title).join("; ");
    for (const wanted of ["Forwards/s", "Queue depth", "p50 / p99", "errors", "Leader", "bytes done / total", "transfer rate"])
      expect(titles).toContain(wanted);
  });
});
