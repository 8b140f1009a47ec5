/**
 * Which body executes which phase. Keyed by the itinerary table's phase names, so the compiler reports a
 * phase added to the table without a body.
 */
import type { ExecutablePhaseName } from "../dvm/itinerary";
import { deleteTransferResources, waitForTransferResourcesGone } from "./cleanup";
import { createRsyncEndpoint, ensureRsyncEndpointReady } from "./endpoint";
import { createDestinationNamespaces } from "./namespaces";
import { createPVProgressCRs } from "./progressRecords";
import { createDestinationPVCs } from "./pvcs";
import { quiesceApplications, unquiesceApplications, waitForApplicationsQuiesced } from "./quiesce";
import { runRsyncOperations } from "./rsyncOperations";
import { createRsyncTransferPods, waitForRsyncTransferPodsRunning } from "./serverPods";
import { started } from "./started";
import { createRsyncConfig, createStunnelConfig } from "./transferConfig";
import { advance, type PhaseBody } from "./types";

export const PHASE_BODIES: Record<ExecutablePhaseName, PhaseBody> = {
  Started: started,
  CleanStaleRsyncResources: deleteTransferResources({ progressRecords: false }),
  WaitForStaleRsyncResourcesTerminated: waitForTransferResourcesGone,
  CreateDestinationNamespaces: createDestinationNamespaces,
  CreateDestinationPVCs: createDestinationPVCs,
  CreateRsyncEndpoint: createRsyncEndpoint,
  EnsureRsyncEndpointReady: ensureRsyncEndpointReady,
  CreateRsyncConfig: createRsyncConfig,
  CreateStunnelConfig: createStunnelConfig,
  CreatePVProgressCRs: createPVProgressCRs,
  CreateRsyncTransferPods: createRsyncTransferPods,
  WaitForRsyncTransferPodsRunning: waitForRsyncTransferPodsRunning,
  QuiesceApplications: quiesceApplications,
  WaitForApplicationsQuiesced: waitForApplicationsQuiesced,
  RunRsyncOperations: runRsyncOperations,
  DeleteRsyncResources: deleteTransferResources({ progressRecords: true }),
  WaitForRsyncResourcesTerminated: waitForTransferResourcesGone,
  UnquiesceApplications: unquiesceApplications,
  // The failure itself is recorded by the runner as it enters this itinerary; nothing to do here.
  MigrationFailed: async () => advance(),
  CleanupAfterFailure: deleteTransferResources({ progressRecords: true }),
  WaitForCleanupAfterFailure: waitForTransferResourcesGone,
  UnquiesceAfterFailure: unquiesceApplications,
};
