/**
 * A manifest to prove a copy is exact: per entry, its type, mode, owner, size, sha256 (files), link target
 * (symlinks) and which paths share an inode (hard links). Two folders hold the same data exactly when
 * their manifests are equal. The data itself comes from infra/dev/local/demoData.ts.
 */
import { createHash } from "node:crypto";
import { createReadStream, lstatSync, readdirSync, readlinkSync } from "node:fs";
import { join, relative } from "node:path";

export { writeDataset } from "../../infra/dev/local/demoData";

export interface ManifestEntry {
  type: "file" | "directory" | "symlink" | "other";
  mode: string;
  uid?: number;
  gid?: number;
  size?: number;
  sha256?: string;
  target?: string;
  /** Other paths of the same inode (hard links), sorted. */
  links?: string[];
}

export type Manifest = Record<string, ManifestEntry>;

export interface ManifestOptions {
  /** Record owners (uid/gid): only where ownership is meant to be preserved. */
  owners?: boolean;
  /** Paths to leave out (rsync's lost+found exclusion). */
  exclude?: (relativePath: string) => boolean;
}

export async function manifest(root: string, options: ManifestOptions = {}): Promise<Manifest> {
  const entries: Manifest = {};
  const byInode = new Map<string, string[]>();
  const walk = async (dir: string) => {
    for (const name of readdirSync(dir).sort()) {
      const path = join(dir, name);
      const rel = relative(root, path);
      if (options.exclude?.(rel)) continue;
      const stat = lstatSync(path);
      const entry: ManifestEntry = {
        type: stat.isFile() ? "file" : stat.isDirectory() ? "directory" : stat.isSymbolicLink() ? "symlink" : "other",
        mode: (stat.mode & 0o7777).toString(8),
        ...(options.owners ? { uid: stat.uid, gid: stat.gid } : {}),
      };
      if (entry.type === "symlink") {
        entry.target = readlinkSync(path);
        delete (entry as { mode?: string }).mode; // a symlink's own mode means nothing on Linux
      }
      if (entry.type === "file") {
        entry.size = stat.size;
        entry.sha256 = await sha256(path);
        if (stat.nlink > 1) {
          const key = `${stat.dev}:${stat.ino}`;
          byInode.set(key, [...(byInode.get(key) ?? []), rel]);
        }
      }
      entries[rel] = entry;
      if (entry.type === "directory") await walk(path);
    }
  };
  await walk(root);
  for (const paths of byInode.values()) {
    for (const path of paths) entries[path]!.links = paths.filter((p) => p !== path).sort();
  }
  return entries;
}

function sha256(path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const hash = createHash("sha256");
    createReadStream(path)
      .on("data", (chunk) => hash.update(chunk))
      .on("error", reject)
      .on("end", () => resolve(hash.digest("hex")));
  });
}

/** The differences between two manifests, as readable lines (empty when they are equal). */
export function manifestDiff(expected: Manifest, actual: Manifest, limit = 20): string[] {
  const lines: string[] = [];
  for (const [path, entry] of Object.entries(expected)) {
    const other = actual[path];
    if (!other) lines.push(`missing: ${path}`);
    else if (JSON.stringify(entry) !== JSON.stringify(other)) lines.push(`differs: ${path}: ${JSON.stringify(entry)} != ${JSON.stringify(other)}`);
  }
  for (const path of Object.keys(actual)) if (!expected[path]) lines.push(`unexpected: ${path}`);
  return lines.slice(0, limit);
}
