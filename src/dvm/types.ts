/**
 * The DirectVolumeMigration resource as this controller reads it. Kubernetes objects enter here as
 * `unknown` and leave as typed values; a spec that does not parse yields an error naming the field.
 */

import { z } from "zod";
import type { PvcRef } from "../contracts/pvcRef";
import { type FieldIssue, fieldIssues } from "../lib/issues";
import { annotationKeyProblem, TRANSFER_POD_ANNOTATION_BOUNDS } from "../transfer/podAnnotations";
import {
  MAX_IMAGE_REFERENCE_LENGTH,
  MAX_PVCS_PER_DVM,
  MAX_QUIESCED_APPLICATIONS,
  MAX_SELECTOR_EXPRESSIONS,
  MAX_SELECTOR_LABELS,
  MAX_SELECTOR_VALUES,
} from "./limits";
import { QUANTITY_PATTERN, quantityValue } from "./quantity";

export const DVM_GROUP = "migration.openshift.io";
export const DVM_VERSION = "v1alpha1";
export const DVM_API_VERSION = `${DVM_GROUP}/${DVM_VERSION}`;
export const DVM_KIND = "DirectVolumeMigration";
export const DVM_PLURAL = "directvolumemigrations";
/** @internal the DVMP kind, for the chaos harness that writes progress records as the baseline does */
export const DVMP_KIND = "DirectVolumeMigrationProgress";
export const DVMP_PLURAL = "directvolumemigrationprogresses";
/**
 * Held on every DVM the controller has started: deleting the DVM (kubectl delete, `dvm cancel`) then
 * waits until its transfer objects are removed from both clusters, and the controller releases it.
 */
export const DVM_FINALIZER = "migration.openshift.io/transfer-cleanup";

const dnsName = z
  .string()
  .min(1)
  .max(253)
  .regex(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/, "must be a DNS-1123 name");
/** A namespace's name is a DNS-1123 label: at most 63 characters and no dots (the API server refuses "a.b"). */
const namespaceName = z
  .string()
  .min(1)
  .max(63)
  .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, "must be a DNS-1123 label (a namespace name has no dots)");

/**
 * How a phase function reaches a cluster. Absent: the host cluster (where the DVM lives) is used.
 * Present: a Secret in the DVM's namespace (or `namespace`) holds a kubeconfig under `key`.
 */
export const ClusterRefSchema = z.object({
  kubeconfigSecretRef: z.object({
    name: dnsName,
    namespace: namespaceName.optional(),
    // A Secret's data key: at most 253 characters.
    key: z.string().min(1).max(253).default("kubeconfig"),
  }),
});
export type ClusterRef = z.infer<typeof ClusterRefSchema>;

export const VolumeModeSchema = z.enum(["Filesystem", "Block"]);
export const AccessModeSchema = z.enum(["ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod"]);

export const PvcToMigrateSchema = z.object({
  name: dnsName,
  namespace: namespaceName,
  /** Defaults to the source's name. */
  targetName: dnsName.optional(),
  /** Defaults to the source's namespace. */
  targetNamespace: namespaceName.optional(),
  targetStorageClass: z.string().min(1).max(253),
  targetAccessModes: z.array(AccessModeSchema).min(1).max(4),
  targetVolumeMode: VolumeModeSchema.optional(),
  /** rsync --checksum for this PVC. */
  verify: z.boolean().optional(),
});

export type PvcToMigrate = z.infer<typeof PvcToMigrateSchema>;

/** A label's value: empty, or at most 63 alphanumerics with "-", "_" or "." inside (Kubernetes' rule). */
const labelValue = z
  .string()
  .max(63)
  .regex(/^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/, "must be a label value: at most 63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric");
/** A label's key: an optional DNS-subdomain prefix and "/", then a name of at most 63 characters. */
const labelKey = z
  .string()
  .min(1)
  .max(317)
  .regex(
    /^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/,
    "must be a label key: an optional DNS prefix and '/', then at most 63 alphanumerics, '-', '_' or '.'",
  );

/** A Kubernetes label selector (metav1.LabelSelector), bounded. Empty: every PVC of the namespace. */
export const LabelSelectorSchema = z.object({
  matchLabels: z
    .record(labelKey, labelValue)
    .refine((labels) => Object.keys(labels).length <= MAX_SELECTOR_LABELS, `must have at most ${MAX_SELECTOR_LABELS} labels`)
    .optional(),
  matchExpressions: z
    .array(
      z
        .object({
          key: labelKey,
          operator: z.enum(["In", "NotIn", "Exists", "DoesNotExist"]),
          values: z.array(labelValue).max(MAX_SELECTOR_VALUES).optional(),
        })
        .superRefine((expression, ctx) => {
          const count = expression.values?.length ?? 0;
          const needsValues = expression.operator === "In" || expression.operator === "NotIn";
          if (needsValues && count === 0) ctx.addIssue({ code: "custom", path: ["values"], message: `must not be empty with operator ${expression.operator}` });
          if (!needsValues && count > 0) ctx.addIssue({ code: "custom", path: ["values"], message: `must be empty with operator ${expression.operator}` });
        }),
    )
    .max(MAX_SELECTOR_EXPRESSIONS)
    .optional(),
});
export type LabelSelector = z.infer<typeof LabelSelectorSchema>;

/**
 * The PVCs of one namespace whose labels match, instead of a list: expanded once, by the first phase,
 * into status.selectedPersistentVolumeClaims, the list every later phase moves (src/dvm/selection.ts).
 * The target fields apply to every selected PVC and default as a listed PVC's do; the target keeps the
 * source's name.
 */
export const PvcSelectorSchema = z.object({
  namespace: namespaceName,
  labelSelector: LabelSelectorSchema.optional(),
  targetNamespace: namespaceName.optional(),
  targetStorageClass: z.string().min(1).max(253),
  targetAccessModes: z.array(AccessModeSchema).min(1).max(4),
  targetVolumeMode: VolumeModeSchema.optional(),
  verify: z.boolean().optional(),
});
export type PvcSelector = z.infer<typeof PvcSelectorSchema>;

export const EndpointTypeSchema = z.enum(["ClusterIP", "NodePort", "LoadBalancer", "Route"]);
export type EndpointType = z.infer<typeof EndpointTypeSchema>;

export const MigrationTypeSchema = z.enum(["Stage", "CutOver", "Rollback"]);

export const DEFAULT_BACKOFF_LIMIT = 20;

const quantity = z.string().regex(QUANTITY_PATTERN, 'must be a quantity such as "500m", "2" or "512Mi"');
const ResourceListSchema = z.object({ cpu: quantity.optional(), memory: quantity.optional() });

/**
 * One extra rsync long option as a DVM may write it: "--name" or "--name=value", the value printable
 * ASCII without blanks. Syntax only: which names may be used is the operator's allow-list
 * (src/dvm/transferPolicy.ts), checked by the migration policy.
 */
export const RSYNC_LONG_OPTION_PATTERN = /^--[a-z0-9][a-z0-9-]*(=[\x21-\x7e]+)?$/;

/** How the data moves: rsync's options and the transfer pods' share of the cluster. */
export const TransferOptionsSchema = z.object({
  /** rsync --bwlimit per client pod; unset, the operator's limit if any. */
  bandwidthLimitKiBPerSecond: z.number().int().min(1).max(2_147_483_647).optional(),
  delete: z.boolean().optional(),
  partial: z.boolean().optional(),
  hardLinks: z.boolean().optional(),
  /** For every PVC whose own verify is unset. */
  verify: z.boolean().optional(),
  /** Each on the operator's allow-list (checked by the policy, not here). */
  extraOptions: z
    .array(z.string().max(256).regex(RSYNC_LONG_OPTION_PATTERN, 'must be one rsync long option, "--name" or "--name=value", without blanks'))
    .max(32)
    .optional(),
  /** PVCs transferred at once (rsync client pods alive at the same time). */
  maxConcurrentVolumes: z.number().int().min(1).max(1000).optional(),
  /** Of the rsync containers (client and server pods); replace the defaults. */
  resources: z
    .object({ requests: ResourceListSchema.optional(), limits: ResourceListSchema.optional() })
    .superRefine((resources, ctx) => {
      for (const name of ["cpu", "memory"] as const) {
        const request = resources.requests?.[name];
        const limit = resources.limits?.[name];
        if (request === undefined || limit === undefined) continue;
        if (quantityValue(request)! > quantityValue(limit)!)
          ctx.addIssue({ code: "custom", path: ["requests", name], message: `must not exceed limits.${name} (${limit})` });
      }
    })
    .optional(),
});
export type TransferOptions = z.infer<typeof TransferOptionsSchema>;

export const DvmSpecSchema = z
  .object({
    /** Absent: the host cluster. */
    sourceCluster: ClusterRefSchema.optional(),
    destinationCluster: ClusterRefSchema.optional(),
    // At most MAX_PVCS_PER_DVM: what every record of a DVM is sized for (src/dvm/limits.ts).
    persistentVolumeClaims: z.array(PvcToMigrateSchema).min(1).max(MAX_PVCS_PER_DVM).optional(),
    persistentVolumeClaimSelector: PvcSelectorSchema.optional(),
    /** Retry limit of the rsync client pods; 0 or absent: DEFAULT_BACKOFF_LIMIT. */
    backOffLimit: z.number().int().min(0).optional(),
    migrationType: MigrationTypeSchema.optional(),
    deleteProgressReportingCRs: z.boolean().optional(),
    endpointType: EndpointTypeSchema.optional(),
    transferImage: z.string().min(1).max(MAX_IMAGE_REFERENCE_LENGTH).optional(),
    /** rsync as UID 0 (only the capabilities it needs) to keep file ownership; default false. */
    runAsRoot: z.boolean().optional(),
    /** The user and groups of the unprivileged transfer pods; unset, the platform decides. */
    transferIdentity: z
      .object({
        runAsUser: z.number().int().min(1).optional(),
        runAsGroup: z.number().int().min(0).optional(),
        fsGroup: z.number().int().min(0).optional(),
        supplementalGroups: z.array(z.number().int().min(0)).max(32).optional(),
      })
      .optional(),
    // Bounded here, and only keys on the operator's allow-list pass the policy (src/transfer/podAnnotations.ts).
    transferPodAnnotations: z
      .record(z.string(), z.string())
      .superRefine((annotations, ctx) => {
        const { maxCount, maxValueLength } = TRANSFER_POD_ANNOTATION_BOUNDS;
        if (Object.keys(annotations).length > maxCount) ctx.addIssue({ code: "custom", message: `must have at most ${maxCount} annotations` });
        for (const [key, value] of Object.entries(annotations)) {
          const problem = annotationKeyProblem(key);
          if (problem) ctx.addIssue({ code: "custom", path: [key], message: problem });
          if (value.length > maxValueLength) ctx.addIssue({ code: "custom", path: [key], message: `must be at most ${maxValueLength} characters` });
        }
      })
      .optional(),
    transfer: TransferOptionsSchema.optional(),
    /** Size each destination PVC from its source's measured usage plus headroom (status.targetSizes). */
    rightSizeTargets: z.object({ headroomPercent: z.number().int().min(0).max(1000) }).optional(),
    /**
     * CutOver: stop the workloads that mount a source PVC before the final sync; Rollback: restore them.
     * Default true for both; refused for a Stage. The phases: src/phases/quiesce.ts.
     */
    quiesce: z.boolean().optional(),
  })
  .superRefine((spec, ctx) => {
    // One way of naming the volumes: a list and a selector together would leave unclear which one moves.
    if (spec.persistentVolumeClaims === undefined && spec.persistentVolumeClaimSelector === undefined)
      ctx.addIssue({ code: "custom", path: ["persistentVolumeClaims"], message: "is required unless spec.persistentVolumeClaimSelector is set" });
    if (spec.persistentVolumeClaims !== undefined && spec.persistentVolumeClaimSelector !== undefined)
      ctx.addIssue({
        code: "custom",
        path: ["persistentVolumeClaimSelector"],
        message: "must not be set together with spec.persistentVolumeClaims: use one or the other",
      });
    // A source listed twice would share its transfer objects and progress record with itself: one of the
    // two would be skipped silently and the migration still reported as a success.
    const firstIndex = new Map<string, number>();
    spec.persistentVolumeClaims?.forEach((pvc, i) => {
      const source = `${pvc.namespace}/${pvc.name}`;
      const first = firstIndex.get(source);
      if (first === undefined) firstIndex.set(source, i);
      else
        ctx.addIssue({
          code: "custom",
          path: ["persistentVolumeClaims", i],
          message: `lists the source PVC ${source} again, as spec.persistentVolumeClaims[${first}] does: list each source once`,
        });
    });
    // The cut-over is the last pass: the destination must end up equal to the source, deletions included.
    if (spec.migrationType === "CutOver" && spec.transfer?.delete === false)
      ctx.addIssue({
        code: "custom",
        path: ["transfer", "delete"],
        message: "must not be false for a CutOver: the final pass removes what is gone from the source",
      });
    // A Stage runs while the applications keep writing: only the last pass may stop them.
    if (spec.quiesce === true && (spec.migrationType ?? "Stage") === "Stage")
      ctx.addIssue({
        code: "custom",
        path: ["quiesce"],
        message: "is for a CutOver (or a Rollback's restore), not a Stage: a Stage runs while the applications keep running",
      });
  });
export type DvmSpec = z.infer<typeof DvmSpecSchema>;

export const ConditionCategorySchema = z.enum(["Critical", "Error", "Warn", "Required", "Advisory"]);
export type ConditionCategory = z.infer<typeof ConditionCategorySchema>;

export const ConditionSchema = z.object({
  type: z.string(),
  status: z.enum(["True", "False", "Unknown"]),
  reason: z.string().optional(),
  category: ConditionCategorySchema,
  message: z.string().optional(),
  lastTransitionTime: z.string(),
  durable: z.boolean().optional(),
});
export type Condition = z.infer<typeof ConditionSchema>;

export const PvcRefSchema = z.object({ name: z.string(), namespace: z.string() }) satisfies z.ZodType<PvcRef>;

const bytes = z.number().int().min(0);

/** Bytes, total, percent, rate and time left of one transfer, or of all of a DVM's (src/transfer/figures.ts). */
export const TransferFiguresSchema = z.object({
  bytesTransferred: bytes.optional(),
  totalBytes: bytes.optional(),
  percent: z.number().min(0).max(100).optional(),
  bytesPerSecond: z.number().min(0).optional(),
  secondsLeft: z.number().min(0).optional(),
  elapsedSeconds: z.number().min(0).optional(),
});

/** What one PVC's transfer did, from rsync's statistics once it ended. */
export const VerificationReportSchema = z.object({
  filesTransferred: bytes,
  filesSkipped: bytes,
  filesVanished: bytes,
  filesFailed: bytes,
  filesDeleted: bytes,
  bytesTransferred: bytes,
  transferredFileSize: bytes,
  totalFiles: bytes,
  totalBytes: bytes,
  checksumVerified: z.boolean(),
  checksumMismatches: bytes,
});

export const RsyncOperationSchema = TransferFiguresSchema.extend({
  pvcReference: PvcRefSchema,
  currentAttempt: z.number().int(),
  succeeded: z.boolean().optional(),
  failed: z.boolean().optional(),
  /** No client pod yet: spec.transfer.maxConcurrentVolumes others are in flight. */
  queued: z.boolean().optional(),
  verification: VerificationReportSchema.optional(),
});
export type RsyncOperation = z.infer<typeof RsyncOperationSchema>;

/** How a right-sized destination PVC was sized (spec.rightSizeTargets). */
export const TargetSizeSchema = z.object({
  /** The destination PVC. */
  pvcReference: PvcRefSchema,
  /** The source's files, measured (apparent size). */
  usedBytes: z.number().int().min(0),
  headroomPercent: z.number().int().min(0),
  /** What the destination PVC requests: usedBytes plus the headroom, in whole MiB. */
  requested: z.string(),
  /** What the source requested or holds (the size it would have had otherwise). */
  sourceSize: z.string().optional(),
});
export type TargetSize = z.infer<typeof TargetSizeSchema>;

/** One workload spec.quiesce scaled down or suspended, with what it had before (its annotation). */
export const QuiescedApplicationSchema = z.object({
  kind: z.enum(["Deployment", "StatefulSet", "ReplicaSet", "CronJob"]),
  namespace: z.string(),
  name: z.string(),
  /** spec.replicas before the first scale-down (Deployment, StatefulSet, ReplicaSet). */
  replicas: z.number().int().min(0).optional(),
  /** spec.suspend before the first suspension (CronJob). */
  suspend: z.boolean().optional(),
  /** Set back to what it had (failure, cancel or Rollback). */
  restored: z.boolean().optional(),
});
export type QuiescedApplication = z.infer<typeof QuiescedApplicationSchema>;

export const PodProgressSchema = z.object({
  name: z.string(),
  namespace: z.string(),
  pvcRef: PvcRefSchema,
  lastObservedProgressPercent: z.string().optional(),
  lastObservedTransferRate: z.string().optional(),
  totalElapsedTime: z.string().optional(),
});
export type PodProgress = z.infer<typeof PodProgressSchema>;

/** Written by the controller only (the status subresource). */
export const DvmStatusSchema = z.object({
  phase: z.string().optional(),
  itinerary: z.string().optional(),
  phaseDescription: z.string().optional(),
  /** Position in the itinerary ("3/18"), for the printer columns and the CLI. */
  step: z.string().optional(),
  startTimestamp: z.string().optional(),
  observedGeneration: z.number().int().optional(),
  errors: z.array(z.string()).optional(),
  conditions: z.array(ConditionSchema).optional(),
  rsyncOperations: z.array(RsyncOperationSchema).optional(),
  successfulPods: z.array(PodProgressSchema).optional(),
  failedPods: z.array(PodProgressSchema).optional(),
  runningPods: z.array(PodProgressSchema).optional(),
  pendingPods: z.array(PodProgressSchema).optional(),
  unknownPods: z.array(PodProgressSchema).optional(),
  skippedVolumes: z.array(z.string()).optional(),
  targetSizes: z.array(TargetSizeSchema).optional(),
  // Fixed by the first phase (Started): the PVCs every later phase moves, whatever is created or relabelled afterwards.
  selectedPersistentVolumeClaims: z.array(PvcRefSchema).max(MAX_PVCS_PER_DVM).optional(),
  /** What spec.quiesce scaled down or suspended, with what each had. */
  quiescedApplications: z.array(QuiescedApplicationSchema).max(MAX_QUIESCED_APPLICATIONS).optional(),
  /** All volumes together; written by RunRsyncOperations. */
  progress: TransferFiguresSchema.optional(),
});
export type DvmStatus = z.infer<typeof DvmStatusSchema>;

export interface DvmMetadata {
  name: string;
  namespace: string;
  uid: string;
  generation: number;
  resourceVersion: string;
  creationTimestamp?: string;
  /** Set once the DVM is being deleted; it stays until every finalizer is released. */
  deletionTimestamp?: string;
  finalizers?: string[];
  labels?: Record<string, string>;
}

/** A DVM read from the API server; `spec` may still be invalid (see parseDvmSpec). */
export interface DirectVolumeMigration {
  apiVersion: typeof DVM_API_VERSION;
  kind: typeof DVM_KIND;
  metadata: DvmMetadata;
  spec: unknown;
  status: DvmStatus;
  /**
   * Set when the status as stored does not parse ("status.field: message"); `status` then holds only the
   * conditions, when they parse. Such a DVM is stopped, never restarted from the beginning.
   */
  statusIssues?: string[];
}

/** A spec problem, named by its field path, e.g. "spec.persistentVolumeClaims[1].targetStorageClass". */
export type SpecIssue = FieldIssue;

export type SpecParseResult = { ok: true; spec: DvmSpec } | { ok: false; issues: SpecIssue[] };

export function parseDvmSpec(spec: unknown): SpecParseResult {
  const parsed = DvmSpecSchema.safeParse(spec);
  if (parsed.success) return { ok: true, spec: parsed.data };
  return { ok: false, issues: fieldIssues("spec", parsed.error) };
}
