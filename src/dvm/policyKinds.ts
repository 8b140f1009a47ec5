/**
 * The kinds of value an operator's setting takes (src/dvm/policyConfig.ts, the trigger's namespaces),
 * each a zod schema of the variable's text. Blank is unset (blankIsUnset) for every kind but a list,
 * where a set but empty list means "none", unlike an unset one, which means the default.
 */
import { z } from "zod";
import { blankIsUnset, optional } from "../config/environment";
import { parseAllowList } from "../lib/allowList";
import { annotationKeyProblem } from "../transfer/podAnnotations";
import { parseProxyUrl } from "./proxyPolicy";
import { QUANTITY_PATTERN } from "./quantity";
import { extraOptionEntryProblem } from "./transferPolicy";

export const namespacePattern = z.string().regex(/^([a-z0-9]([-a-z0-9]*[a-z0-9])?|[a-z0-9][-a-z0-9]*\*)$/, 'must be a namespace name or a "prefix*"');
export const imagePattern = z.string().regex(/^[^\s,]+$/, "must be an image reference without spaces");

/** A tag other than "latest", or a digest: the reference names one image for good. */
export function isPinnedImage(image: string): boolean {
  if (/@sha256:[0-9a-f]{64}$/.test(image)) return true;
  const lastSegment = image.slice(image.lastIndexOf("/") + 1);
  const tag = lastSegment.includes(":") ? lastSegment.slice(lastSegment.indexOf(":") + 1) : undefined;
  return tag !== undefined && tag !== "" && tag !== "latest";
}

/** Comma-separated entries, each passing `item`; set but empty is the empty list. */
export const listOf = (item: z.ZodString) =>
  z
    .string()
    .transform((text) => [...parseAllowList(text).patterns])
    .pipe(z.array(item));

/** "true" or "false"; blank or unset: `fallback`. */
export const flag = (fallback: boolean) =>
  z.preprocess(
    blankIsUnset,
    z
      .string()
      .trim()
      .pipe(z.enum(["true", "false"]))
      .default(fallback ? "true" : "false")
      .transform((v) => v === "true"),
  );

export const positiveInteger = optional(
  z
    .string()
    .trim()
    .regex(/^[1-9][0-9]*$/, "must be a positive integer")
    .transform(Number),
);

export const quantity = optional(z.string().trim().regex(QUANTITY_PATTERN, 'must be a quantity such as "2" or "4Gi"'));

/** An image pinned by tag or digest; blank or unset: `fallback`. */
export const pinnedImage = (fallback: string) =>
  z.preprocess(
    blankIsUnset,
    z.string().trim().pipe(imagePattern).refine(isPinnedImage, 'must be pinned: a tag other than "latest", or @sha256:<digest>').default(fallback),
  );

/** An rsync long option a DVM may add: "--name" or "--name=", not one the controller reserves. */
export const extraOptionEntry = z.string().superRefine((entry, ctx) => {
  const problem = extraOptionEntryProblem(entry);
  if (problem) ctx.addIssue({ code: "custom", message: problem });
});

/** An exact annotation key, or "prefix*" ("example.com/*"). */
export const annotationEntry = z.string().superRefine((entry, ctx) => {
  const problem = entry.endsWith("*")
    ? /^[A-Za-z0-9][-A-Za-z0-9_./]*\*$/.test(entry)
      ? undefined
      : 'must be an annotation key or a "prefix*"'
    : annotationKeyProblem(entry);
  if (problem) ctx.addIssue({ code: "custom", message: problem });
});

/** An HTTP CONNECT proxy's URL (parseProxyUrl); an error never repeats the value. */
export const proxy = optional(
  z
    .string()
    .trim()
    .transform((text, ctx) => {
      const parsed = parseProxyUrl(text);
      if (typeof parsed !== "string") return parsed;
      ctx.addIssue({ code: "custom", message: parsed });
      return z.NEVER;
    }),
);
