/**
 * stunnel configurations for the two ends of the tunnel (stunnel 5.x, OpenSSL 3). Compared with
 * upstream (TLSv1.2, one shared self-signed certificate, verification off on the client) both ends
 * here speak TLS 1.3 only and verify each other: the server requires a client certificate chained to
 * the migration's CA, the client requires the server certificate chained to the same CA and naming
 * the host it expects. Logging stays at `info`: connections, the negotiated protocol and peer
 * verification results, no key material (stunnel never logs keys).
 *
 * Behind an HTTP CONNECT proxy (the operator's DVM_STUNNEL_TCP_PROXY, upstream's STUNNEL_TCP_PROXY) the
 * client dials the proxy (`connect`), asks it for the server (`protocol = connect`, `protocolHost`),
 * and only then starts TLS: the certificate checks and SNI still name the server, never the proxy.
 */
import {
  absolutePath,
  configValue,
  hostName,
  stunnelHostPort as hostPort,
  hostPort as httpHostPort,
  IN_POD_POLL_SLEEP,
  isIpAddress,
  shellQuote as q,
  renderSettings,
  TransferConfigError,
  tcpPort,
} from "./configText";

/** syslog level names stunnel accepts for `debug`. */
export type StunnelLogLevel = "emerg" | "alert" | "crit" | "err" | "warning" | "notice" | "info" | "debug";

export const STUNNEL_DEFAULT_LOG_LEVEL: StunnelLogLevel = "info";
export const STUNNEL_SERVICE_NAME = "rsync";

/** Settings shared by both ends. */
export interface StunnelCommonOptions {
  /** This end's certificate (PEM). */
  certPath: string;
  /** This end's private key (PKCS#8 PEM). */
  keyPath: string;
  /** The migration CA that the peer's certificate must chain to. */
  caPath: string;
  /** Where stunnel writes its pid. Default: none (`pid =`), so a read-only root filesystem works. */
  pidFile?: string;
  /** Stay in the foreground and log to stderr, as a container's main process must. Default true. */
  foreground?: boolean;
  /** Default "info". "debug" is for stunnel developers and very noisy. */
  logLevel?: StunnelLogLevel;
  /** Also append log lines to this file (tests read the negotiated protocol from it). */
  logFile?: string;
  /** Service section name; appears in every log line. Default "rsync". */
  serviceName?: string;
}

export interface StunnelServerOptions extends StunnelCommonOptions {
  /** Where TLS connections arrive (the Service/Route backend port). */
  acceptPort: number;
  /**
   * Bind address. Default: stunnel's own (`accept = <port>`: all IPv4 addresses). Use "::" for
   * IPv6 or dual-stack pods.
   */
  acceptHost?: string;
  /** The rsync daemon, in the same pod. Default 127.0.0.1. */
  connectHost?: string;
  connectPort: number;
}

/**
 * The proxy's user name and password (HTTP basic). The password is kept in a private field: it is not
 * in JSON.stringify's output nor in util.inspect's, so a policy or context that is logged does not
 * carry it. Only the stunnel config (which lives in the transfer Secret) and policyEnv read it.
 */
export class ProxyCredentials {
  readonly #password: string;
  constructor(
    readonly username: string,
    password: string,
  ) {
    this.#password = password;
  }
  password(): string {
    return this.#password;
  }
  toJSON(): { username: string; password: string } {
    return { username: this.username, password: "<redacted>" };
  }
}

/** An HTTP CONNECT proxy between the client and the server (stunnel's `protocol = connect`). */
export interface StunnelProxy {
  host: string;
  port: number;
  credentials?: ProxyCredentials;
}

export interface StunnelClientOptions extends StunnelCommonOptions {
  /** Where the rsync client connects in plain text. Default 127.0.0.1 (loopback only). */
  acceptHost?: string;
  acceptPort: number;
  /** The endpoint in front of the server (Route host, Service name or address). */
  connectHost: string;
  connectPort: number;
  /**
   * The name the server certificate must carry. Default: `connectHost` (checked as `checkIP` when it
   * is an IP address). Set it when the client dials an address the certificate does not name, such
   * as a NodePort or a load balancer.
   */
  checkHost?: string;
  /** Dial this proxy and CONNECT through it to connectHost:connectPort. Default: dial directly. */
  proxy?: StunnelProxy;
}

export function stunnelServerConfig(options: StunnelServerOptions): string {
  const accept =
    options.acceptHost === undefined
      ? String(tcpPort("acceptPort", options.acceptPort))
      : hostPort(hostName("acceptHost", options.acceptHost), tcpPort("acceptPort", options.acceptPort));
  return render(options, [
    ["accept", accept],
    ["connect", hostPort(hostName("connectHost", options.connectHost ?? "127.0.0.1"), tcpPort("connectPort", options.connectPort))],
    // requireCert is implied by verifyChain in stunnel 5, but stated so the intent survives edits.
    ["verifyChain", "yes"],
    ["requireCert", "yes"],
  ]);
}

export function stunnelClientConfig(options: StunnelClientOptions): string {
  const connectHost = hostName("connectHost", options.connectHost);
  const connectPort = tcpPort("connectPort", options.connectPort);
  const expected = options.checkHost ?? connectHost;
  const { proxy } = options;
  // A TLS-passthrough Route picks the backend by SNI, so it carries the dialled name (not checkHost).
  // Through a proxy it is set either way (empty: none), so stunnel never sends the proxy's name.
  const sni = isIpAddress(connectHost) ? (proxy ? "" : undefined) : connectHost;
  return render(options, [
    ["client", "yes"],
    ["accept", hostPort(hostName("acceptHost", options.acceptHost ?? "127.0.0.1"), tcpPort("acceptPort", options.acceptPort))],
    // The proxy is sent the server verbatim in "CONNECT host:port": an IPv6 literal goes in brackets.
    ...(proxy ? proxySettings(proxy, httpHostPort(connectHost, connectPort)) : [["connect", hostPort(connectHost, connectPort)] as const]),
    ["verifyChain", "yes"],
    // Without a subject check any certificate of the CA would do; pin the server's own name.
    isIpAddress(expected) ? ["checkIP", hostName("checkHost", expected)] : ["checkHost", hostName("checkHost", expected)],
    ["sni", sni],
  ]);
}

/** `connect` to the proxy, then an HTTP CONNECT for `server` (with basic authentication if any). */
function proxySettings(proxy: StunnelProxy, server: string): Array<readonly [string, string | undefined]> {
  const settings: Array<readonly [string, string | undefined]> = [
    ["connect", hostPort(hostName("proxy.host", proxy.host), tcpPort("proxy.port", proxy.port))],
    ["protocol", "connect"],
    ["protocolHost", server],
  ];
  if (proxy.credentials) {
    const username = configValue("proxy.username", proxy.credentials.username);
    // Basic authentication sends "user:password": a colon in the user name would split it elsewhere.
    if (username.includes(":")) throw new TransferConfigError("proxy.username", "must not contain ':'");
    settings.push(
      ["protocolAuthentication", "basic"],
      ["protocolUsername", username],
      // Never echoed in an error: configValue names the field only.
      ["protocolPassword", configValue("proxy.password", proxy.credentials.password())],
    );
  }
  return settings;
}

function render(options: StunnelCommonOptions, endpoint: ReadonlyArray<readonly [string, string | undefined]>): string {
  const level = options.logLevel ?? STUNNEL_DEFAULT_LOG_LEVEL;
  const service = options.serviceName ?? STUNNEL_SERVICE_NAME;
  if (!/^[A-Za-z0-9_-]+$/.test(service)) throw new TransferConfigError("serviceName", "must be letters, digits, '_' or '-'");
  const global = renderSettings([
    ["foreground", (options.foreground ?? true) ? "yes" : "no"],
    // An empty value disables the pid file; the Debian default (/var/run/stunnel4.pid) is not writable.
    ["pid", options.pidFile === undefined ? "" : absolutePath("pidFile", options.pidFile)],
    // Containers have no syslog daemon; stderr (foreground) and `output` are the log.
    ["syslog", "no"],
    ["output", options.logFile === undefined ? undefined : absolutePath("logFile", options.logFile)],
    ["debug", level],
  ]).map((line) => line.replace(/ = $/, " ="));
  const section = renderSettings([
    ...endpoint,
    ["cert", absolutePath("certPath", options.certPath)],
    ["key", absolutePath("keyPath", options.keyPath)],
    ["CAfile", absolutePath("caPath", options.caPath)],
    // OpenSSL's default TLS 1.3 order (AES-256-GCM first). Measured between two network namespaces
    // (bench/datapath.ts, #27): preferring AES-128-GCM (alone or with 4 MiB socket buffers), dropping
    // TCP_NODELAY and rsync's --whole-file cut no CPU per GiB beyond the noise; stunnel `exec` of the
    // daemon (as VolSync does) and socat instead of stunnel cost more. The tunnel's cost is stunnel's I/O per 16 KiB record, not the
    // cipher (AES-GCM with AES-NI is about 0.25 s/GiB per end of the 1.3 to 2 s each stunnel takes).
    ["sslVersionMin", "TLSv1.3"],
    // Close both sides at once when one side ends, instead of waiting for a TLS close_notify.
    ["TIMEOUTclose", "0"],
    ["socket", "l:TCP_NODELAY=1"],
    ["socket", "r:TCP_NODELAY=1"],
  ]).map((line) => line.replace(/ = $/, " ="));
  return ["; Generated by the DVM controller (src/transfer/stunnel.ts). Edits are overwritten.", ...global, "", `[${service}]`, ...section, ""].join("\n");
}

/**
 * The stunnel client sidecar's entry point (POSIX sh). stunnel has no notion of "the job is done", so
 * the sidecar runs it in the background and exits 0 once the rsync container writes the done-file;
 * without this the client pod would never complete. It also stops when stunnel dies, with stunnel's
 * exit code, so a broken tunnel shows as a failed container.
 */
export function stunnelSidecarScript(options: { configPath: string; doneFile: string; stunnelBinary?: string }): string {
  const configPath = absolutePath("configPath", options.configPath);
  const doneFile = absolutePath("doneFile", options.doneFile);
  const binary = configValue("stunnelBinary", options.stunnelBinary ?? "stunnel");
  return [
    `${q(binary)} ${q(configPath)} &`,
    "stunnel_pid=$!",
    "trap 'kill -TERM \"$stunnel_pid\" 2>/dev/null' TERM INT",
    `while [ ! -e ${q(doneFile)} ]; do`,
    '  if ! kill -0 "$stunnel_pid" 2>/dev/null; then wait "$stunnel_pid"; exit $?; fi',
    `  ${IN_POD_POLL_SLEEP}`,
    "done",
    'kill -TERM "$stunnel_pid" 2>/dev/null',
    'wait "$stunnel_pid" 2>/dev/null',
    "exit 0",
    "",
  ].join("\n");
}
