/**
 * Sending outgoing events: the publisher's bounded queue, retries with capped backoff and flush
 * deadline; the HTTP and EventBridge sinks; the runner hook and the flush around every invocation; and
 * the settings read from the phase function's environment. Fakes only: the real runner with a real
 * HTTP sink is in test/integration/events.test.ts.
 */

import type { PutEventsCommand } from "@aws-sdk/client-eventbridge";
import { CloudEvent, type CloudEventV1, HTTP } from "cloudevents";
import { describe, expect, it, vi } from "vitest";
import { EventBridgeSink } from "../../../src/aws/eventBridgeSink";
import { eventsConfigFromEnv, type PublishingMetrics, phaseEventsFromEnv } from "../../../src/aws/eventPublisherFromEnv";
import { ENV } from "../../../src/config/environment";
import { ConfigurationError } from "../../../src/config/error";
import type { RunResult, RunStats } from "../../../src/contracts/request";
import { HttpEventSink } from "../../../src/events/httpSink";
import { EventPublisher, type EventSink, SendError } from "../../../src/events/publisher";
import { phaseEventsHook, withEventFlush } from "../../../src/events/runnerEvents";
import { PHASE_COMPLETED } from "../../../src/events/schema";
import type { LedgerEntry } from "../../../src/ledger";
import type { LogAttributes, Logger } from "../../../src/lib/log";

const event = (n: number) => new CloudEvent<unknown>({ id: `e-${n}`, source: "dvm-serverless/test", type: PHASE_COMPLETED, subject: "ns/dvm", data: { n } });

/** A sink whose answers are scripted per call; it records every try. */
class ScriptedSink implements EventSink {
  readonly name = "scripted";
  readonly tries: string[] = [];
  constructor(private readonly answer: (event: CloudEventV1<unknown>, attempt: number, signal: AbortSignal) => Promise<void> = async () => undefined) {}
  async send(event: CloudEventV1<unknown>, signal: AbortSignal): Promise<void> {
    this.tries.push(event.id);
    return this.answer(event, this.tries.filter((id) => id === event.id).length, signal);
  }
}

const noSleep = { sleep: async () => undefined };

function capturingLogger(lines: { level: string; message: string; attributes?: LogAttributes }[] = []): Logger & { lines: typeof lines } {
  const at = (level: string) => (message: string, attributes?: LogAttributes) => void lines.push({ level, message, ...(attributes ? { attributes } : {}) });
  return { lines, debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error"), child: () => capturingLogger(lines) };
}

describe("EventPublisher", () => {
  it("sends queued events in order and counts them", async () => {
    const sink = new ScriptedSink();
    const publisher = new EventPublisher({ sink });
    expect(publisher.publish(event(1), event(2), event(3))).toBe(3);
    const result = await publisher.flush(5_000);
    expect(sink.tries).toEqual(["e-1", "e-2", "e-3"]);
    expect(result).toEqual({ sent: 3, failed: 0, dropped: 0, pending: 0, timedOut: false });
  });

  it("returns from publish before anything is sent", () => {
    const sink = new ScriptedSink(() => new Promise(() => undefined));
    const publisher = new EventPublisher({ sink });
    publisher.publish(event(1));
    expect(publisher.counts()).toEqual({ sent: 0, failed: 0, dropped: 0 });
    expect(publisher.pending()).toBe(1);
  });

  it("retries a failed send with capped exponential backoff, then succeeds", async () => {
    const sleeps: number[] = [];
    const sink = new ScriptedSink(async (_e, attempt) => {
      if (attempt < 4) throw new SendError("HTTP 503", true);
    });
    const publisher = new EventPublisher({
      sink,
      maxAttempts: 5,
      baseDelayMs: 100,
      maxDelayMs: 300,
      random: () => 0.999,
      sleep: async (ms) => void sleeps.push(ms),
    });
    publisher.publish(event(1));
    const result = await publisher.flush(5_000);
    expect(sink.tries).toEqual(["e-1", "e-1", "e-1", "e-1"]);
    // Full jitter below 100, 200, then the 300 cap.
    expect(sleeps).toEqual([99, 199, 299]);
    expect(result).toMatchObject({ sent: 1, failed: 0 });
  });

  it("gives up after maxAttempts, counts a failure, and goes on with the next event", async () => {
    const log = capturingLogger();
    const sink = new ScriptedSink(async (e) => {
      if (e.id === "e-1") throw new Error("connect ECONNREFUSED");
    });
    const publisher = new EventPublisher({ sink, maxAttempts: 3, log, ...noSleep });
    publisher.publish(event(1), event(2));
    const result = await publisher.flush(5_000);
    expect(sink.tries).toEqual(["e-1", "e-1", "e-1", "e-2"]);
    expect(result).toMatchObject({ sent: 1, failed: 1, dropped: 0, pending: 0 });
    expect(log.lines.map((l) => l.message)).toContain("event not sent: retries exhausted");
  });

  it("does not retry what the sink refused for good", async () => {
    const sink = new ScriptedSink(async () => {
      throw new SendError("HTTP 400", false);
    });
    const publisher = new EventPublisher({ sink, maxAttempts: 5, ...noSleep });
    publisher.publish(event(1));
    expect(await publisher.flush(5_000)).toMatchObject({ sent: 0, failed: 1 });
    expect(sink.tries).toHaveLength(1);
  });

  it("holds at most maxQueue events and drops (and counts) the rest", async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const sink = new ScriptedSink(() => gate);
    const publisher = new EventPublisher({ sink, maxQueue: 3 });
    expect(publisher.publish(event(1), event(2), event(3), event(4), event(5))).toBe(3);
    expect(publisher.counts().dropped).toBe(2);
    release();
    expect(await publisher.flush(5_000)).toEqual({ sent: 3, failed: 0, dropped: 2, pending: 0, timedOut: false });
  });

  it("returns from flush at the deadline while the sink hangs, keeping the events queued", async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const sink = new ScriptedSink(() => gate);
    const publisher = new EventPublisher({ sink });
    publisher.publish(event(1), event(2));
    const result = await publisher.flush(20);
    expect(result).toMatchObject({ timedOut: true, pending: 2, sent: 0 });
    // They go out later (the next invocation's flush, in a Lambda container).
    release();
    expect(await publisher.flush(5_000)).toMatchObject({ timedOut: false, pending: 0, sent: 2 });
  });

  it("gives each send a time limit (an abort signal), and retries a send that timed out", async () => {
    const sink = new ScriptedSink((_e, attempt, signal) =>
      attempt === 1 ? new Promise((_resolve, reject) => signal.addEventListener("abort", () => reject(signal.reason as Error))) : Promise.resolve(),
    );
    const publisher = new EventPublisher({ sink, sendTimeoutMs: 10, ...noSleep });
    publisher.publish(event(1));
    expect(await publisher.flush(5_000)).toMatchObject({ sent: 1, failed: 0 });
    expect(sink.tries).toHaveLength(2);
  });

  it("waits in flush for events that are still being built, and counts a failed build", async () => {
    const sink = new ScriptedSink();
    const publisher = new EventPublisher({ sink });
    publisher.publishLater(async () => {
      await new Promise((resolve) => setTimeout(resolve, 5));
      return [event(1), event(2)];
    });
    publisher.publishLater(async () => {
      throw new Error("ledger unavailable");
    });
    expect(await publisher.flush(5_000)).toEqual({ sent: 2, failed: 1, dropped: 0, pending: 0, timedOut: false });
  });

  it("flushes at once when there is nothing to send", async () => {
    const publisher = new EventPublisher({ sink: new ScriptedSink() });
    expect(await publisher.flush(60_000)).toEqual({ sent: 0, failed: 0, dropped: 0, pending: 0, timedOut: false });
  });

  it("keeps backoff within [0, cap)", () => {
    const low = new EventPublisher({ sink: new ScriptedSink(), baseDelayMs: 100, maxDelayMs: 1_000, random: () => 0 });
    const high = new EventPublisher({ sink: new ScriptedSink(), baseDelayMs: 100, maxDelayMs: 1_000, random: () => 0.9999 });
    for (let attempt = 1; attempt < 40; attempt++) {
      expect(low.backoffMs(attempt)).toBe(0);
      expect(high.backoffMs(attempt)).toBeLessThan(Math.min(1_000, 100 * 2 ** (attempt - 1)));
    }
  });
});

describe("HttpEventSink", () => {
  const recordingFetch = (status: number | Error) => {
    const calls: { url: string; init: RequestInit }[] = [];
    const fetch = (async (url: URL | string, init?: RequestInit) => {
      calls.push({ url: String(url), init: init ?? {} });
      if (status instanceof Error) throw status;
      return new Response("", { status });
    }) as typeof globalThis.fetch;
    return { calls, fetch };
  };

  it("POSTs structured mode by default and binary mode when asked, as the SDK serializes them", async () => {
    const structured = recordingFetch(202);
    await new HttpEventSink({ url: "http://127.0.0.1:9/events", fetch: structured.fetch }).send(event(1), new AbortController().signal);
    expect(structured.calls[0]!.init).toMatchObject({ method: "POST", headers: { "content-type": "application/cloudevents+json; charset=utf-8" } });
    expect(JSON.parse(structured.calls[0]!.init.body as string)).toMatchObject({ id: "e-1", type: PHASE_COMPLETED, data: { n: 1 } });

    const binary = recordingFetch(200);
    await new HttpEventSink({ url: "http://127.0.0.1:9/events", mode: "binary", fetch: binary.fetch }).send(event(1), new AbortController().signal);
    expect(binary.calls[0]!.init.headers).toMatchObject({ "ce-id": "e-1", "ce-type": PHASE_COMPLETED, "ce-specversion": "1.0", "ce-subject": "ns/dvm" });
    expect(JSON.parse(binary.calls[0]!.init.body as string)).toEqual({ n: 1 });
    expect(HTTP.toEvent({ headers: binary.calls[0]!.init.headers as Record<string, string>, body: binary.calls[0]!.init.body })).toMatchObject({ id: "e-1" });
  });

  it.each([
    [500, true],
    [503, true],
    [429, true],
    [408, true],
    [400, false],
    [404, false],
  ])("treats HTTP %i as retryable=%s", async (status, retryable) => {
    const { fetch } = recordingFetch(status);
    const sending = new HttpEventSink({ url: "https://hooks.example.com/T01/B02/tok3n", fetch }).send(event(1), new AbortController().signal);
    await expect(sending).rejects.toMatchObject({ name: "SendError", retryable });
  });

  it("retries network errors, and names the endpoint by origin only (the path may hold a token)", async () => {
    const { fetch } = recordingFetch(Object.assign(new TypeError("fetch failed"), { cause: { code: "ECONNREFUSED" } }));
    const error = await new HttpEventSink({ url: "https://hooks.example.com/T01/B02/tok3n?key=abc", fetch })
      .send(event(1), new AbortController().signal)
      .catch((e: unknown) => e);
    expect(error).toMatchObject({ retryable: true, message: "POST https://hooks.example.com: fetch failed (ECONNREFUSED)" });
    expect(String((error as Error).message)).not.toContain("tok3n");
  });

  it("refuses a URL that is not http(s)", () => {
    expect(() => new HttpEventSink({ url: "file:///etc/passwd" })).toThrow(/http or https/);
  });
});

describe("EventBridgeSink", () => {
  it("puts one entry: source, type as detail-type, the whole CloudEvent as detail", async () => {
    const send = vi.fn(async (_command: PutEventsCommand) => ({ FailedEntryCount: 0, Entries: [{ EventId: "x" }] }));
    const sink = new EventBridgeSink({ busName: "dvm-events", client: { send } as never });
    await sink.send(event(1), new AbortController().signal);
    const input = send.mock.calls[0]![0].input;
    expect(input.Entries).toHaveLength(1);
    const [entry] = input.Entries!;
    expect(entry).toMatchObject({ EventBusName: "dvm-events", Source: "dvm-serverless/test", DetailType: PHASE_COMPLETED });
    expect(JSON.parse(entry!.Detail!)).toMatchObject({ specversion: "1.0", id: "e-1", subject: "ns/dvm", data: { n: 1 } });
  });

  it("retries throttled entries and transient errors, not refusals", async () => {
    const failing = (output: unknown) => new EventBridgeSink({ busName: "b", client: { send: async () => output } as never });
    await expect(
      failing({ FailedEntryCount: 1, Entries: [{ ErrorCode: "ThrottlingException", ErrorMessage: "slow down" }] }).send(event(1), new AbortController().signal),
    ).rejects.toMatchObject({ retryable: true });
    await expect(
      failing({ FailedEntryCount: 1, Entries: [{ ErrorCode: "MalformedDetail", ErrorMessage: "bad" }] }).send(event(1), new AbortController().signal),
    ).rejects.toMatchObject({ retryable: false });
    const throwing = (error: Error) => new EventBridgeSink({ busName: "b", client: { send: async () => Promise.reject(error) } as never });
    await expect(
      throwing(Object.assign(new Error("x"), { name: "InternalException", $metadata: { httpStatusCode: 500 } })).send(event(1), new AbortController().signal),
    ).rejects.toMatchObject({ retryable: true });
    await expect(
      throwing(Object.assign(new Error("not authorized"), { name: "AccessDeniedException", $metadata: { httpStatusCode: 400 } })).send(
        event(1),
        new AbortController().signal,
      ),
    ).rejects.toMatchObject({ retryable: false });
  });
});

// ---- the runner's side --------------------------------------------------------------------------------

const UID = "6b1f0e7c-1111-4c4c-9d9d-0123456789ab";
const REQUEST = { uid: UID, namespace: "ns", name: "dvm" };
const STATS: RunStats = { durationMs: 5, statusConflicts: 0 };
const completed = (phase: string, next: string): LedgerEntry => ({
  key: { uid: UID, phase: phase as LedgerEntry["key"]["phase"], generation: 1 },
  state: "COMPLETED",
  attempts: 1,
  takeovers: 0,
  waits: 0,
  failures: 0,
  startedAt: 1_000,
  finishedAt: 2_000,
  outcome: { result: "advanced", nextPhase: next as LedgerEntry["key"]["phase"], finishedAt: 2_000 },
});

describe("phaseEventsHook", () => {
  it("queues the events of a completed phase after reading the ledger once, and nothing for other results", async () => {
    const sink = new ScriptedSink();
    const publisher = new EventPublisher({ sink });
    const history = vi.fn(async () => [completed("Started", "CleanStaleRsyncResources")]);
    const hook = phaseEventsHook({ publisher, history, source: "dvm-serverless/test" });
    const results: RunResult[] = [
      { kind: "waiting", phase: "Started", reason: "x", requeueAfterMs: 1 },
      { kind: "busy", phase: "Started", retryAfterMs: 1 },
      { kind: "advanced", phase: "Started", next: "CleanStaleRsyncResources", requeueAfterMs: 1 },
      { kind: "gone" },
    ];
    for (const result of results) hook(result, STATS, REQUEST);
    await publisher.flush(5_000);
    expect(history).toHaveBeenCalledTimes(1);
    expect(history).toHaveBeenCalledWith(UID);
    expect(sink.tries).toEqual([`${PHASE_COMPLETED}:${UID}:1:Started`]);
  });

  it("never throws into the runner", () => {
    const hook = phaseEventsHook({
      publisher: {
        publishLater: () => {
          throw new Error("boom");
        },
      },
      history: async () => [],
    });
    expect(() => hook({ kind: "advanced", phase: "Started", next: "x", requeueAfterMs: 1 }, STATS, REQUEST)).not.toThrow();
  });
});

describe("withEventFlush", () => {
  it("flushes after every invocation, also one that threw, and never fails because of it", async () => {
    const flushes: number[] = [];
    const result: RunResult = { kind: "gone" };
    const publisher = {
      flush: async (deadlineMs: number) => {
        flushes.push(deadlineMs);
        if (flushes.length === 2) throw new Error("flush broke");
        return { sent: 0, failed: 0, dropped: 0, pending: 0, timedOut: false };
      },
    };
    const afterFlush = vi.fn();
    let fail = false;
    const runner = withEventFlush(
      {
        runWithStats: async () => {
          if (fail) throw new Error("phase error");
          return { result, stats: STATS };
        },
      },
      { publisher, deadlineMs: 1_500, afterFlush },
    );
    expect(await runner.run(REQUEST)).toEqual(result);
    expect(await runner.runWithStats(REQUEST)).toEqual({ result, stats: STATS });
    fail = true;
    await expect(runner.run(REQUEST)).rejects.toThrow("phase error");
    expect(flushes).toEqual([1_500, 1_500, 1_500]);
    expect(afterFlush).toHaveBeenCalledTimes(2);
  });
});

function captureError(f: () => unknown): Error {
  try {
    f();
  } catch (error) {
    return error as Error;
  }
  throw new Error("expected an error");
}

describe("events settings from the environment", () => {
  it("are off unless DVM_EVENTS_SINK says otherwise", () => {
    expect(eventsConfigFromEnv({})).toBeUndefined();
    expect(eventsConfigFromEnv({ [ENV.eventsSink]: "none" })).toBeUndefined();
  });

  it("pick the sink and its settings", () => {
    const bridge = eventsConfigFromEnv({ [ENV.eventsSink]: "eventbridge" })!;
    expect(bridge.sink).toBeInstanceOf(EventBridgeSink);
    expect(bridge).toMatchObject({ source: "dvm-serverless", flushDeadlineMs: 1_500, maxQueue: 100 });
    const http = eventsConfigFromEnv({
      [ENV.eventsSink]: "http",
      [ENV.eventsHttpUrl]: "https://example.com/x",
      [ENV.eventsSource]: "dvm/dev",
      [ENV.eventsFlushMs]: "800",
    })!;
    expect(http.sink).toBeInstanceOf(HttpEventSink);
    expect(http).toMatchObject({ source: "dvm/dev", flushDeadlineMs: 800 });
  });

  it.each([
    [{ [ENV.eventsSink]: "kafka" }, ENV.eventsSink, "must be one of eventbridge, http, none"],
    [{ [ENV.eventsSink]: "http" }, ENV.eventsHttpUrl, "must be set when DVM_EVENTS_SINK is http"],
    [{ [ENV.eventsSink]: "http", [ENV.eventsHttpUrl]: "not a url with a t0ken" }, ENV.eventsHttpUrl, "is not a usable http(s) URL"],
    [{ [ENV.eventsSink]: "http", [ENV.eventsHttpUrl]: "ftp://x/t0ken" }, ENV.eventsHttpUrl, "is not a usable http(s) URL"],
    [{ [ENV.eventsSink]: "http", [ENV.eventsHttpUrl]: "https://x", [ENV.eventsHttpMode]: "batch" }, ENV.eventsHttpMode, "must be structured or binary"],
    [{ [ENV.eventsSink]: "eventbridge", [ENV.eventsFlushMs]: "-1" }, ENV.eventsFlushMs, "must be a whole number"],
    [{ [ENV.eventsSink]: "eventbridge", [ENV.eventsQueue]: "0" }, ENV.eventsQueue, "Too small"],
  ])("name a bad setting (%o) without quoting the URL", (env, variable, problem) => {
    const error = captureError(() => eventsConfigFromEnv(env));
    expect(error).toBeInstanceOf(ConfigurationError);
    expect(error).toMatchObject({ variable });
    expect(error.message).toContain(`${variable}: ${problem}`);
    expect(error.message).not.toContain("t0ken");
  });

  it("turn events off, with an error in the log, when misconfigured: the phase function still runs", () => {
    const log = capturingLogger();
    expect(phaseEventsFromEnv({ [ENV.eventsSink]: "http" }, log)).toBeUndefined();
    expect(log.lines).toEqual([expect.objectContaining({ level: "error", message: expect.stringContaining("outgoing events are off") })]);
  });

  it("write the counts added since the last flush as metrics, and nothing when none changed", () => {
    const written: Record<string, number>[] = [];
    let current: Record<string, number> = {};
    const metrics: PublishingMetrics = {
      addDimension: (name, value) => void (current[`dim:${name}`] = value as unknown as number),
      addMetric: (name, _unit, value) => void (current[name] = value),
      publishStoredMetrics: () => {
        written.push(current);
        current = {};
      },
    };
    const events = phaseEventsFromEnv({ [ENV.eventsSink]: "http", [ENV.eventsHttpUrl]: "http://127.0.0.1:9/" }, capturingLogger(), { metrics })!;
    events.recordFlush({ sent: 2, failed: 1, dropped: 0, pending: 0, timedOut: false });
    events.recordFlush({ sent: 2, failed: 1, dropped: 0, pending: 0, timedOut: false });
    events.recordFlush({ sent: 5, failed: 1, dropped: 3, pending: 0, timedOut: false });
    expect(written).toEqual([
      { "dim:Sink": "http", EventsSent: 2, EventsFailed: 1, EventsDropped: 0 },
      { "dim:Sink": "http", EventsSent: 3, EventsFailed: 0, EventsDropped: 3 },
    ]);
  });
});
