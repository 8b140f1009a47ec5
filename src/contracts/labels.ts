/**
 * The labels every object the controller creates carries: the phases set them, the relay selects by
 * them, cleanup and the CLI read them. Changing one is a change of what is already on users' clusters.
 */
export const LABEL = {
  /** Every object created for a DVM carries its uid (upstream selected by app label only). */
  dvmUid: "dvm.migration.openshift.io/uid",
  /** Only transient transfer objects carry this; cleanup selects uid + transfer, never user data. */
  transfer: "dvm.migration.openshift.io/transfer",
  volume: "dvm.migration.openshift.io/volume",
  attempt: "dvm.migration.openshift.io/rsync-attempt",
  role: "dvm.migration.openshift.io/role",
  /** Which of a namespace's rsync server pods (src/phases/serverGroups.ts); its Service selects by it. */
  serverGroup: "dvm.migration.openshift.io/server-group",
  partOf: "app.kubernetes.io/part-of",
} as const;

export const PART_OF = "dvm-serverless";
