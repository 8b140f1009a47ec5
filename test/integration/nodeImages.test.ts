/**
 * The node-mode images (infra/dev/local/nodes/images.ts running infra/dev/nodes/images.sh): built once (about
 * 3 minutes on a fresh machine), then served from the cache in well under a second. Beyond the
 * manifest, both archives are imported into a real, throwaway containerd and run with runc, as the
 * node harness will run them: the references come out exactly as named, the transfer image has what
 * the transfer pods run and starts as its non-root default user, and pause answers -v. A mirror whose
 * Release file is not signed by Debian stops the build.
 * Needs root, containerd and runc (Debian's packages); it fails, never skips, without them.
 */
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmdirSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { beforeAll, describe, expect, it } from "vitest";
import { ensureNodeImages, importBaseName, type NodeImages, NodeImagesError, NodeImagesUnavailableError } from "../../infra/dev/local/nodes/images";
import { spawnLogged, stopProcess, tailFile } from "../../infra/dev/local/processes";
import { found } from "../support/poll";

const run = promisify(execFile);
const FIRST_BUILD_TIMEOUT_MS = 20 * 60_000;

let images: NodeImages;
const firstProgress: string[] = [];

beforeAll(async () => {
  images = await ensureNodeImages({ onProgress: (line) => firstProgress.push(line) });
}, FIRST_BUILD_TIMEOUT_MS);

describe("node images", () => {
  it("are local references with pinned tags, and each archive's ref name is exactly that tag", async () => {
    expect(images.pauseImage).toMatch(/^localhost\/dvm-pause:3\.\d+\.\d+-[0-9a-f]{12}$/);
    expect(images.transferImage).toMatch(/^localhost\/dvm-transfer:bookworm-rsync-\d+\.\d+\.\d+-[0-9a-f]{12}$/);
    expect(images.localPathImage).toMatch(/^localhost\/dvm-local-path:v0\.0\.30-[0-9a-f]{12}$/);
    for (const [image, tar] of [
      [images.pauseImage, images.pauseTar],
      [images.transferImage, images.transferTar],
      [images.localPathImage, images.localPathTar],
    ] as const) {
      const { stdout } = await run("tar", ["-xOf", tar, "./index.json"], { encoding: "utf8" });
      const index = JSON.parse(stdout) as { manifests: Array<{ annotations?: Record<string, string> }> };
      // `ctr images import --base-name localhost/NAME` names the image NAME:<this annotation>.
      expect(index.manifests.map((m) => m.annotations?.["org.opencontainers.image.ref.name"])).toEqual([image.slice(importBaseName(image).length + 1)]);
    }
  });

  it("come from the cache the second time, unchanged", async () => {
    const progress: string[] = [];
    expect(await ensureNodeImages({ onProgress: (line) => progress.push(line) })).toEqual(images);
    expect(progress.join("\n")).toMatch(/cached/);
    expect(progress.join("\n")).not.toMatch(/debootstrap|compiling/);
  });

  it("import into a real containerd and run with runc: rsync, stunnel and the tools the pods use, as a non-root default user", async () => {
    await withThrowawayContainerd(async (ctr) => {
      for (const [image, tar] of [
        [images.pauseImage, images.pauseTar],
        [images.transferImage, images.transferTar],
        [images.localPathImage, images.localPathTar],
      ] as const) {
        await ctr("images", "import", "--base-name", importBaseName(image), tar);
      }
      const listed = (await ctr("images", "ls", "--quiet")).split("\n");
      expect(listed).toEqual(expect.arrayContaining([images.pauseImage, images.transferImage, images.localPathImage]));
      // local-path-provisioner: the one static binary, as the image's non-root default user.
      expect((await ctr("run", "--rm", images.localPathImage, "local-path-check", "local-path-provisioner", "--version")).trim()).toBe(
        "local-path-provisioner version v0.0.30",
      );

      const script = [
        "id -u; id -g; rsync --version | sed -n 1p; stunnel -version 2>&1 | grep '^stunnel [0-9]'",
        "for c in sh bash cat chmod rm sleep touch openssl; do command -v $c >/dev/null || echo missing $c; done",
        // Hardening: no setuid/setgid programs, and nothing of the build host (its resolvers, its name).
        "find / -xdev -type f -perm /6000 | sed 's/^/setuid /'",
        "[ -s /etc/resolv.conf ] && echo host resolv.conf: $(cat /etc/resolv.conf)",
        "[ -e /etc/hostname ] && echo host name: $(cat /etc/hostname)",
        "true",
      ].join("\n");
      const transfer = (await ctr("run", "--rm", images.transferImage, "transfer-check", "bash", "-c", script)).trim().split("\n");
      expect(transfer[0]).toBe("65534");
      expect(transfer[1]).toBe("65534");
      expect(transfer[2]).toMatch(/^rsync {2}version 3\.\d+\.\d+ /);
      expect(transfer[3]).toMatch(/^stunnel 5\.\d+ /);
      expect(transfer.slice(4)).toEqual([]);

      expect((await ctr("run", "--rm", images.pauseImage, "pause-check", "/pause", "-v")).trim()).toMatch(/^pause\.c v3\.\d+\.\d+-v1\.\d+\.\d+$/);
    });
  });

  it("refuse a Debian archive whose Release file is not signed by Debian (the mirror is plain http)", async () => {
    const scratchCache = mkdtempSync(join(tmpdir(), "dvm-node-images-mirror-"));
    const requested: string[] = [];
    const release = readFileSync(join(import.meta.dirname, "..", "support", "fixtures", "InRelease.untrusted-key"));
    // A mirror on loopback that an attacker controls: its InRelease is signed, but by a key of its own.
    const mirror = createServer((request, response) => {
      requested.push(request.url ?? "");
      if (request.url?.endsWith("/dists/bookworm/InRelease")) response.end(release);
      else response.writeHead(404).end();
    });
    await new Promise<void>((resolve) => mirror.listen(0, "127.0.0.1", resolve));
    const { port } = mirror.address() as AddressInfo;
    try {
      const url = `http://127.0.0.1:${port}`;
      const env = { ...process.env, DVM_CACHE_DIR: scratchCache, DVM_DEBIAN_MIRROR: `${url}/debian`, DVM_DEBIAN_SECURITY_MIRROR: `${url}/debian-security` };
      const attempt = ensureNodeImages({ env, onProgress: () => {} });
      await expect(attempt).rejects.toBeInstanceOf(NodeImagesError);
      await expect(attempt).rejects.toThrow(/transfer-debootstrap: FAILED[\s\S]*(signed by unknown key|Invalid Release signature)/);
      expect(requested).toContain("/debian/dists/bookworm/InRelease");
      // Nothing half-built is kept, nothing stays mounted.
      expect(readdirSync(join(scratchCache, "images")).filter((name) => name.startsWith("transfer-") || name.startsWith(".work-"))).toEqual([]);
      expect(mountsUnder(scratchCache)).toEqual([]);
    } finally {
      await new Promise((resolve) => mirror.close(resolve));
      rmSync(scratchCache, { recursive: true, force: true });
    }
  });

  it("on a machine that cannot build them, fail with one line saying what to install (the caller then uses kwok mode)", async () => {
    const emptyCache = mkdtempSync(join(tmpdir(), "dvm-node-images-none-"));
    try {
      // No /usr/sbin on PATH: no debootstrap and no chroot, as on a machine without the packages.
      const attempt = ensureNodeImages({ env: { ...process.env, DVM_CACHE_DIR: emptyCache, PATH: "/usr/bin:/bin" }, onProgress: () => {} });
      await expect(attempt).rejects.toBeInstanceOf(NodeImagesUnavailableError);
      await expect(attempt).rejects.toThrow(/^cannot build the node images here \(.*no debootstrap.*\): as root, apt-get install -y debootstrap umoci gcc/);
      expect(readdirSync(emptyCache)).toEqual([]);
    } finally {
      rmSync(emptyCache, { recursive: true, force: true });
    }
  });
});

type Ctr = (...args: string[]) => Promise<string>;

const CONTAINERD_NAMESPACE = "dvm-images-test";

/**
 * A containerd of its own (root, state, socket and opt dir in a temp dir; no CRI plugin), stopped and
 * removed afterwards, with the cgroups its containers used.
 */
async function withThrowawayContainerd(body: (ctr: Ctr) => Promise<void>): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "dvm-ctd-"));
  const socket = join(dir, "containerd.sock");
  writeFileSync(
    join(dir, "config.toml"),
    [
      "version = 2",
      `root = "${dir}/root"`,
      `state = "${dir}/state"`,
      'disabled_plugins = ["io.containerd.grpc.v1.cri"]',
      "[grpc]",
      `  address = "${socket}"`,
      "[ttrpc]",
      `  address = "${socket}.ttrpc"`,
      // Its default is /opt/containerd, created on start.
      '[plugins."io.containerd.internal.v1.opt"]',
      `  path = "${dir}/opt"`,
      "",
    ].join("\n"),
  );
  const logFile = join(dir, "containerd.log");
  const containerd = spawnLogged({ name: "containerd", command: "containerd", args: ["--config", join(dir, "config.toml")], logFile });
  const ctr: Ctr = async (...args) =>
    (await run("ctr", ["--address", socket, "--namespace", CONTAINERD_NAMESPACE, ...args], { encoding: "utf8", timeout: 120_000 })).stdout;
  try {
    await found(
      "containerd",
      async () => {
        if (!containerd.isRunning()) throw new Error(`containerd exited:\n${tailFile(logFile)}`);
        return existsSync(socket) && (await ctr("version")).includes("Server:");
      },
      { timeoutMs: 30_000, intervalMs: 100, retryErrors: true, context: () => tailFile(logFile) },
    );
    await body(ctr);
  } finally {
    await stopProcess(containerd);
    for (const mount of mountsUnder(dir).reverse()) await run("umount", ["-l", mount]).catch(() => {});
    rmSync(dir, { recursive: true, force: true });
    // runc puts each container in /<namespace>/<id> of every hierarchy; the ids are gone, remove the rest.
    for (const hierarchy of readdirSync("/sys/fs/cgroup")) {
      const cgroup = join("/sys/fs/cgroup", hierarchy, CONTAINERD_NAMESPACE);
      if (existsSync(cgroup)) rmdirSync(cgroup);
    }
  }
}

function mountsUnder(dir: string): string[] {
  return readFileSync("/proc/self/mounts", "utf8")
    .split("\n")
    .map((line) => line.split(" ")[1] ?? "")
    .filter((mount) => mount.startsWith(`${dir}/`));
}
