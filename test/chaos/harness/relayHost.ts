/**
 * The watch relay and our phase runner in one process of their own, as `npm start` runs them locally,
 * for the scale benchmark: its memory is then the relay's and the runner's, not the harness's.
 *   node --import tsx test/chaos/harness/relayHost.ts     (forked, with an IPC channel)
 * It samples its own memory, the relay's stats and the DynamoDB requests (counted by client middleware)
 * every `sampleMs`, and reports repeats from its counted phase bodies when told to stop.
 */

import { KubeConfig } from "@kubernetes/client-node";
import { createLedgerClient } from "../../../src/aws/ledger";
import type { RunResult } from "../../../src/contracts/request";
import { silentLogger } from "../../../src/lib/log";
import { Relay, type RelayStats } from "../../../src/relay/relay";
import { InProcessTransport } from "../../support/inProcessTransport";
import { tallyHooks } from "./bodies";
import { type DynamoCounts, instrumentDynamo } from "./dynamoFaults";
import type { DynamoEndpoint } from "./environment";
import { buildOurRunner } from "./ourRunner";
import { type Distribution, type RepeatSummary, summarizeRepeats, Tally, transitionOverhead } from "./tally";

export interface RelayHostConfig {
  hostKubeconfigPath: string;
  destinationKubeconfigPath: string;
  namespace: string;
  dynamo: DynamoEndpoint;
  tableName: string;
  /** Forwards in flight at once; default the relay's. */
  concurrency?: number;
  sampleMs: number;
}

export interface RelayHostSample {
  at: number;
  rssBytes: number;
  heapUsedBytes: number;
  heapTotalBytes: number;
  relay: Pick<RelayStats, "liveDvms" | "queuedUids" | "queueDepth" | "inFlight" | "delayed" | "forwarded" | "errors">;
  dynamo: DynamoCounts;
  invocations: Record<string, number>;
}

export interface RelayHostFinal {
  repeats: RepeatSummary;
  overheadMs: Distribution;
  invocations: Record<string, number>;
  dynamo: DynamoCounts;
}

export type ToRelayHost = { type: "start"; config: RelayHostConfig } | { type: "stop" };
export type FromRelayHost = { type: "ready" } | { type: "sample"; sample: RelayHostSample } | { type: "final"; final: RelayHostFinal };

function send(message: FromRelayHost): Promise<void> {
  return new Promise((resolve, reject) => process.send!(message, undefined, {}, (error) => (error ? reject(error) : resolve())));
}

async function main(config: RelayHostConfig): Promise<void> {
  const load = (path: string) => {
    const kc = new KubeConfig();
    kc.loadFromFile(path);
    return kc;
  };
  const host = load(config.hostKubeconfigPath);
  const client = createLedgerClient({
    endpoint: config.dynamo.endpoint,
    region: config.dynamo.region,
    ...(config.dynamo.credentials ? { credentials: config.dynamo.credentials } : {}),
  });
  const dynamo = instrumentDynamo(client);
  const tally = new Tally();
  const runner = buildOurRunner({ hostKubeConfig: host, dynamo: client, tableName: config.tableName, leaseMs: 120_000, hooks: tallyHooks(tally) });
  const invocations: Record<string, number> = {};
  const relay = new Relay({
    kubeConfig: host,
    clusters: [{ name: "destination", kubeConfig: load(config.destinationKubeconfigPath) }],
    namespace: config.namespace,
    ...(config.concurrency ? { concurrency: config.concurrency } : {}),
    log: silentLogger,
    transport: new InProcessTransport(async (request): Promise<RunResult> => {
      try {
        const { result, stats, bodyMs } = await runner.invoke(request);
        tally.invocation({
          uid: request.uid,
          kind: result.kind,
          durationMs: stats.durationMs,
          bodyMs,
          statusConflicts: stats.statusConflicts,
          takeover: stats.takeover ?? false,
          stale: false,
        });
        invocations[result.kind] = (invocations[result.kind] ?? 0) + 1;
        return result;
      } catch (error) {
        invocations.error = (invocations.error ?? 0) + 1;
        throw error;
      }
    }),
  });
  relay.start();
  while (!relay.ready()) await new Promise((resolve) => setTimeout(resolve, 50));
  await send({ type: "ready" });

  const sample = () => {
    const memory = process.memoryUsage();
    const stats = relay.stats();
    void send({
      type: "sample",
      sample: {
        at: Date.now(),
        rssBytes: memory.rss,
        heapUsedBytes: memory.heapUsed,
        heapTotalBytes: memory.heapTotal,
        relay: {
          liveDvms: stats.liveDvms,
          queuedUids: stats.queuedUids,
          queueDepth: stats.queueDepth,
          inFlight: stats.inFlight,
          delayed: stats.delayed,
          forwarded: stats.forwarded,
          errors: stats.errors,
        },
        dynamo: dynamo.counts(),
        invocations: { ...invocations },
      },
    }).catch(() => undefined);
  };
  sample();
  const timer = setInterval(sample, config.sampleMs);
  process.on("message", (message: ToRelayHost) => {
    if (message.type !== "stop") return;
    clearInterval(timer);
    void relay
      .stop(10_000)
      .then(() =>
        send({
          type: "final",
          final: {
            repeats: summarizeRepeats(tally.bodies),
            overheadMs: transitionOverhead(tally.invocations),
            invocations: { ...invocations },
            dynamo: dynamo.counts(),
          },
        }),
      )
      .finally(() => process.exit(0));
  });
}

if (!process.send) throw new Error("relayHost.ts must be started with an IPC channel (child_process.fork)");
process.once("message", (message: ToRelayHost) => {
  if (message.type === "start") {
    main(message.config).catch((error: unknown) => {
      console.error(error);
      process.exit(1);
    });
  }
});
process.on("disconnect", () => process.exit(0));
