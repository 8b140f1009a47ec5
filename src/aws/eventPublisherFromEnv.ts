/**
 * The phase function's outgoing events, from its settings (DVM_EVENTS_*, parsed by src/aws/phaseConfig.ts).
 * A setting that does not make sense turns events off with an error in the log: events must never
 * be the reason a phase fails.
 *
 * Counts go to CloudWatch as EventsSent, EventsFailed and EventsDropped (namespace DvmServerless,
 * dimension Sink), from a Metrics instance of their own: the phase metrics' Phase dimension must not
 * be mixed into them.
 */
import { Metrics, MetricUnit } from "@aws-lambda-powertools/metrics";
import type { Environment } from "../config/environment";
import { HttpEventSink } from "../events/httpSink";
import { EventPublisher, type EventSink, type FlushResult, type PublisherCounts } from "../events/publisher";
import type { Logger } from "../lib/log";
import { EventBridgeSink } from "./eventBridgeSink";
import { serviceNameOf } from "./functionConfig";
import { parseEventsEnv } from "./phaseConfig";
import { METRICS_NAMESPACE, type MetricsWriter } from "./phaseMetrics";

export interface EventsConfig {
  sink: EventSink;
  source: string;
  flushDeadlineMs: number;
  maxQueue: number;
}

/** The settings with their sink, or undefined when events are off; throws ConfigurationError naming the bad setting. */
export function eventsConfigFromEnv(env: Environment): EventsConfig | undefined {
  const settings = parseEventsEnv(env);
  if (!settings) return undefined;
  const { sink, ...rest } = settings;
  return {
    ...rest,
    sink: sink.kind === "eventbridge" ? new EventBridgeSink({ busName: sink.busName }) : new HttpEventSink({ url: sink.url, mode: sink.mode }),
  };
}

/** A MetricsWriter that can also publish on its own (Powertools Metrics is one). */
export interface PublishingMetrics extends MetricsWriter {
  publishStoredMetrics(): unknown;
}

export interface PhaseEvents {
  publisher: EventPublisher;
  source: string;
  flushDeadlineMs: number;
  /** Writes the counts added since the last call (nothing when none changed). */
  recordFlush(result: FlushResult): void;
}

export interface PhaseEventsFromEnvOptions {
  /** Default: a Powertools Metrics instance of its own (namespace DvmServerless). */
  metrics?: PublishingMetrics;
}

/** Outgoing events from the environment; undefined when they are off (or misconfigured, logged). */
export function phaseEventsFromEnv(env: Environment, log: Logger, options: PhaseEventsFromEnvOptions = {}): PhaseEvents | undefined {
  let config: EventsConfig | undefined;
  try {
    config = eventsConfigFromEnv(env);
  } catch (error) {
    log.error(`outgoing events are off: ${(error as Error).message}`);
    return undefined;
  }
  if (!config) return undefined;
  const publisher = new EventPublisher({ sink: config.sink, maxQueue: config.maxQueue, log: log.child({ component: "events" }) });
  let metrics = options.metrics;
  let last: PublisherCounts = { sent: 0, failed: 0, dropped: 0 };
  return {
    publisher,
    source: config.source,
    flushDeadlineMs: config.flushDeadlineMs,
    recordFlush(result) {
      const delta = { sent: result.sent - last.sent, failed: result.failed - last.failed, dropped: result.dropped - last.dropped };
      last = { sent: result.sent, failed: result.failed, dropped: result.dropped };
      if (delta.sent === 0 && delta.failed === 0 && delta.dropped === 0) return;
      try {
        metrics ??= new Metrics({ namespace: METRICS_NAMESPACE, serviceName: serviceNameOf(env, "dvm-phase") });
        metrics.addDimension("Sink", config.sink.name);
        metrics.addMetric("EventsSent", MetricUnit.Count, delta.sent);
        metrics.addMetric("EventsFailed", MetricUnit.Count, delta.failed);
        metrics.addMetric("EventsDropped", MetricUnit.Count, delta.dropped);
        metrics.publishStoredMetrics();
      } catch (error) {
        log.warn("could not write the event metrics", { error: (error as Error).message });
      }
    },
  };
}
