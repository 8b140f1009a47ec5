/**
 * A problem with one field of some input (a DVM spec, an event, a request, a response, the environment),
 * named by its path, and the one way to turn zod's issues into these and these into "field: message".
 */
import type { z } from "zod";

export interface FieldIssue {
  field: string;
  message: string;
}

/**
 * A zod issue path as a field name under `root`: spec.persistentVolumeClaims[0].targetStorageClass, or
 * with an empty root persistentVolumeClaims[0]. An empty path names the root itself.
 */
export function fieldPath(root: string, path: readonly PropertyKey[]): string {
  return path.reduce<string>((acc, part) => {
    if (typeof part === "number") return `${acc}[${part}]`;
    // A map's key that is no identifier (an annotation key) reads as spec.transferPodAnnotations["a.b/c"].
    if (acc && !/^[A-Za-z_$][A-Za-z0-9_$]*$/.test(String(part))) return `${acc}[${JSON.stringify(String(part))}]`;
    return acc ? `${acc}.${String(part)}` : String(part);
  }, root);
}

/**
 * zod issues as named fields; an unknown key is named itself ("data.namesapce"). `whole` names the input
 * when an issue is about all of it (an empty path under an empty root).
 */
export function fieldIssues(root: string, error: z.ZodError, whole = root || "(input)"): FieldIssue[] {
  const name = (path: readonly PropertyKey[]) => fieldPath(root, path) || whole;
  return error.issues.flatMap((issue) =>
    issue.code === "unrecognized_keys"
      ? issue.keys.map((key) => ({ field: name([...issue.path, key]), message: "unknown field" }))
      : [{ field: name(issue.path), message: issue.message }],
  );
}

export function formatIssue(issue: FieldIssue): string {
  return `${issue.field}: ${issue.message}`;
}

/** All of them on one line. */
export function formatIssues(issues: readonly FieldIssue[]): string {
  return issues.map(formatIssue).join("; ");
}
