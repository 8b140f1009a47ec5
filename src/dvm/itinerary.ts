/**
 * The itinerary table: the one source of truth for phase order, descriptions, step numbers, whether a
 * phase waits, and so how soon it is invoked again.
 * The runner, the status, the relay's requeue delays, the CLI and the Serverless function list all
 * read this table; nothing else lists phases.
 */

export interface PhaseEntry {
  /** Human-readable sentence, copied into status.phaseDescription. */
  readonly description: string;
  /** A wait phase polls a condition: it returns "not yet" and is driven again by an event or a requeue. */
  readonly waits: boolean;
  /** Terminal phases have no body and no ledger entry. */
  readonly terminal?: boolean;
}

export interface PhaseSpec extends PhaseEntry {
  /**
   * Delay before the next invocation when the phase waits (or right after it advances): it follows from
   * `waits` (upstream's PollReQ for a wait phase, FastReQ otherwise; none after a terminal phase).
   */
  readonly requeueMs: number;
}

/** Upstream's requeue constants (task.go): FastReQ and PollReQ. */
export const FAST_REQUEUE_MS = 100;
export const POLL_REQUEUE_MS = 3_000;

export const PHASES = {
  Started: {
    description: "Validating the migration and resolving the source and destination clusters",
    waits: false,
  },
  CleanStaleRsyncResources: {
    description: "Deleting transfer resources left by an earlier run of this migration",
    waits: false,
  },
  WaitForStaleRsyncResourcesTerminated: {
    description: "Waiting for stale transfer resources to terminate",
    waits: true,
  },
  CreateDestinationNamespaces: {
    description: "Creating the destination namespaces",
    waits: false,
  },
  CreateDestinationPVCs: {
    description: "Creating the destination persistent volume claims",
    waits: false,
  },
  CreateRsyncEndpoint: {
    description: "Creating the endpoint (Service or Route) that exposes the rsync server",
    waits: false,
  },
  EnsureRsyncEndpointReady: {
    description: "Waiting for the rsync endpoint to be reachable",
    waits: true,
  },
  CreateRsyncConfig: {
    description: "Creating the rsync credentials and daemon configuration",
    waits: false,
  },
  CreateStunnelConfig: {
    description: "Creating the stunnel certificates and configuration",
    waits: false,
  },
  CreatePVProgressCRs: {
    description: "Creating one progress record per volume",
    waits: false,
  },
  CreateRsyncTransferPods: {
    description: "Creating the rsync server pods on the destination",
    waits: false,
  },
  WaitForRsyncTransferPodsRunning: {
    description: "Waiting for the rsync server pods to run",
    waits: true,
  },
  QuiesceApplications: {
    description: "Scaling down the applications that mount the source volumes and recording what they had (spec.quiesce)",
    waits: false,
  },
  WaitForApplicationsQuiesced: {
    description: "Waiting until no application pod mounts the source volumes (spec.quiesce)",
    waits: true,
  },
  RunRsyncOperations: {
    description: "Transferring data with rsync client pods on the source",
    waits: true,
  },
  DeleteRsyncResources: {
    description: "Deleting the transfer resources",
    waits: false,
  },
  WaitForRsyncResourcesTerminated: {
    description: "Waiting for the transfer resources to terminate",
    waits: true,
  },
  MigrationFailed: {
    description: "Recording the failure of the migration",
    waits: false,
  },
  CleanupAfterFailure: {
    description: "Deleting the transfer resources of the failed migration",
    waits: false,
  },
  WaitForCleanupAfterFailure: {
    description: "Waiting for the transfer resources of the failed migration to terminate",
    waits: true,
  },
  UnquiesceApplications: {
    description: "Restoring the applications the CutOver quiesced on the original source to what they had",
    waits: false,
  },
  UnquiesceAfterFailure: {
    description: "Restoring the applications this migration quiesced to what they had",
    waits: false,
  },
  Completed: {
    description: "The migration is complete",
    waits: false,
    terminal: true,
  },
} as const satisfies Record<string, PhaseEntry>;

export type PhaseName = keyof typeof PHASES;
export const PHASE_NAMES = Object.keys(PHASES) as PhaseName[];

export function isPhaseName(value: unknown): value is PhaseName {
  return typeof value === "string" && Object.hasOwn(PHASES, value);
}

export function phaseSpec(phase: PhaseName): PhaseSpec {
  const entry: PhaseEntry = PHASES[phase];
  return { ...entry, requeueMs: entry.terminal ? 0 : entry.waits ? POLL_REQUEUE_MS : FAST_REQUEUE_MS };
}

const TRANSFER_SETUP = [
  "CreateRsyncEndpoint",
  "EnsureRsyncEndpointReady",
  "CreateRsyncConfig",
  "CreateStunnelConfig",
  "CreatePVProgressCRs",
  "CreateRsyncTransferPods",
  "WaitForRsyncTransferPodsRunning",
] as const satisfies readonly PhaseName[];

const TRANSFER_RUN = ["RunRsyncOperations", "DeleteRsyncResources", "WaitForRsyncResourcesTerminated"] as const satisfies readonly PhaseName[];

export const ITINERARIES = {
  VolumeMigration: [
    "Started",
    "CleanStaleRsyncResources",
    "WaitForStaleRsyncResourcesTerminated",
    "CreateDestinationNamespaces",
    "CreateDestinationPVCs",
    ...TRANSFER_SETUP,
    // A CutOver's applications stop as late as possible: right before the final sync (spec.quiesce).
    "QuiesceApplications",
    "WaitForApplicationsQuiesced",
    ...TRANSFER_RUN,
    "Completed",
  ],
  /**
   * Moves the data back: same transfer, with source and destination swapped; nothing is created. Then
   * the applications a CutOver quiesced run again on the original source.
   */
  VolumeMigrationRollback: [
    "Started",
    "CleanStaleRsyncResources",
    "WaitForStaleRsyncResourcesTerminated",
    ...TRANSFER_SETUP,
    ...TRANSFER_RUN,
    "UnquiesceApplications",
    "Completed",
  ],
  /**
   * Entered from any phase of the others when a phase fails for good; cleanup still happens, then the
   * applications this DVM quiesced run again (after its rsync clients are gone from their volumes).
   * Its phases have names of their own: a phase's ledger entry is keyed by its name.
   */
  VolumeMigrationFailed: ["MigrationFailed", "CleanupAfterFailure", "WaitForCleanupAfterFailure", "UnquiesceAfterFailure", "Completed"],
} as const satisfies Record<string, readonly PhaseName[]>;

export type ItineraryName = keyof typeof ITINERARIES;
/** @internal exported for its tests */
export const ITINERARY_NAMES = Object.keys(ITINERARIES) as ItineraryName[];

export function isItineraryName(value: unknown): value is ItineraryName {
  return typeof value === "string" && Object.hasOwn(ITINERARIES, value);
}

/** Step n of total, 1-based, as shown in the Running condition ("Step: n/total"). */
export function stepOf(itinerary: ItineraryName, phase: PhaseName): { step: number; total: number } | undefined {
  const steps: readonly PhaseName[] = ITINERARIES[itinerary];
  const index = steps.indexOf(phase);
  return index < 0 ? undefined : { step: index + 1, total: steps.length };
}

/** The phase after `phase` in `itinerary`; a phase not in the itinerary goes to Completed (as upstream). */
export function nextPhase(itinerary: ItineraryName, phase: PhaseName): PhaseName {
  const steps: readonly PhaseName[] = ITINERARIES[itinerary];
  const index = steps.indexOf(phase);
  return index < 0 || index + 1 >= steps.length ? "Completed" : steps[index + 1]!;
}

/** @internal exported for its tests */
export function firstPhase(itinerary: ItineraryName): PhaseName {
  return ITINERARIES[itinerary][0];
}

/** The phases that execute a body: all but the terminal one. */
export type ExecutablePhaseName = Exclude<PhaseName, "Completed">;
export const EXECUTABLE_PHASES = PHASE_NAMES.filter((p): p is ExecutablePhaseName => !phaseSpec(p).terminal);
