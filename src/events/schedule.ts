/**
 * Scheduled stages: a schedule (EventBridge Scheduler, or a `schedule` rule of serverless.yml) invokes
 * the trigger with its input only, so the input carries the schedule's name, the scheduled time and the
 * migration request (docs/events.md, "Scheduled stages"):
 *
 *   { "schedule": "nightly-shop", "scheduledTime": "<aws.scheduler.scheduled-time>",
 *     "namespace": "shop", "spec": { ...a Stage DVM's spec... } }
 *
 * EventBridge Scheduler puts the time in with its context attribute; a rule maps the event's `time` with
 * an input transformer. One Stage DVM per scheduled time: its name is derived from the schedule and the
 * time only, so a second delivery of the same time finds the DVM it created.
 */
import { z } from "zod";
import { DvmSpecSchema } from "../dvm/types";
import type { FieldIssue } from "../lib/issues";
import { fieldIssues } from "../lib/issues";

/** The label that groups a schedule's DVMs, and the annotation with each one's scheduled time. */
export const SCHEDULE_LABEL = "events.dvm-serverless.io/schedule";
export const SCHEDULED_TIME_ANNOTATION = "events.dvm-serverless.io/scheduled-time";

/** `<schedule>-<yyyymmdd>-<hhmmss>`: 40 + 16 characters stay within a DNS label's 63. */
export const MAX_SCHEDULE_NAME = 40;

/** The completed runs of a schedule kept by default (the trigger's TRIGGER_SCHEDULE_HISTORY_LIMIT). */
export const DEFAULT_SCHEDULE_HISTORY_LIMIT = 3;
export const MAX_SCHEDULE_HISTORY_LIMIT = 100;

const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/i;

export const ScheduledStageInputSchema = z.strictObject({
  /** The schedule's name: a DNS-1123 label of at most 40 characters. */
  schedule: z
    .string()
    .min(1)
    .max(MAX_SCHEDULE_NAME)
    .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, "must be a DNS-1123 label (lower-case letters, digits and '-')"),
  /** When the schedule fired, as it says: Scheduler's <aws.scheduler.scheduled-time>, a rule's `time`. */
  scheduledTime: z
    .string()
    .max(64)
    .regex(RFC3339, 'must be an RFC 3339 time such as "2026-12-03T02:00:00Z" (use <aws.scheduler.scheduled-time> or the rule event\'s $.time)'),
  /** Namespace of the host cluster where the Stage DVMs are created. */
  namespace: z
    .string()
    .min(1)
    .max(63)
    .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, "must be a DNS-1123 label"),
  /** The DVM's spec; migrationType is Stage (or absent, which means Stage). */
  spec: DvmSpecSchema.refine((spec) => spec.migrationType === undefined || spec.migrationType === "Stage", {
    path: ["migrationType"],
    message: "must be Stage (or absent): a schedule runs stages; the cut-over is created by hand",
  }),
});
export type ScheduledStageInput = z.infer<typeof ScheduledStageInputSchema>;

/** Whether an invocation's payload is a schedule's input (and not an HTTP request or an EventBridge event). */
export function isScheduledStageInput(event: unknown): boolean {
  return typeof event === "object" && event !== null && !Array.isArray(event) && "schedule" in event && !("detail-type" in event);
}

export type ParsedSchedule = { ok: true; input: ScheduledStageInput; scheduledAt: Date } | { ok: false; issues: FieldIssue[] };

/** The input checked, each problem naming its field (the whole input is the event: no prefix). */
export function parseScheduledStage(event: unknown): ParsedSchedule {
  const parsed = ScheduledStageInputSchema.safeParse(event);
  if (!parsed.success) return { ok: false, issues: fieldIssues("", parsed.error) };
  const scheduledAt = new Date(parsed.data.scheduledTime);
  if (Number.isNaN(scheduledAt.getTime())) return { ok: false, issues: [{ field: "scheduledTime", message: "is not a valid time" }] };
  return { ok: true, input: { ...parsed.data, spec: { ...parsed.data.spec, migrationType: "Stage" } }, scheduledAt };
}

/**
 * The Stage DVM's name for one scheduled time: `<schedule>-<yyyymmdd>-<hhmmss>` in UTC. The same time
 * written another way ("...02:00:00Z", "...02:00:00.000Z", "...03:00:00+01:00") gives the same name.
 */
export function scheduledStageName(schedule: string, scheduledAt: Date): string {
  const iso = scheduledAt.toISOString(); // 2026-12-03T02:00:00.000Z
  return `${schedule}-${iso.slice(0, 10).replaceAll("-", "")}-${iso.slice(11, 19).replaceAll(":", "")}`;
}

/** A run of a schedule as the history limit sees it. */
export interface ScheduledRun {
  name: string;
  uid: string;
  scheduledTime: string;
  completed: boolean;
}

/**
 * The completed runs beyond the newest `limit` completed ones, oldest first: what the history limit
 * deletes. A run still in progress is never among them, whatever its age.
 */
export function runsBeyondHistory(runs: readonly ScheduledRun[], limit: number): ScheduledRun[] {
  const completed = runs.filter((run) => run.completed).sort((a, b) => Date.parse(b.scheduledTime) - Date.parse(a.scheduledTime));
  return completed.slice(limit).reverse();
}
