/**
 * Reading infra/dev/nodes/images.sh's manifest (images.env): what the node harness gets, and a clear error
 * naming the entry when the file is not what it expects.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { importBaseName, NodeImagesError, readImagesManifest } from "../../../../infra/dev/local/nodes/images";

const dir = mkdtempSync(join(tmpdir(), "dvm-node-images-unit-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const pauseTar = join(dir, "pause.tar");
const transferTar = join(dir, "transfer.tar");
const localPathTar = join(dir, "local-path.tar");
writeFileSync(pauseTar, "");
writeFileSync(transferTar, "");
writeFileSync(localPathTar, "");

function manifest(lines: string[]): string {
  const path = join(dir, `images-${Math.random().toString(16).slice(2)}.env`);
  writeFileSync(path, ["# a comment", ...lines, ""].join("\n"));
  return path;
}

const good = [
  "DVM_PAUSE_IMAGE=localhost/dvm-pause:3.10.2-0123456789ab",
  `DVM_PAUSE_TAR=${pauseTar}`,
  "DVM_TRANSFER_IMAGE=localhost/dvm-transfer:bookworm-rsync-3.2.7-0123456789ab",
  `DVM_TRANSFER_TAR=${transferTar}`,
  "DVM_LOCAL_PATH_IMAGE=localhost/dvm-local-path:v0.0.30-0123456789ab",
  `DVM_LOCAL_PATH_TAR=${localPathTar}`,
];

describe("readImagesManifest", () => {
  it("returns the three images and their archives", () => {
    expect(readImagesManifest(manifest(good))).toEqual({
      pauseImage: "localhost/dvm-pause:3.10.2-0123456789ab",
      pauseTar,
      transferImage: "localhost/dvm-transfer:bookworm-rsync-3.2.7-0123456789ab",
      transferTar,
      localPathImage: "localhost/dvm-local-path:v0.0.30-0123456789ab",
      localPathTar,
    });
  });

  it("names a missing entry", () => {
    expect(() => readImagesManifest(manifest(good.filter((line) => !line.startsWith("DVM_TRANSFER_TAR"))))).toThrow(/DVM_TRANSFER_TAR/);
    expect(() => readImagesManifest(manifest(good.slice(0, 5)))).toThrow(/DVM_LOCAL_PATH_TAR/);
  });

  it("refuses an image that is not a local one, naming the entry", () => {
    const lines = [...good];
    lines[2] = "DVM_TRANSFER_IMAGE=quay.io/konveyor/rsync-transfer:latest";
    expect(() => readImagesManifest(manifest(lines))).toThrow(/DVM_TRANSFER_IMAGE: must be localhost\/dvm-transfer:<tag>/);
  });

  it("refuses an archive that does not exist, naming the entry", () => {
    const lines = [...good];
    lines[1] = `DVM_PAUSE_TAR=${join(dir, "gone.tar")}`;
    expect(() => readImagesManifest(manifest(lines))).toThrow(/DVM_PAUSE_TAR: no such file/);
  });

  it("says so when the manifest itself is missing", () => {
    expect(() => readImagesManifest(join(dir, "none.env"))).toThrow(NodeImagesError);
    expect(() => readImagesManifest("")).toThrow(/images manifest not found/);
  });
});

describe("importBaseName", () => {
  it("drops the tag, which ctr takes from the archive's ref name", () => {
    expect(importBaseName("localhost/dvm-pause:3.10.2-0123456789ab")).toBe("localhost/dvm-pause");
    expect(importBaseName("localhost:5000/dvm-transfer:x")).toBe("localhost:5000/dvm-transfer");
    expect(importBaseName("localhost:5000/dvm-transfer")).toBe("localhost:5000/dvm-transfer");
  });
});
