/**
 * The payloads of the two transfer Secrets: everything the server pod (destination) and a client pod
 * (source) read, rendered from the migration's rsync secret and PKI. Each side gets only its own key: the
 * server Secret has no client key and the client Secret has no server key, and a client Secret holds
 * its own module's rsync credential only (`moduleCredential`).
 */
import type { PvcRef } from "../contracts/pvcRef";
import { definedFields } from "../lib/definedFields";
import type { TransferPki } from "./certificates";
import { TransferConfigError } from "./configText";
import { moduleCredential, rsyncSecretsFile } from "./credentials";
import { configFile, moduleMountPath, SECRET_KEY, scratchSecretsFile, type TransferPaths, transferPaths } from "./paths";
import { moduleNameFor, RSYNC_DAEMON_DEFAULT_PORT, type RsyncdOptions, rsyncdConfig } from "./rsyncd";
import { type StunnelLogLevel, type StunnelProxy, stunnelClientConfig, stunnelServerConfig } from "./stunnel";

export const STUNNEL_DEFAULT_PORT = 6443;
/** The stunnel client sidecar's loopback listener that rsync connects to. */
export const STUNNEL_CLIENT_DEFAULT_LOCAL_PORT = 6443;

/** A destination PVC as the server side serves it: a folder of files, or (`block`) one device. */
export interface ServedPvc extends PvcRef {
  /** volumeMode Block: the module holds the device node and admits rsync's --write-devices. */
  block?: boolean;
}

export interface ServerTransferSecretOptions {
  /** Destination PVCs served by this pod, one rsync module each (`moduleNameFor`). */
  pvcs: ServedPvc[];
  /** The migration's rsync secret: each module's credential is derived from it (`moduleCredential`). */
  rsyncSecret: string;
  pki: TransferPki;
  /** See `rsyncdConfig`: uid/gid 0 lines when true. */
  runAsRoot: boolean;
  /** chroot into each module (root only); keeps absolute symlinks verbatim. Default: `runAsRoot`. */
  chroot?: boolean;
  /** TLS port exposed by the pod. Default 6443. */
  stunnelPort?: number;
  /** Bind address of that port. Default: all IPv4 addresses; "::" for IPv6 or dual-stack clusters. */
  stunnelAcceptHost?: string;
  /** Loopback port of the rsync daemon. Default 8873. */
  rsyncPort?: number;
  stunnelLogLevel?: StunnelLogLevel;
  authDigest?: RsyncdOptions["authDigest"];
  paths?: Partial<TransferPaths>;
}

export function serverTransferSecretData(options: ServerTransferSecretOptions): Record<string, string> {
  const paths = transferPaths(options.paths);
  const rsyncPort = options.rsyncPort ?? RSYNC_DAEMON_DEFAULT_PORT;
  const stunnelPort = options.stunnelPort ?? STUNNEL_DEFAULT_PORT;
  if (rsyncPort === stunnelPort) throw new TransferConfigError("rsyncPort", "must differ from stunnelPort");
  const credentials = options.pvcs.map((pvc) => moduleCredential(options.rsyncSecret, moduleNameFor(pvc)));
  return {
    [SECRET_KEY.rsyncdConf]: rsyncdConfig({
      port: rsyncPort,
      modules: options.pvcs.map((pvc, i) => {
        const name = moduleNameFor(pvc);
        return {
          name,
          path: moduleMountPath(paths, name),
          comment: `${pvc.namespace}/${pvc.name}`,
          authUser: credentials[i]!.user,
          ...(pvc.block ? { blockDevice: true } : {}),
        };
      }),
      // The container copies the mounted file here first (see TransferPaths.scratchDir).
      secretsFile: scratchSecretsFile(paths),
      runAsRoot: options.runAsRoot,
      useChroot: options.chroot ?? options.runAsRoot,
      logFile: "/dev/stdout",
      ...(options.authDigest ? { authDigest: options.authDigest } : {}),
    }),
    [SECRET_KEY.rsyncdSecrets]: rsyncSecretsFile(credentials),
    [SECRET_KEY.stunnelConf]: stunnelServerConfig({
      acceptPort: stunnelPort,
      connectPort: rsyncPort,
      certPath: configFile(paths, SECRET_KEY.cert),
      keyPath: configFile(paths, SECRET_KEY.key),
      caPath: configFile(paths, SECRET_KEY.ca),
      ...definedFields({ acceptHost: options.stunnelAcceptHost || undefined, logLevel: options.stunnelLogLevel || undefined }),
    }),
    [SECRET_KEY.cert]: options.pki.serverCertPem,
    [SECRET_KEY.key]: options.pki.serverKeyPem,
    [SECRET_KEY.ca]: options.pki.caCertPem,
  };
}

export interface ClientTransferSecretOptions {
  /** The password of the destination PVC's module only (`moduleCredential`). */
  password: string;
  pki: TransferPki;
  /** The endpoint in front of the server pod: Route host, Service DNS name, node or LB address. */
  endpointHost: string;
  endpointPort: number;
  /** The name the server certificate must carry, when it differs from `endpointHost`. */
  checkHost?: string;
  /** Where the sidecar listens for rsync on loopback. Default 6443. */
  localPort?: number;
  /**
   * The operator's HTTP CONNECT proxy to reach the endpoint through (DVM_STUNNEL_TCP_PROXY). Its
   * credentials, if any, are written into stunnel.conf here and nowhere else.
   */
  proxy?: StunnelProxy;
  stunnelLogLevel?: StunnelLogLevel;
  paths?: Partial<TransferPaths>;
}

export function clientTransferSecretData(options: ClientTransferSecretOptions): Record<string, string> {
  const paths = transferPaths(options.paths);
  if (options.password.length === 0 || /[\r\n\0]/.test(options.password)) throw new TransferConfigError("password", "must be non-empty and on one line");
  return {
    [SECRET_KEY.stunnelConf]: stunnelClientConfig({
      acceptPort: options.localPort ?? STUNNEL_CLIENT_DEFAULT_LOCAL_PORT,
      connectHost: options.endpointHost,
      connectPort: options.endpointPort,
      certPath: configFile(paths, SECRET_KEY.cert),
      keyPath: configFile(paths, SECRET_KEY.key),
      caPath: configFile(paths, SECRET_KEY.ca),
      ...definedFields({ checkHost: options.checkHost || undefined, proxy: options.proxy, logLevel: options.stunnelLogLevel || undefined }),
    }),
    [SECRET_KEY.cert]: options.pki.clientCertPem,
    [SECRET_KEY.key]: options.pki.clientKeyPem,
    [SECRET_KEY.ca]: options.pki.caCertPem,
    [SECRET_KEY.rsyncPassword]: options.password,
  };
}
