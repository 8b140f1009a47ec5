/**
 * Where things live inside the transfer pods. The Secret payload builders (which write paths into
 * rsyncd.conf and stunnel.conf) and the pod builders (which mount volumes there) take the same
 * `TransferPaths`, so the two cannot drift apart. Tests point them at temporary directories and run
 * the generated commands as they are.
 */

export interface TransferPaths {
  /** Read-only mount of the transfer Secret (configs, certificates, keys). */
  configDir: string;
  /**
   * Writable in-memory scratch (an emptyDir, medium Memory, mounted at /tmp). The rsync secrets file
   * is copied here at start so that it belongs to the daemon's own user with mode 0400, whatever the
   * Secret volume's owner and mode are (rsync refuses a secrets file readable by "other").
   */
  scratchDir: string;
  /** Server: each destination PVC is mounted at `<volumeRoot>/<module>`. */
  volumeRoot: string;
  /** Client: the source PVC, mounted read-only. */
  sourceMountPath: string;
  /** Client: emptyDir shared by rsync and the stunnel sidecar for the done-file. */
  doneDir: string;
}

export const DEFAULT_TRANSFER_PATHS: TransferPaths = {
  configDir: "/etc/dvm-transfer",
  scratchDir: "/tmp",
  volumeRoot: "/mnt",
  sourceMountPath: "/mnt/source",
  doneDir: "/run/dvm-transfer",
};

export function transferPaths(overrides: Partial<TransferPaths> = {}): TransferPaths {
  return { ...DEFAULT_TRANSFER_PATHS, ...overrides };
}

/** Keys of the transfer Secrets; each becomes a file in `configDir`. */
export const SECRET_KEY = {
  rsyncdConf: "rsyncd.conf",
  rsyncdSecrets: "rsyncd.secrets",
  stunnelConf: "stunnel.conf",
  cert: "tls.crt",
  key: "tls.key",
  ca: "ca.crt",
  /** Client only: read into RSYNC_PASSWORD through a secretKeyRef, never mounted into a command line. */
  rsyncPassword: "rsync-password",
} as const;

export const RSYNC_CLIENT_DONE_FILE = "rsync-client-done";
/**
 * A Block volume's device node, inside its module folder (server) or the source folder (client): rsync
 * copies one file of this name, the device's content (see `blockDevice` in rsyncClient.ts).
 */
export const BLOCK_DEVICE_FILE = "device";

export const configFile = (paths: TransferPaths, key: string): string => `${paths.configDir}/${key}`;
export const moduleMountPath = (paths: TransferPaths, module: string): string => `${paths.volumeRoot}/${module}`;
export const blockDevicePath = (folder: string): string => `${folder}/${BLOCK_DEVICE_FILE}`;
export const doneFile = (paths: TransferPaths): string => `${paths.doneDir}/${RSYNC_CLIENT_DONE_FILE}`;
export const scratchSecretsFile = (paths: TransferPaths): string => `${paths.scratchDir}/${SECRET_KEY.rsyncdSecrets}`;
