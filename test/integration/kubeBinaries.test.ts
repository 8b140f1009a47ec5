/**
 * infra/dev/controlplane/build.sh's Kubernetes binaries: kube-apiserver for kwok mode, and kubelet,
 * kube-controller-manager, kube-scheduler and kube-proxy for node mode, all from one release (they must
 * agree with each other) and all static (CGO_ENABLED=0, so they run wherever the node harness puts
 * them). The script is run first: cached it takes a tenth of a second; otherwise it builds what is
 * missing (about 3 minutes for the node binaries once kube-apiserver is built).
 */
import { execFile } from "node:child_process";
import { closeSync, openSync, readSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { beforeAll, describe, expect, it } from "vitest";

const run = promisify(execFile);
const ROOT = join(import.meta.dirname, "..", "..");
const COMPONENTS = ["kube-apiserver", "kubelet", "kube-controller-manager", "kube-scheduler", "kube-proxy"];

let binDir: string;

beforeAll(async () => {
  const built = await run("bash", [join(ROOT, "infra", "dev", "controlplane", "build.sh")], { encoding: "utf8", timeout: 30 * 60_000 });
  binDir = built.stdout.trim().split("\n").at(-1)!;
}, 30 * 60_000);

describe("Kubernetes binaries", () => {
  it("all report the same release", async () => {
    const versions = await Promise.all(COMPONENTS.map(async (c) => (await run(join(binDir, c), ["--version"], { encoding: "utf8" })).stdout.trim()));
    expect(versions[0]).toMatch(/^Kubernetes v1\.\d+\.\d+$/);
    expect(new Set(versions)).toEqual(new Set([versions[0]]));
  });

  it.each(COMPONENTS)("%s is statically linked (no ELF interpreter)", (component) => {
    expect(hasElfInterpreter(join(binDir, component))).toBe(false);
  });

  it("the static check does see a dynamically linked program (it is not vacuous)", () => {
    expect(hasElfInterpreter("/bin/sh")).toBe(true);
  });
});

/** True when a 64-bit little-endian ELF file has a PT_INTERP program header (a dynamic loader). */
function hasElfInterpreter(path: string): boolean {
  const fd = openSync(path, "r");
  try {
    const header = Buffer.alloc(64);
    readSync(fd, header, 0, 64, 0);
    expect(header.subarray(0, 4).toString("latin1")).toBe("\x7fELF");
    const programHeaders = Number(header.readBigUInt64LE(0x20));
    const entrySize = header.readUInt16LE(0x36);
    const count = header.readUInt16LE(0x38);
    const table = Buffer.alloc(entrySize * count);
    readSync(fd, table, 0, table.length, programHeaders);
    const PT_INTERP = 3;
    return Array.from({ length: count }, (_, i) => table.readUInt32LE(i * entrySize)).includes(PT_INTERP);
  } finally {
    closeSync(fd);
  }
}
