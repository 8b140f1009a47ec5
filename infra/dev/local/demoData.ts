/**
 * Data to migrate, for the node-mode demo and tests: a folder with the shapes that break naive copies.
 * Nested directories, many small files and a few large ones (random, incompressible content), relative,
 * absolute and dangling symlinks, hard links, a sparse file, an empty file, non-ASCII names, several
 * permission modes and, when asked, several owners.
 */
import { randomBytes } from "node:crypto";
import { chmodSync, chownSync, closeSync, lchownSync, linkSync, mkdirSync, openSync, symlinkSync, writeFileSync, writeSync } from "node:fs";
import { join } from "node:path";

export interface DatasetOptions {
  /** Total bytes of regular-file content, roughly. */
  bytes: number;
  /** At least this many regular files. */
  files: number;
  /** Owners to spread the files over (uid:gid); default: leave them as created. */
  owners?: { uid: number; gid: number }[];
  /** A seed for names and sizes (content is random either way). */
  seed?: number;
}

export interface DatasetSummary {
  files: number;
  bytes: number;
  directories: number;
  symlinks: number;
  hardLinks: number;
}

/** A small deterministic generator for names and sizes, so two runs make the same tree shape. */
function sequence(seed: number): () => number {
  let state = seed >>> 0 || 1;
  return () => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return (state >>> 0) / 0x1_0000_0000;
  };
}

/** The data set's absolute symlink (its target is outside the volume, as such links usually are). */
export const ABSOLUTE_LINK = "absolute-link";
export const ABSOLUTE_LINK_TARGET = "/etc/hostname";

const MODES = [0o644, 0o600, 0o640, 0o755, 0o444, 0o700] as const;
const NAMES = ["données-été", "日本語", "emoji-🚀", "space name", "ÅÄÖ", "tab\tname", "dash-name"] as const;

export function writeDataset(root: string, options: DatasetOptions): DatasetSummary {
  const next = sequence(options.seed ?? 42);
  const summary: DatasetSummary = { files: 0, bytes: 0, directories: 0, symlinks: 0, hardLinks: 0 };
  const owner = (path: string, i: number) => {
    const chosen = options.owners?.[i % options.owners.length];
    if (chosen) chownSync(path, chosen.uid, chosen.gid);
  };
  // 1/4 of the bytes go into a few large files, the rest spread over the small ones.
  const largeCount = 4;
  const largeBytes = Math.floor(options.bytes / 4 / largeCount);
  const smallBytes = Math.max(1, Math.floor((options.bytes - largeBytes * largeCount) / options.files));
  const directories: string[] = [];
  for (let a = 0; a < 8; a++) {
    for (let b = 0; b < 5; b++) {
      for (let c = 0; c < 3; c++) directories.push(join(`d${a}-${NAMES[(a + b) % NAMES.length]}`, `sub${b}`, `leaf${c}`));
    }
  }
  const made = new Set<string>();
  for (const dir of directories) {
    // Level by level, so that every folder (not only the leaves) gets an owner.
    const parts = dir.split("/");
    for (let depth = 1; depth <= parts.length; depth++) {
      const path = parts.slice(0, depth).join("/");
      if (made.has(path)) continue;
      mkdirSync(join(root, path));
      owner(join(root, path), made.size);
      made.add(path);
      summary.directories++;
    }
  }
  const files: string[] = [];
  for (let i = 0; i < options.files; i++) {
    const dir = directories[Math.floor(next() * directories.length)]!;
    const name = `${i}-${NAMES[i % NAMES.length]}.bin`;
    const path = join(root, dir, name);
    // Sizes vary from 0.2x to 1.8x the mean, so a few blocks and some partial ones.
    const size = Math.max(1, Math.floor(smallBytes * (0.2 + 1.6 * next())));
    writeFileSync(path, randomBytes(size));
    chmodSync(path, MODES[i % MODES.length]!);
    owner(path, i);
    files.push(join(dir, name));
    summary.files++;
    summary.bytes += size;
  }
  for (let i = 0; i < largeCount; i++) {
    const path = join(root, `large-${i}.dat`);
    const fd = openSync(path, "w");
    const chunk = 4 * 1024 * 1024;
    for (let written = 0; written < largeBytes; written += chunk) writeSync(fd, randomBytes(Math.min(chunk, largeBytes - written)));
    closeSync(fd);
    owner(path, i);
    summary.files++;
    summary.bytes += largeBytes;
  }
  // The odd shapes.
  writeFileSync(join(root, "empty"), "");
  const sparse = openSync(join(root, "sparse.img"), "w");
  writeSync(sparse, randomBytes(4096), 0, 4096, 0);
  writeSync(sparse, randomBytes(4096), 0, 4096, 16 * 1024 * 1024 - 4096);
  closeSync(sparse);
  summary.files += 2;
  summary.bytes += 16 * 1024 * 1024;
  symlinkSync(join("..", "..", "..", files[0]!), join(root, directories[1]!, "relative-link"));
  symlinkSync(ABSOLUTE_LINK_TARGET, join(root, ABSOLUTE_LINK));
  symlinkSync("does/not/exist", join(root, "dangling-link"));
  for (const link of [join(directories[1]!, "relative-link"), ABSOLUTE_LINK, "dangling-link"]) {
    const chosen = options.owners?.[0];
    if (chosen) lchownSync(join(root, link), chosen.uid, chosen.gid);
  }
  summary.symlinks += 3;
  linkSync(join(root, files[1]!), join(root, "hard-link-a"));
  linkSync(join(root, files[1]!), join(root, directories[2]!, "hard-link-b"));
  summary.hardLinks += 2;
  mkdirSync(join(root, "empty-dir"));
  chmodSync(join(root, "empty-dir"), 0o750);
  owner(join(root, "empty-dir"), 0);
  owner(join(root, "empty"), 0);
  owner(join(root, "sparse.img"), 0);
  summary.directories++;
  return summary;
}
