/**
 * The three container images node mode runs, the pause image (containerd's sandbox_image), the
 * transfer image (rsync, stunnel, openssl; also the local-path helper pods') and rancher's
 * local-path-provisioner (the clusters' default storage, as kind ships it), built without any registry by infra/dev/nodes/images.sh and
 * cached under ~/.cache/dvm-controlplane/images. The script is run every time: it alone decides
 * whether the cache matches the current recipe, and a cached run takes a fraction of a second. What it
 * built is read from the images.env manifest whose path it prints last.
 */
import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { isAbsolute } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { z } from "zod";
import { childEnvironment } from "../config";

export const NODE_IMAGES_SCRIPT = fileURLToPath(new URL("../../nodes/images.sh", import.meta.url));

/** The script's exit code when this machine cannot build the images (not root, tools missing). */
export const CANNOT_BUILD_EXIT_CODE = 2;

export interface NodeImages {
  /** localhost/dvm-pause:<tag>, for containerd's sandbox_image. */
  pauseImage: string;
  /** OCI archive: `ctr -n k8s.io images import --base-name <importBaseName(pauseImage)> <pauseTar>`. */
  pauseTar: string;
  /** localhost/dvm-transfer:<tag>, the transfer pods' image (imagePullPolicy: Never). */
  transferImage: string;
  /** OCI archive, imported like pauseTar. */
  transferTar: string;
  /** localhost/dvm-local-path:<tag>, the local-path-provisioner's pod. */
  localPathImage: string;
  /** OCI archive, imported like pauseTar. */
  localPathTar: string;
}

/** This machine cannot build the images; the message is the script's one line saying what to install. */
export class NodeImagesUnavailableError extends Error {
  override readonly name = "NodeImagesUnavailableError";
}

/** The build ran and failed, or its manifest is not what this module expects. */
export class NodeImagesError extends Error {
  override readonly name = "NodeImagesError";
}

export interface NodeImagesOptions {
  /** Each progress line of the script (its stderr). Default: written to this process's stderr. */
  onProgress?: (line: string) => void;
  /** The script's environment (DVM_CACHE_DIR, KUBE_VERSION, DVM_DEBIAN_MIRROR...). Default this process's. */
  env?: NodeJS.ProcessEnv;
}

/** Builds the images when the cache does not have them for the current recipe, and returns them. */
export async function ensureNodeImages(options: NodeImagesOptions = {}): Promise<NodeImages> {
  const onProgress = options.onProgress ?? ((line: string) => process.stderr.write(`${line}\n`));
  const { code, stdout, lastLines } = await runScript(options.env ?? childEnvironment(), onProgress);
  if (code === CANNOT_BUILD_EXIT_CODE) {
    throw new NodeImagesUnavailableError(lastLines.at(-1)?.replace(/^\[images\] /, "") ?? `${NODE_IMAGES_SCRIPT} cannot build here`);
  }
  if (code !== 0) {
    throw new NodeImagesError(`${NODE_IMAGES_SCRIPT} failed (exit ${code}):\n${lastLines.join("\n")}`);
  }
  const manifest = stdout.trim().split("\n").at(-1) ?? "";
  return readImagesManifest(manifest);
}

const imageReference = (name: string) =>
  z.string().regex(new RegExp(`^localhost/${name}:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`), `must be localhost/${name}:<tag>`);
const archivePath = z
  .string()
  .refine(isAbsolute, "must be an absolute path")
  .refine((path) => existsSync(path), "no such file");

const manifestSchema = z.object({
  DVM_PAUSE_IMAGE: imageReference("dvm-pause"),
  DVM_PAUSE_TAR: archivePath,
  DVM_TRANSFER_IMAGE: imageReference("dvm-transfer"),
  DVM_TRANSFER_TAR: archivePath,
  DVM_LOCAL_PATH_IMAGE: imageReference("dvm-local-path"),
  DVM_LOCAL_PATH_TAR: archivePath,
});

/** Parses images.env (KEY=VALUE lines, # comments); a missing or malformed entry is named in the error. */
export function readImagesManifest(path: string): NodeImages {
  if (!isAbsolute(path) || !existsSync(path)) throw new NodeImagesError(`images manifest not found: "${path}"`);
  const entries: Record<string, string> = {};
  for (const line of readFileSync(path, "utf8").split("\n")) {
    const match = /^([A-Z_][A-Z0-9_]*)=(.*)$/.exec(line.trim());
    if (match?.[1] !== undefined) entries[match[1]] = match[2] ?? "";
  }
  const parsed = manifestSchema.safeParse(entries);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => `${issue.path.join(".")}: ${issue.message}`);
    throw new NodeImagesError(`${path}: ${problems.join("; ")}`);
  }
  const m = parsed.data;
  return {
    pauseImage: m.DVM_PAUSE_IMAGE,
    pauseTar: m.DVM_PAUSE_TAR,
    transferImage: m.DVM_TRANSFER_IMAGE,
    transferTar: m.DVM_TRANSFER_TAR,
    localPathImage: m.DVM_LOCAL_PATH_IMAGE,
    localPathTar: m.DVM_LOCAL_PATH_TAR,
  };
}

/** "localhost/dvm-pause:3.10.2-abc" -> "localhost/dvm-pause", what `ctr images import --base-name` takes. */
export function importBaseName(image: string): string {
  const colon = image.lastIndexOf(":");
  return colon > image.lastIndexOf("/") ? image.slice(0, colon) : image;
}

// Keeps stdout whole (the paths) and streams stderr line by line, remembering the last lines for errors.
function runScript(env: NodeJS.ProcessEnv, onProgress: (line: string) => void): Promise<{ code: number | null; stdout: string; lastLines: string[] }> {
  return new Promise((resolve, reject) => {
    const child = spawn("bash", [NODE_IMAGES_SCRIPT], { env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    const lastLines: string[] = [];
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
    const stderrDone = new Promise<void>((done) => {
      createInterface({ input: child.stderr })
        .on("line", (line) => {
          lastLines.push(line);
          if (lastLines.length > 50) lastLines.shift();
          onProgress(line);
        })
        .on("close", done);
    });
    child.once("error", (error) => reject(new NodeImagesError(`could not run ${NODE_IMAGES_SCRIPT}: ${error.message}`)));
    child.once("close", (code) => void stderrDone.then(() => resolve({ code, stdout, lastLines })));
  });
}
