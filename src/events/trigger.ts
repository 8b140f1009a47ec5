/**
 * The trigger: a CloudEvent asking for a migration (io.dvm-serverless.migration.requested.v1) becomes
 * one DirectVolumeMigration on the host cluster, however often the event is delivered.
 *
 * Order of checks: size (413), CloudEvents envelope (400), type (400), source allow-list (403), data
 * schema (400), the namespace rule (403, src/events/namespaces.ts), the event's age (400, `time`), then
 * the create. Nothing is written before every check has passed. The DVM's name is derived from the
 * event's source and id (names.ts), so a redelivery hits AlreadyExists and gets the DVM that is there
 * (200); a DVM of that name created for another event (a hash collision) is 409. Each handled event is
 * remembered beyond its DVM's life (handledEvents.ts): a replay after the DVM was deleted is 409, never a
 * second migration, and an event older than the records last is refused for its age.
 *
 * A schedule's input (schedule.ts) goes through the same checks in its own shape: its source is
 * "schedule:<name>" (on the same allow-list), its time the scheduled time, its identity (source, scheduled
 * time) and its DVM's name derived from both; a completed run beyond the schedule's history limit is
 * deleted once the run of this time exists.
 *
 * Replies are plain { status, body } values; src/aws/triggerHandler.ts turns them into an API Gateway
 * response or an EventBridge invocation result.
 */

import { KubeApiError } from "../kube/errors";
import { LedgerUnavailableError } from "../ledger/errors";
import { type Clock, systemClock } from "../lib/clock";
import { errorText } from "../lib/errorMessage";
import { fieldIssues } from "../lib/issues";
import { type Logger, silentLogger } from "../lib/log";
import type { EventIdentity, HandledEvents } from "./handledEvents";
import {
  DEFAULT_MAX_EVENT_BYTES,
  type HttpMessage,
  type Received,
  type ReceivedEvent,
  type Rejection,
  receiveEventBridgeEvent,
  receiveHttpEvent,
  rejection,
} from "./incoming";
import type { MigrationStore, NewMigration } from "./migrationStore";
import { createdForEvent, dvmNameForEvent, EVENT_ANNOTATION } from "./names";
import { type TriggerNamespaceRule, triggerNamespaceRule } from "./namespaces";
import {
  DEFAULT_SCHEDULE_HISTORY_LIMIT,
  parseScheduledStage,
  runsBeyondHistory,
  SCHEDULE_LABEL,
  SCHEDULED_TIME_ANNOTATION,
  scheduledStageName,
} from "./schedule";
import { DEFAULT_NAME_PREFIX, MIGRATION_REQUESTED, MigrationRequestedDataSchema } from "./schema";
import { parseSourceAllowList, type SourceAllowList } from "./sources";

/** @internal exported for its tests */
export const CREATED_BY_LABEL = "app.kubernetes.io/created-by";
export const CREATED_BY = "dvm-serverless-trigger";

/** One day: far beyond Lambda's and EventBridge's own retries, far below the records' retention. */
export const DEFAULT_MAX_EVENT_AGE_SECONDS = 24 * 60 * 60;
/** A sender's clock may run ahead of ours by this much. */
const MAX_CLOCK_SKEW_MS = 5 * 60 * 1000;

export interface MigrationRef {
  namespace: string;
  name: string;
  uid: string;
}

export type TriggerReply =
  | { status: 201 | 200; body: { result: "created" | "exists"; migration: MigrationRef; event: { source: string; id: string; type: string } } }
  | { status: 400 | 403 | 409 | 413 | 415 | 422; body: { error: string; field: string; message: string; issues?: { field: string; message: string }[] } }
  /** 503: try again later (the API server is unavailable); 500: a fault of this deployment (RBAC, config). */
  | { status: 500 | 503; body: { error: string; message: string }; retryAfterSeconds?: number };

export interface TriggerOptions {
  /** The host cluster's DVMs; a function so the kubeconfig is loaded only once an event passed the checks. */
  store: () => Promise<MigrationStore>;
  /** Default: none (every event is refused; see sources.ts). */
  allowedSources?: SourceAllowList;
  /** Where events may create DVMs. Default: nowhere (every event is refused). */
  namespaces?: TriggerNamespaceRule;
  /** The events handled before, kept beyond their DVMs' life (src/ledger/handledEventRecords.ts). */
  handledEvents: HandledEvents;
  /** The oldest event accepted, by its `time`; default DEFAULT_MAX_EVENT_AGE_SECONDS. Keep it below the records' retention. */
  maxEventAgeSeconds?: number;
  clock?: Clock;
  /** Default DEFAULT_MAX_EVENT_BYTES (256 KiB). */
  maxBytes?: number;
  log?: Logger;
  /** Completed Stage DVMs kept per schedule; default DEFAULT_SCHEDULE_HISTORY_LIMIT. */
  scheduleHistoryLimit?: number;
}

/** The identity of a schedule's request: its type in replies, records and annotations. */
export const SCHEDULED_STAGE = "io.dvm-serverless.schedule.fired.v1";

/** What identifies one request: a CloudEvent's source, id and type, or a schedule's. */
type RequestIdentity = Pick<ReceivedEvent, "source" | "id" | "type">;

export interface Trigger {
  handleHttp(message: HttpMessage): Promise<TriggerReply>;
  handleEventBridge(event: unknown): Promise<TriggerReply>;
  /** A schedule's input (src/events/schedule.ts): one Stage DVM per schedule and scheduled time. */
  handleSchedule(input: unknown): Promise<TriggerReply>;
  /** For callers that parsed the event themselves (tests, other transports). */
  handle(received: Received): Promise<TriggerReply>;
}

export function createTrigger(options: TriggerOptions): Trigger {
  const allowed = options.allowedSources ?? parseSourceAllowList("");
  const namespaces = options.namespaces ?? triggerNamespaceRule({ allowedNamespaces: [], adminNamespaces: [], allowAdminNamespaces: false });
  const log = options.log ?? silentLogger;
  const limits = options.maxBytes === undefined ? {} : { maxBytes: options.maxBytes };
  const clock = options.clock ?? systemClock;
  const maxAgeSeconds = options.maxEventAgeSeconds ?? DEFAULT_MAX_EVENT_AGE_SECONDS;

  const refuse = (r: Rejection, event?: RequestIdentity): TriggerReply => {
    log.warn(`event refused: ${r.field}: ${r.message}`, {
      status: r.status,
      field: r.field,
      ...(event ? { source: event.source, id: event.id, type: event.type } : {}),
    });
    return { status: r.status, body: { error: r.error, field: r.field, message: r.message, issues: r.issues } };
  };

  const handle = async (received: Received): Promise<TriggerReply> => {
    if (!received.ok) return refuse(received.rejection);
    const { event } = received;
    if (event.type !== MIGRATION_REQUESTED) {
      const field = event.mode === "eventbridge" ? "detail-type" : event.mode === "eventbridge-cloudevent" ? "detail.type" : "type";
      return refuse(rejection(400, "invalid event", [{ field, message: `must be ${MIGRATION_REQUESTED} (got ${event.type})` }]), event);
    }
    if (!allowed.allows(event.source)) {
      const field = event.mode === "eventbridge-cloudevent" ? "detail.source" : "source";
      return refuse(
        rejection(403, "source not allowed", [{ field, message: `source ${JSON.stringify(event.source)} is not in TRIGGER_ALLOWED_SOURCES` }]),
        event,
      );
    }
    const data = MigrationRequestedDataSchema.safeParse(event.data);
    if (!data.success) return refuse(rejection(400, "invalid event", fieldIssues(event.dataField, data.error)), event);

    const { namespace, namePrefix, spec } = data.data;
    const namespaceRefusal = namespaces.refusal(namespace);
    if (namespaceRefusal !== undefined) {
      return refuse(rejection(403, "namespace not allowed", [{ field: `${event.dataField}.namespace`, message: namespaceRefusal }]), event);
    }
    const ageRefusal = eventAgeRefusal(event.time, clock.now(), maxAgeSeconds);
    if (ageRefusal !== undefined) {
      const field = event.mode === "eventbridge-cloudevent" ? "detail.time" : "time";
      return refuse(rejection(400, "invalid event", [{ field, message: ageRefusal }]), event);
    }
    const migration: NewMigration = {
      namespace,
      name: dvmNameForEvent(event, namePrefix ?? DEFAULT_NAME_PREFIX),
      annotations: { [EVENT_ANNOTATION.source]: event.source, [EVENT_ANNOTATION.id]: event.id, [EVENT_ANNOTATION.type]: event.type },
      labels: { [CREATED_BY_LABEL]: CREATED_BY },
      spec,
    };
    const eventLog = log.child({ source: event.source, id: event.id, dvm: `${namespace}/${migration.name}` });
    try {
      return await create(await options.store(), options.handledEvents, migration, event, eventLog, clock);
    } catch (error) {
      return failure(error, eventLog, event.dataField);
    }
  };

  const historyLimit = options.scheduleHistoryLimit ?? DEFAULT_SCHEDULE_HISTORY_LIMIT;
  const maxBytes = options.maxBytes ?? DEFAULT_MAX_EVENT_BYTES;

  const handleSchedule = async (input: unknown): Promise<TriggerReply> => {
    const bytes = Buffer.byteLength(JSON.stringify(input) ?? "", "utf8");
    if (bytes > maxBytes) return refuse(rejection(413, "event too large", [{ field: "event", message: `${bytes} bytes, more than the limit of ${maxBytes}` }]));
    const parsed = parseScheduledStage(input);
    if (!parsed.ok) return refuse(rejection(400, "invalid event", parsed.issues));
    const { input: request, scheduledAt } = parsed;
    // The time as one canonical text: the same time written another way is the same run.
    const identity: RequestIdentity = { source: `schedule:${request.schedule}`, id: scheduledAt.toISOString(), type: SCHEDULED_STAGE };
    if (!allowed.allows(identity.source)) {
      const message = `source ${JSON.stringify(identity.source)} is not in TRIGGER_ALLOWED_SOURCES (a schedule's source is "schedule:<name>")`;
      return refuse(rejection(403, "source not allowed", [{ field: "schedule", message }]), identity);
    }
    const namespaceRefusal = namespaces.refusal(request.namespace);
    if (namespaceRefusal !== undefined) return refuse(rejection(403, "namespace not allowed", [{ field: "namespace", message: namespaceRefusal }]), identity);
    const ageRefusal = eventAgeRefusal(identity.id, clock.now(), maxAgeSeconds);
    if (ageRefusal !== undefined) return refuse(rejection(400, "invalid event", [{ field: "scheduledTime", message: ageRefusal }]), identity);
    const migration: NewMigration = {
      namespace: request.namespace,
      name: scheduledStageName(request.schedule, scheduledAt),
      annotations: {
        [EVENT_ANNOTATION.source]: identity.source,
        [EVENT_ANNOTATION.id]: identity.id,
        [EVENT_ANNOTATION.type]: identity.type,
        [SCHEDULED_TIME_ANNOTATION]: identity.id,
      },
      labels: { [CREATED_BY_LABEL]: CREATED_BY, [SCHEDULE_LABEL]: request.schedule },
      spec: request.spec,
    };
    const eventLog = log.child({ schedule: request.schedule, scheduledTime: identity.id, dvm: `${request.namespace}/${migration.name}` });
    try {
      const store = await options.store();
      const reply = await create(store, options.handledEvents, migration, identity, eventLog, clock);
      if (reply.status === 201 || reply.status === 200)
        await applyHistoryLimit(store, request.namespace, identity.source, request.schedule, historyLimit, eventLog);
      return reply;
    } catch (error) {
      return failure(error, eventLog, "");
    }
  };

  return {
    handle,
    handleSchedule,
    handleHttp: (message) => handle(receiveHttpEvent(message, limits)),
    handleEventBridge: (event) => handle(receiveEventBridgeEvent(event, limits)),
  };
}

/** Why an event's `time` makes it too old (or too far ahead) to act on; undefined when it is recent. */
function eventAgeRefusal(time: string | undefined, now: number, maxAgeSeconds: number): string | undefined {
  const at = time === undefined ? Number.NaN : Date.parse(time);
  if (Number.isNaN(at)) return "required: an RFC 3339 timestamp of when the request was made";
  if (now - at > maxAgeSeconds * 1000) {
    return `the event is older than ${maxAgeSeconds} s (TRIGGER_MAX_EVENT_AGE_SECONDS): an old request is never acted on; send a new event`;
  }
  if (at - now > MAX_CLOCK_SKEW_MS) return `the event's time is more than ${MAX_CLOCK_SKEW_MS / 60_000} minutes ahead of the trigger's clock`;
  return undefined;
}

async function create(
  store: MigrationStore,
  handledEvents: HandledEvents,
  migration: NewMigration,
  event: RequestIdentity,
  log: Logger,
  clock: Clock,
): Promise<TriggerReply> {
  const { namespace, name } = migration;
  const identity = { source: event.source, id: event.id, type: event.type };
  const eventKey: EventIdentity = { source: event.source, id: event.id };
  const handled = await handledEvents.recall(eventKey);
  if (handled) {
    const existing = await store.get(handled.namespace, handled.name);
    const migrationRef = { namespace: handled.namespace, name: handled.name, uid: handled.uid };
    if (existing?.uid === handled.uid) {
      log.info("event redelivered: the migration exists already", { uid: handled.uid });
      return { status: 200, body: { result: "exists", migration: migrationRef, event: identity } };
    }
    log.warn("event replayed after its migration was deleted: refused", { uid: handled.uid, handledAt: handled.handledAt });
    return {
      status: 409,
      body: {
        error: "event already handled",
        field: "id",
        message:
          `this event created DirectVolumeMigration ${handled.namespace}/${handled.name} (uid ${handled.uid}) at ${handled.handledAt}, ` +
          "which no longer exists; a replayed event never migrates again: send a new event (another id) to migrate again",
      },
    };
  }
  const remembered = async (uid: string) => handledEvents.remember(eventKey, { namespace, name, uid, handledAt: new Date(clock.now()).toISOString() });
  // Two rounds: the DVM can be deleted between our AlreadyExists and the read that follows it.
  for (let round = 0; round < 2; round++) {
    const created = await store.create(migration);
    if (created.kind === "created") {
      log.info("migration created", { uid: created.uid });
      await remembered(created.uid);
      return { status: 201, body: { result: "created", migration: { namespace, name, uid: created.uid }, event: identity } };
    }
    const existing = await store.get(namespace, name);
    if (!existing) continue;
    if (createdForEvent(existing.annotations, event)) {
      // Created by an earlier delivery that ended before it remembered the event.
      log.info("event redelivered: the migration exists already", { uid: existing.uid });
      await remembered(existing.uid);
      return { status: 200, body: { result: "exists", migration: { namespace, name, uid: existing.uid }, event: identity } };
    }
    log.error("name collision: the DVM of this name was created for another event", { uid: existing.uid });
    return {
      status: 409,
      body: {
        error: "name collision",
        field: "id",
        message: `DirectVolumeMigration ${namespace}/${name} exists and was not created for this event; send it with another id`,
      },
    };
  }
  return {
    status: 503,
    body: { error: "unavailable", message: `DirectVolumeMigration ${namespace}/${name} kept appearing and disappearing; try again` },
    retryAfterSeconds: 5,
  };
}

/**
 * Deletes the schedule's completed runs beyond the newest `limit` completed ones; a run in progress is
 * never deleted. Best effort: a failure is logged and the next firing tries again.
 */
async function applyHistoryLimit(store: MigrationStore, namespace: string, source: string, schedule: string, limit: number, log: Logger): Promise<void> {
  try {
    const runs = (await store.listLabelled(namespace, SCHEDULE_LABEL, schedule))
      // Only runs this schedule's requests created: a label alone could be put on any DVM.
      .filter((dvm) => dvm.annotations[EVENT_ANNOTATION.source] === source && !Number.isNaN(Date.parse(dvm.annotations[SCHEDULED_TIME_ANNOTATION] ?? "")))
      .map((dvm) => ({ name: dvm.name, uid: dvm.uid, completed: dvm.completed, scheduledTime: dvm.annotations[SCHEDULED_TIME_ANNOTATION]! }));
    for (const run of runsBeyondHistory(runs, limit)) {
      await store.delete(namespace, run.name, run.uid);
      log.info("scheduled run deleted: beyond the schedule's history limit", { deleted: run.name, scheduledTime: run.scheduledTime, limit });
    }
  } catch (error) {
    log.warn("could not apply the schedule's history limit; the next run tries again", { error: errorText(error) });
  }
}

function failure(error: unknown, log: Logger, dataField: string): TriggerReply {
  const message = errorText(error);
  const field = (name: string) => (dataField ? `${dataField}.${name}` : name);
  if (error instanceof LedgerUnavailableError) {
    log.warn("the ledger is unavailable; the sender should retry", { error: message });
    return { status: 503, body: { error: "unavailable", message: "the trigger's event records are unavailable; try again" }, retryAfterSeconds: 5 };
  }
  if (error instanceof KubeApiError) {
    if (error.isNotFound && /namespaces? "[^"]*" not found/.test(message)) {
      return {
        status: 422,
        body: { error: "namespace not found", field: field("namespace"), message: "the namespace does not exist on the host cluster" },
      };
    }
    // The CRD's own schema refused the object (it mirrors DvmSpecSchema, so this is rare).
    if (error.statusCode === 422) return { status: 422, body: { error: "refused by the API server", field: field("spec"), message } };
    // Throttled, unreachable, or a conflict a fresh try resolves.
    if (error.disposition === "retryable") {
      log.warn("API server unavailable; the sender should retry", { error: message });
      return { status: 503, body: { error: "unavailable", message: "the host cluster is unavailable; try again" }, retryAfterSeconds: 5 };
    }
  }
  log.error("could not create the migration", { error: message });
  return { status: 500, body: { error: "internal error", message: "the migration could not be created; see the trigger function's log" } };
}
