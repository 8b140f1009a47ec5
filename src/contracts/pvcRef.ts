/** A PersistentVolumeClaim by namespace and name: in the DVM's spec and status, and in the transfer's configuration. */
export interface PvcRef {
  namespace: string;
  name: string;
}
