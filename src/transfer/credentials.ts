/**
 * The rsync daemon password. Upstream used 6 letters from math/rand seeded with the time; here it is
 * drawn from the OS CSPRNG, at least 32 characters of base62 (about 5.95 bits each, so the default 48
 * characters carry ~285 bits). Base62 needs no quoting in an rsyncd secrets file, an env var, a shell
 * or YAML.
 */
import { randomBytes } from "node:crypto";
import { TransferConfigError } from "./configText";

export const RSYNC_PASSWORD_MIN_LENGTH = 32;
export const RSYNC_PASSWORD_DEFAULT_LENGTH = 48;

const BASE62 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
// Bytes at or above this are rejected so that every character is equally likely (256 % 62 != 0).
const UNBIASED_LIMIT = 256 - (256 % BASE62.length);

export function generateRsyncPassword(length: number = RSYNC_PASSWORD_DEFAULT_LENGTH): string {
  if (!Number.isInteger(length) || length < RSYNC_PASSWORD_MIN_LENGTH) {
    throw new TransferConfigError("length", `must be an integer of at least ${RSYNC_PASSWORD_MIN_LENGTH}, got ${length}`);
  }
  let password = "";
  while (password.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte >= UNBIASED_LIMIT) continue;
      password += BASE62[byte % BASE62.length];
      if (password.length === length) break;
    }
  }
  return password;
}

/**
 * The rsyncd `secrets file` content. rsync splits each line at the first colon and compares the rest
 * verbatim, so the user must not contain a colon and neither part may contain a line break.
 */
export function rsyncSecretsFile(user: string, password: string): string {
  if (!/^[A-Za-z0-9._-]+$/.test(user)) throw new TransferConfigError("user", "must be letters, digits, '.', '_' or '-'");
  if (password.length === 0 || /[\r\n\0]/.test(password)) {
    throw new TransferConfigError("password", "must be non-empty and on one line");
  }
  return `${user}:${password}\n`;
}
