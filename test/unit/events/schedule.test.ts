/**
 * Scheduled stages (src/events/schedule.ts, the trigger's handleSchedule): the input's checks, each
 * naming its field; one Stage DVM per schedule and scheduled time, named from both; the history limit.
 */
import { describe, expect, it } from "vitest";
import { createTriggerHandler } from "../../../src/aws/triggerHandler";
import type { CreateResult, ExistingMigration, LabelledMigration, MigrationStore, NewMigration } from "../../../src/events/migrationStore";
import { triggerNamespaceRule } from "../../../src/events/namespaces";
import {
  isScheduledStageInput,
  parseScheduledStage,
  runsBeyondHistory,
  SCHEDULE_LABEL,
  SCHEDULED_TIME_ANNOTATION,
  scheduledStageName,
} from "../../../src/events/schedule";
import { parseSourceAllowList } from "../../../src/events/sources";
import { createTrigger, SCHEDULED_STAGE } from "../../../src/events/trigger";
import { silentLogger } from "../../../src/lib/log";
import { MemoryHandledEvents } from "../../support/memoryHandledEvents";

const SPEC = { persistentVolumeClaims: [{ name: "db", namespace: "team-a", targetStorageClass: "fast", targetAccessModes: ["ReadWriteOnce" as const] }] };
const NOW = Date.parse("2026-12-03T02:00:30Z");
const input = (over: Record<string, unknown> = {}) => ({
  schedule: "nightly",
  scheduledTime: "2026-12-03T02:00:00Z",
  namespace: "team-a",
  spec: SPEC,
  ...over,
});

class MemoryStore implements MigrationStore {
  readonly objects = new Map<string, NewMigration & { uid: string }>();
  readonly completed = new Set<string>();
  creates = 0;
  private next = 0;

  async create(migration: NewMigration): Promise<CreateResult> {
    this.creates++;
    const key = `${migration.namespace}/${migration.name}`;
    if (this.objects.has(key)) return { kind: "exists" };
    const uid = `uid-${++this.next}`;
    this.objects.set(key, { ...migration, uid });
    return { kind: "created", uid };
  }

  async get(namespace: string, name: string): Promise<ExistingMigration | undefined> {
    const found = this.objects.get(`${namespace}/${name}`);
    return found && { uid: found.uid, annotations: found.annotations };
  }

  async listLabelled(namespace: string, label: string, value: string): Promise<LabelledMigration[]> {
    return [...this.objects.values()]
      .filter((o) => o.namespace === namespace && o.labels[label] === value)
      .map((o) => ({ name: o.name, uid: o.uid, annotations: o.annotations, completed: this.completed.has(o.name) }));
  }

  async delete(namespace: string, name: string, uid: string): Promise<void> {
    if (this.objects.get(`${namespace}/${name}`)?.uid === uid) this.objects.delete(`${namespace}/${name}`);
  }
}

function scheduleTrigger(options: { store?: MemoryStore; sources?: string; historyLimit?: number; now?: () => number } = {}) {
  const store = options.store ?? new MemoryStore();
  const trigger = createTrigger({
    store: async () => store,
    handledEvents: new MemoryHandledEvents(),
    allowedSources: parseSourceAllowList(options.sources ?? "schedule:*"),
    namespaces: triggerNamespaceRule({ allowedNamespaces: ["team-*"], adminNamespaces: ["dvm-system"], allowAdminNamespaces: false }),
    clock: { now: options.now ?? (() => NOW) },
    ...(options.historyLimit !== undefined ? { scheduleHistoryLimit: options.historyLimit } : {}),
  });
  return { trigger, store };
}

describe("a scheduled stage's name", () => {
  it("is the schedule's name and the scheduled time in UTC, the same however the time is written", () => {
    const at = (text: string) => scheduledStageName("nightly", new Date(text));
    expect(at("2026-12-03T02:00:00Z")).toBe("nightly-20261203-020000");
    expect(at("2026-12-03T02:00:00.000Z")).toBe("nightly-20261203-020000");
    expect(at("2026-12-03T03:00:00+01:00")).toBe("nightly-20261203-020000");
    expect(at("2026-12-03T02:00:01Z")).toBe("nightly-20261203-020001");
    // The longest schedule name still gives a DNS label.
    expect(scheduledStageName("s".repeat(40), new Date("2026-12-03T02:00:00Z")).length).toBeLessThanOrEqual(63);
  });
});

describe("a schedule's input", () => {
  it("is told apart from HTTP requests and EventBridge events", () => {
    expect(isScheduledStageInput(input())).toBe(true);
    expect(isScheduledStageInput({ "detail-type": "Scheduled Event", schedule: "x" })).toBe(false);
    expect(isScheduledStageInput({ requestContext: { http: {} } })).toBe(false);
    expect(isScheduledStageInput([input()])).toBe(false);
  });

  it("parses into a Stage request", () => {
    const parsed = parseScheduledStage(input());
    expect(parsed).toMatchObject({ ok: true, input: { schedule: "nightly", namespace: "team-a", spec: { migrationType: "Stage" } } });
  });

  it.each([
    ["no schedule", { schedule: undefined }, "schedule"],
    ["a schedule name that is no DNS label", { schedule: "Nightly_Run" }, "schedule"],
    ["a schedule name too long for the DVM's name", { schedule: "s".repeat(41) }, "schedule"],
    ["the context attribute left as it is (not a Scheduler target)", { scheduledTime: "<aws.scheduler.scheduled-time>" }, "scheduledTime"],
    ["no scheduled time", { scheduledTime: undefined }, "scheduledTime"],
    ["an impossible date", { scheduledTime: "2026-13-45T02:00:00Z" }, "scheduledTime"],
    ["no namespace", { namespace: undefined }, "namespace"],
    ["a CutOver", { spec: { ...SPEC, migrationType: "CutOver" } }, "spec.migrationType"],
    ["a spec with no volumes", { spec: {} }, "spec.persistentVolumeClaims"],
    ["an unknown key", { extra: 1 }, "extra"],
  ])("refuses %s, naming %s", async (_case, over, field) => {
    const { trigger, store } = scheduleTrigger();
    const reply = await trigger.handleSchedule(input(over));
    expect(reply).toMatchObject({ status: 400, body: { error: "invalid event" } });
    expect((reply.body as { issues: { field: string }[] }).issues.map((i) => i.field)).toContain(field);
    expect(store.creates).toBe(0);
  });

  it("is refused from a schedule not on the allow-list, into a namespace outside the rule, or for a time too old", async () => {
    expect(await scheduleTrigger({ sources: "schedule:weekly" }).trigger.handleSchedule(input())).toMatchObject({ status: 403, body: { field: "schedule" } });
    expect(await scheduleTrigger().trigger.handleSchedule(input({ namespace: "dvm-system" }))).toMatchObject({ status: 403, body: { field: "namespace" } });
    const old = await scheduleTrigger().trigger.handleSchedule(input({ scheduledTime: "2026-11-01T02:00:00Z" }));
    expect(old).toMatchObject({ status: 400, body: { field: "scheduledTime" } });
  });
});

describe("the trigger given a schedule's input", () => {
  it("creates one Stage DVM per scheduled time, however often the time is delivered", async () => {
    const { trigger, store } = scheduleTrigger();
    const first = await trigger.handleSchedule(input());
    const again = await trigger.handleSchedule(input({ scheduledTime: "2026-12-03T02:00:00.000Z" }));
    expect(first).toMatchObject({ status: 201, body: { result: "created", migration: { namespace: "team-a", name: "nightly-20261203-020000" } } });
    expect(again).toMatchObject({ status: 200, body: { result: "exists", migration: { name: "nightly-20261203-020000", uid: "uid-1" } } });
    expect(store.objects.size).toBe(1);
    const dvm = store.objects.get("team-a/nightly-20261203-020000")!;
    expect(dvm.spec.migrationType).toBe("Stage");
    expect(dvm.labels[SCHEDULE_LABEL]).toBe("nightly");
    expect(dvm.annotations[SCHEDULED_TIME_ANNOTATION]).toBe("2026-12-03T02:00:00.000Z");
    expect(first.body).toMatchObject({ event: { source: "schedule:nightly", id: "2026-12-03T02:00:00.000Z", type: SCHEDULED_STAGE } });
  });

  it("keeps the newest completed runs up to the history limit, never deleting a running one", async () => {
    let now = NOW;
    const { trigger, store } = scheduleTrigger({ historyLimit: 2, now: () => now });
    const fire = async (hour: number) => {
      const time = `2026-12-03T${String(hour).padStart(2, "0")}:00:00Z`;
      now = Date.parse(time) + 30_000;
      expect((await trigger.handleSchedule(input({ scheduledTime: time }))).status).toBe(201);
      return `nightly-20261203-${String(hour).padStart(2, "0")}0000`;
    };
    const names = [];
    for (const hour of [1, 2, 3]) names.push(await fire(hour));
    // The 01:00 run is still running; 02:00 and 03:00 completed.
    store.completed.add(names[1]!).add(names[2]!);
    names.push(await fire(4));
    store.completed.add(names[3]!);
    names.push(await fire(5));
    // Completed: 02, 03, 04 -> the newest two (03, 04) stay; 01 runs, 05 is new.
    expect([...store.objects.values()].map((o) => o.name).sort()).toEqual([names[0], names[2], names[3], names[4]]);
  });

  it("leaves DVMs alone that carry the label but were not created by this schedule", async () => {
    const { trigger, store } = scheduleTrigger({ historyLimit: 1 });
    store.objects.set("team-a/planted", {
      namespace: "team-a",
      name: "planted",
      uid: "uid-planted",
      labels: { [SCHEDULE_LABEL]: "nightly" },
      annotations: { [SCHEDULED_TIME_ANNOTATION]: "2026-12-01T02:00:00Z" },
      spec: SPEC,
    });
    store.completed.add("planted");
    await trigger.handleSchedule(input({ scheduledTime: "2026-12-02T02:00:00Z" }));
    store.completed.add("nightly-20261202-020000");
    await trigger.handleSchedule(input());
    expect(store.objects.has("team-a/planted")).toBe(true);
  });

  it("orders runs by scheduled time", () => {
    const run = (name: string, time: string, completed = true) => ({ name, uid: name, scheduledTime: time, completed });
    expect(
      runsBeyondHistory(
        [run("c", "2026-12-03T00:00:00Z"), run("a", "2026-12-01T00:00:00Z"), run("b", "2026-12-02T00:00:00Z"), run("d", "2026-11-01T00:00:00Z", false)],
        1,
      ).map((r) => r.name),
    ).toEqual(["a", "b"]);
  });

  it("is routed by the function's adapter, its reply counted under the schedule transport", async () => {
    const { trigger, store } = scheduleTrigger();
    const dimensions: string[] = [];
    const handler = createTriggerHandler({
      trigger,
      log: silentLogger,
      metrics: { addDimension: (_name: string, value: string) => void dimensions.push(value), addMetric: () => undefined } as never,
    });
    expect(await handler(input())).toMatchObject({ status: 201 });
    expect(await handler({ schedule: "nightly" })).toMatchObject({ status: 400, body: { field: "scheduledTime" } });
    expect(dimensions).toEqual(["schedule", "schedule"]);
    expect(store.objects.size).toBe(1);
  });
});
