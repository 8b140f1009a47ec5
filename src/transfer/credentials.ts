/**
 * The rsync credentials. Upstream used one password of 6 letters from math/rand seeded with the time,
 * shared by every module; here the migration's secret is drawn from the OS CSPRNG, at least 32
 * characters of base62 (about 5.95 bits each, so the default 48 characters carry ~285 bits; base62
 * needs no quoting in an rsyncd secrets file, an env var, a shell or YAML), and each module (one
 * destination PVC) has a user and password of its own derived from it. A client Secret holds only its
 * module's credential: whoever reads it (the source namespace's tenant) can write into that module and
 * no other, and cannot work back to the migration's secret or another module's password.
 */
import { createHmac, randomBytes } from "node:crypto";
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

export interface RsyncCredential {
  user: string;
  password: string;
}

/**
 * The credential of one rsync module: the module's name as the user (the daemon admits that user into
 * that module only, `auth users`), and HMAC-SHA256(migration secret, module) as the password, so a
 * repeated phase renders the same credential without storing one per module.
 */
export function moduleCredential(migrationSecret: string, module: string): RsyncCredential {
  if (migrationSecret.length < RSYNC_PASSWORD_MIN_LENGTH)
    throw new TransferConfigError("migrationSecret", `must be at least ${RSYNC_PASSWORD_MIN_LENGTH} characters`);
  return { user: module, password: createHmac("sha256", migrationSecret).update(`rsync-module:${module}`).digest("hex") };
}

/**
 * The rsyncd `secrets file` content, one `user:password` line each. rsync splits each line at the first
 * colon and compares the rest verbatim, so a user must not contain a colon and neither part a line break.
 */
export function rsyncSecretsFile(credentials: readonly RsyncCredential[]): string {
  return credentials
    .map(({ user, password }) => {
      if (!/^[A-Za-z0-9._-]+$/.test(user)) throw new TransferConfigError("user", "must be letters, digits, '.', '_' or '-'");
      if (password.length === 0 || /[\r\n\0]/.test(password)) throw new TransferConfigError("password", "must be non-empty and on one line");
      return `${user}:${password}\n`;
    })
    .join("");
}
