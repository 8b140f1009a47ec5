/**
 * The phase function's outgoing events, configured by its environment (serverless.yml custom.events):
 *   DVM_EVENTS_SINK         eventbridge | http | none (unset: none)
 *   DVM_EVENTS_BUS_NAME     eventbridge: the bus (name or ARN), default "default"
 *   DVM_EVENTS_HTTP_URL     http: where events are POSTed
 *   DVM_EVENTS_HTTP_MODE    http: structured (default) or binary content mode
 *   DVM_EVENTS_SOURCE       the events' `source`, default "dvm-serverless"
 *   DVM_EVENTS_FLUSH_MS     how long an invocation waits for its events at most, default 1,500
 *   DVM_EVENTS_QUEUE        events held at most while the sink is slow or down, default 100
 * A setting that does not make sense turns events off with an error in the log: events must never
 * be the reason a phase fails.
 *
 * Counts go to CloudWatch as EventsSent, EventsFailed and EventsDropped (namespace DvmServerless,
 * dimension Sink), from a Metrics instance of their own: the phase metrics' Phase dimension must not
 * be mixed into them.
 */
import { Metrics, MetricUnit } from "@aws-lambda-powertools/metrics";
import { HTTP_CONTENT_MODES, type HttpContentMode, HttpEventSink } from "../events/httpSink";
import { DEFAULT_EVENT_SOURCE } from "../events/outgoing";
import { EventPublisher, type EventSink, type FlushResult, type PublisherCounts } from "../events/publisher";
import type { Logger } from "../log";
import { EventBridgeSink } from "./eventBridgeSink";
import { METRICS_NAMESPACE, type MetricsWriter } from "./phaseMetrics";

export const EVENTS_ENV = {
  sink: "DVM_EVENTS_SINK",
  busName: "DVM_EVENTS_BUS_NAME",
  httpUrl: "DVM_EVENTS_HTTP_URL",
  httpMode: "DVM_EVENTS_HTTP_MODE",
  source: "DVM_EVENTS_SOURCE",
  flushMs: "DVM_EVENTS_FLUSH_MS",
  queue: "DVM_EVENTS_QUEUE",
} as const;

export const EVENT_SINKS = ["eventbridge", "http", "none"] as const;
export const DEFAULT_FLUSH_MS = 1_500;

export interface EventsConfig {
  sink: EventSink;
  source: string;
  flushDeadlineMs: number;
  maxQueue: number;
}

/** The settings, or undefined when events are off; throws a message naming the bad setting. */
export function eventsConfigFromEnv(env: NodeJS.ProcessEnv): EventsConfig | undefined {
  const kind = (env[EVENTS_ENV.sink]?.trim() || "none").toLowerCase();
  if (!(EVENT_SINKS as readonly string[]).includes(kind))
    throw new Error(`${EVENTS_ENV.sink} must be one of ${EVENT_SINKS.join(", ")} (got ${JSON.stringify(kind)})`);
  if (kind === "none") return undefined;
  let sink: EventSink;
  if (kind === "eventbridge") {
    sink = new EventBridgeSink({ busName: env[EVENTS_ENV.busName]?.trim() || "default" });
  } else {
    const url = env[EVENTS_ENV.httpUrl]?.trim();
    if (!url) throw new Error(`${EVENTS_ENV.httpUrl} must be set when ${EVENTS_ENV.sink} is http`);
    const mode = (env[EVENTS_ENV.httpMode]?.trim() || "structured").toLowerCase();
    if (!(HTTP_CONTENT_MODES as readonly string[]).includes(mode))
      throw new Error(`${EVENTS_ENV.httpMode} must be structured or binary (got ${JSON.stringify(mode)})`);
    try {
      sink = new HttpEventSink({ url, mode: mode as HttpContentMode });
    } catch (error) {
      // The URL itself is not quoted: it may carry a token.
      throw new Error(`${EVENTS_ENV.httpUrl} is not a usable http(s) URL${error instanceof TypeError ? "" : `: ${(error as Error).message}`}`);
    }
  }
  return {
    sink,
    source: env[EVENTS_ENV.source]?.trim() || DEFAULT_EVENT_SOURCE,
    flushDeadlineMs: positiveInt(env, EVENTS_ENV.flushMs, DEFAULT_FLUSH_MS),
    maxQueue: positiveInt(env, EVENTS_ENV.queue, 100),
  };
}

function positiveInt(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const text = env[name]?.trim();
  if (!text) return fallback;
  const value = Number(text);
  if (!Number.isInteger(value) || value <= 0) throw new Error(`${name} must be a positive integer (got ${JSON.stringify(text)})`);
  return value;
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
export function phaseEventsFromEnv(env: NodeJS.ProcessEnv, log: Logger, options: PhaseEventsFromEnvOptions = {}): PhaseEvents | undefined {
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
        metrics ??= new Metrics({ namespace: METRICS_NAMESPACE, serviceName: env.POWERTOOLS_SERVICE_NAME ?? "dvm-phase" });
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
