import { ControllerError } from "../contracts/controllerError";

/**
 * Guards for values that end up inside generated config files (rsyncd.conf, stunnel.conf) and shell
 * scripts. Both config formats are line-based `key = value` with no quoting, so a value carrying a
 * newline, a trailing backslash (rsyncd line continuation) or surrounding whitespace (trimmed by both
 * parsers) would silently change the meaning of the file. Such input is refused with an error naming
 * the option, never escaped into something else.
 */

/** Terminal: the same options are refused the same way on every try. */
export class TransferConfigError extends ControllerError {
  override readonly name = "TransferConfigError";
  readonly disposition = "terminal";
  constructor(
    /** The option that was refused, e.g. `modules[1].path`. */
    readonly field: string,
    reason: string,
  ) {
    super(`${field}: ${reason}`);
  }
}

// Control characters (including \n, \r, \t and NUL) end or corrupt a config line.
// eslint-disable-next-line no-control-regex
const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f]/;

/** A single-line config value: non-empty, no control characters, no surrounding whitespace. */
export function configValue(field: string, value: string): string {
  if (value.length === 0) throw new TransferConfigError(field, "must not be empty");
  if (CONTROL_CHARACTERS.test(value)) throw new TransferConfigError(field, "must not contain control characters or line breaks");
  if (value.trim() !== value) throw new TransferConfigError(field, "must not start or end with whitespace");
  if (value.endsWith("\\")) throw new TransferConfigError(field, "must not end with a backslash");
  return value;
}

/** An absolute path for a config file; relative paths would depend on the daemon's working directory. */
export function absolutePath(field: string, value: string): string {
  configValue(field, value);
  if (!value.startsWith("/")) throw new TransferConfigError(field, `must be an absolute path, got "${value}"`);
  return value;
}

export function tcpPort(field: string, value: number): number {
  if (!Number.isInteger(value) || value < 1 || value > 65535) {
    throw new TransferConfigError(field, `must be a TCP port (1-65535), got ${value}`);
  }
  return value;
}

/** A host name or IP literal as it may appear in `connect = host:port` and URLs. */
export function hostName(field: string, value: string): string {
  configValue(field, value);
  if (!/^[A-Za-z0-9.:_-]+$/.test(value)) throw new TransferConfigError(field, `must be a host name or IP address, got "${value}"`);
  return value;
}

export function isIpAddress(host: string): boolean {
  return /^\d{1,3}(\.\d{1,3}){3}$/.test(host) || host.includes(":");
}

/** `host:port` for URLs (rsync://): IPv6 literals in brackets. */
export function hostPort(host: string, port: number): string {
  return host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`;
}

/**
 * `host:port` for stunnel's accept/connect: no brackets, stunnel splits at the last colon
 * (`[::]:6443` fails to resolve; `:::6443` is the IPv6 wildcard).
 */
export function stunnelHostPort(host: string, port: number): string {
  return `${host}:${port}`;
}

/** Renders `key = value` lines; `undefined` values are left out so optional settings stay optional. */
export function renderSettings(settings: ReadonlyArray<readonly [string, string | number | undefined]>): string[] {
  return settings.filter((entry): entry is readonly [string, string | number] => entry[1] !== undefined).map(([key, value]) => `${key} = ${value}`);
}

/** Quotes one word for POSIX shells: single quotes, with embedded single quotes closed and escaped. */
export function shellQuote(word: string): string {
  if (/^[A-Za-z0-9_./:=@%+,-]+$/.test(word)) return word;
  return `'${word.replace(/'/g, `'\\''`)}'`;
}

/**
 * How often a transfer pod's own script checks a condition inside its pod (the stunnel sidecar listening,
 * the rsync container's done-file). Both sit on the transfer's critical path: a 1 s poll put up to a
 * second before the first byte (bench/firstByte.ts) and another after the last one, before the pod could
 * end.
 */
export const IN_POD_POLL_SECONDS = 0.1;

/** A POSIX sh sleep of IN_POD_POLL_SECONDS; an image whose sleep takes whole seconds only falls back to 1 instead of spinning. */
export const IN_POD_POLL_SLEEP = `sleep ${IN_POD_POLL_SECONDS} 2>/dev/null || sleep 1`;
