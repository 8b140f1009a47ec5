/**
 * The trigger: a CloudEvent asking for a migration (io.dvm-serverless.migration.requested.v1) becomes
 * one DirectVolumeMigration on the host cluster, however often the event is delivered.
 *
 * Order of checks: size (413), CloudEvents envelope (400), type (400), source allow-list (403), data
 * schema (400), the namespace rule (403, src/events/namespaces.ts), then the create. Nothing is written before every check has passed. The DVM's name is
 * derived from the event's source and id (names.ts), so a redelivery hits AlreadyExists and gets the
 * DVM that is there (200); a DVM of that name created for another event (a hash collision) is 409.
 *
 * Replies are plain { status, body } values; src/aws/triggerHandler.ts turns them into an API Gateway
 * response or an EventBridge invocation result.
 */

import { fieldIssues } from "../issues";
import { KubeApiError } from "../kube/errors";
import { type Logger, silentLogger } from "../log";
import { type HttpMessage, type Received, type ReceivedEvent, type Rejection, receiveEventBridgeEvent, receiveHttpEvent, rejection } from "./incoming";
import type { MigrationStore, NewMigration } from "./migrationStore";
import { createdForEvent, dvmNameForEvent, EVENT_ANNOTATION } from "./names";
import { type TriggerNamespaceRule, triggerNamespaceRule } from "./namespaces";
import { DEFAULT_NAME_PREFIX, MIGRATION_REQUESTED, MigrationRequestedDataSchema } from "./schema";
import { parseSourceAllowList, type SourceAllowList } from "./sources";

export const CREATED_BY_LABEL = "app.kubernetes.io/created-by";
export const CREATED_BY = "dvm-serverless-trigger";

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
  /** Default DEFAULT_MAX_EVENT_BYTES (256 KiB). */
  maxBytes?: number;
  log?: Logger;
}

export interface Trigger {
  handleHttp(message: HttpMessage): Promise<TriggerReply>;
  handleEventBridge(event: unknown): Promise<TriggerReply>;
  /** For callers that parsed the event themselves (tests, other transports). */
  handle(received: Received): Promise<TriggerReply>;
}

export function createTrigger(options: TriggerOptions): Trigger {
  const allowed = options.allowedSources ?? parseSourceAllowList("");
  const namespaces = options.namespaces ?? triggerNamespaceRule({ allowedNamespaces: [], adminNamespaces: [], allowAdminNamespaces: false });
  const log = options.log ?? silentLogger;
  const limits = options.maxBytes === undefined ? {} : { maxBytes: options.maxBytes };

  const refuse = (r: Rejection, event?: ReceivedEvent): TriggerReply => {
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
    const migration: NewMigration = {
      namespace,
      name: dvmNameForEvent(event, namePrefix ?? DEFAULT_NAME_PREFIX),
      annotations: { [EVENT_ANNOTATION.source]: event.source, [EVENT_ANNOTATION.id]: event.id, [EVENT_ANNOTATION.type]: event.type },
      labels: { [CREATED_BY_LABEL]: CREATED_BY },
      spec,
    };
    const eventLog = log.child({ source: event.source, id: event.id, dvm: `${namespace}/${migration.name}` });
    try {
      return await create(await options.store(), migration, event, eventLog);
    } catch (error) {
      return failure(error, eventLog, event.dataField);
    }
  };

  return {
    handle,
    handleHttp: (message) => handle(receiveHttpEvent(message, limits)),
    handleEventBridge: (event) => handle(receiveEventBridgeEvent(event, limits)),
  };
}

async function create(store: MigrationStore, migration: NewMigration, event: ReceivedEvent, log: Logger): Promise<TriggerReply> {
  const { namespace, name } = migration;
  const identity = { source: event.source, id: event.id, type: event.type };
  // Two rounds: the DVM can be deleted between our AlreadyExists and the read that follows it.
  for (let round = 0; round < 2; round++) {
    const created = await store.create(migration);
    if (created.kind === "created") {
      log.info("migration created", { uid: created.uid });
      return { status: 201, body: { result: "created", migration: { namespace, name, uid: created.uid }, event: identity } };
    }
    const existing = await store.get(namespace, name);
    if (!existing) continue;
    if (createdForEvent(existing.annotations, event)) {
      log.info("event redelivered: the migration exists already", { uid: existing.uid });
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

function failure(error: unknown, log: Logger, dataField: string): TriggerReply {
  const message = error instanceof Error ? error.message : String(error);
  if (error instanceof KubeApiError) {
    if (error.isNotFound && /namespaces? "[^"]*" not found/.test(message)) {
      return {
        status: 422,
        body: { error: "namespace not found", field: `${dataField}.namespace`, message: "the namespace does not exist on the host cluster" },
      };
    }
    // The CRD's own schema refused the object (it mirrors DvmSpecSchema, so this is rare).
    if (error.statusCode === 422) return { status: 422, body: { error: "refused by the API server", field: `${dataField}.spec`, message } };
    if (error.isTransient) {
      log.warn("API server unavailable; the sender should retry", { error: message });
      return { status: 503, body: { error: "unavailable", message: "the host cluster is unavailable; try again" }, retryAfterSeconds: 5 };
    }
  }
  log.error("could not create the migration", { error: message });
  return { status: 500, body: { error: "internal error", message: "the migration could not be created; see the trigger function's log" } };
}
