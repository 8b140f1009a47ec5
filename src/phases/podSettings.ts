/** What every transfer pod (server, client, usage) takes from the DVM and the operator's policy. */
import { definedFields } from "../lib/definedFields";
import type { TransferPodOptions } from "../transfer";
import type { PhaseContext } from "./types";

export function transferPodSettings(
  ctx: Pick<PhaseContext, "transfer" | "spec" | "transferImage">,
): Pick<TransferPodOptions, "annotations" | "allowedAnnotationKeys" | "image" | "identity" | "runAsRoot"> {
  const identity = ctx.spec.transferIdentity;
  return definedFields({
    annotations: ctx.transfer.podAnnotations,
    allowedAnnotationKeys: ctx.transfer.allowedPodAnnotationKeys,
    image: ctx.transferImage,
    // The spec's fields are absent when unset; their type says "or undefined" only because zod infers it so.
    identity: identity && definedFields(identity),
    runAsRoot: ctx.spec.runAsRoot ?? false,
  });
}
