#!/usr/bin/env bash
# Builds, once, the three container images that node mode runs, with no registry anywhere:
#   localhost/dvm-pause:<pause version>-<recipe>          Kubernetes' own build/pause/linux/pause.c, static
#   localhost/dvm-transfer:<suite>-rsync-<version>-<recipe>   Debian minbase + rsync, stunnel4, openssl,
#                                                              with the suite's -updates and -security fixes
#   localhost/dvm-local-path:<version>-<recipe>           rancher's local-path-provisioner (kind's default
#                                                          storage), one static binary from the Go module
#                                                          proxy; its helper pods run the transfer image
# Each is an OCI image layout made by umoci, tarred for
#   ctr -n k8s.io images import --base-name localhost/dvm-pause    <pause tar>
#   ctr -n k8s.io images import --base-name localhost/dvm-transfer <transfer tar>
#   ctr -n k8s.io images import --base-name localhost/dvm-local-path <local-path tar>
# (the tag comes from the layout's ref name). Idempotent: an image whose recipe hash matches is reused;
# a changed recipe gets a new tag and a rebuild. Older builds stay (other checkouts may still use them).
# The fixes are those of the day of the build: delete the cache (or change the recipe) to take newer ones.
# Progress goes to stderr. stdout: the pause, transfer and local-path tars, then last the path of the
# manifest images-<recipes>.env (DVM_<NAME>_IMAGE and DVM_<NAME>_TAR for each), read by
# infra/dev/local/nodes/images.ts. Mirrors: the ones apt uses here; DVM_DEBIAN_MIRROR and
# DVM_DEBIAN_SECURITY_MIRROR override them.
# First build: about 3 minutes (debootstrap is most of it) plus about 4 minutes of CPU for local-path's Go build;
# cached: well under a second.
# Building needs root, debootstrap, umoci, gcc with a static libc, and Go (for the k8s.io/kubernetes
# module); without them it says what to install in one line and exits 2. A cached run needs none of them.
set -euo pipefail

KUBE_VERSION="${KUBE_VERSION:-v1.36.3}"
DEBIAN_SUITE="${DVM_DEBIAN_SUITE:-bookworm}"
TRANSFER_PACKAGES="rsync,stunnel4,openssl"
CACHE_ROOT="${DVM_CACHE_DIR:-$HOME/.cache/dvm-controlplane}"
IMAGES="$CACHE_ROOT/images"
PAUSE_NAME=localhost/dvm-pause
TRANSFER_NAME=localhost/dvm-transfer
LOCAL_PATH_NAME=localhost/dvm-local-path
LOCAL_PATH_MODULE=github.com/rancher/local-path-provisioner
LOCAL_PATH_VERSION="${DVM_LOCAL_PATH_VERSION:-v0.0.30}"
# The provisioner calls only its API server (with a kubeconfig it is given): any unprivileged user.
LOCAL_PATH_USER=65534:65534
IMAGE_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
# As upstream's pause image.
PAUSE_USER=65535:65535
# nobody:nogroup, numeric so the kubelet can check runAsNonRoot against it. The transfer pods set their
# own users (0 with runAsRoot, transferIdentity otherwise); this only makes a pod that sets neither
# start as non-root instead of being refused or running as root.
TRANSFER_USER=65534:65534
ARCHIVE_KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg

# shellcheck disable=SC2034 # read by build-steps.sh
STEP_PREFIX=images STEP_LOG_DIR="$IMAGES"
# shellcheck source=infra/dev/lib/build-steps.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/build-steps.sh"

# --- the recipes: what goes into each image (their text is hashed into the tag) ---

make_pause_rootfs() { # SOURCE PAUSE_VERSION ROOTFS
  # The flags of build/pause/Makefile, then stripped as upstream does.
  gcc -Os -Wall -Werror -static -DVERSION="v$2-$KUBE_VERSION" -o "$3/pause" "$1"
  strip "$3/pause"
}

pause_config() { # TAG
  echo --config.entrypoint=/pause --config.user="$PAUSE_USER" \
    --config.label=org.opencontainers.image.title=dvm-pause --config.label=org.opencontainers.image.version="$1"
}

make_transfer_rootfs() { # ROOTFS MIRROR SECURITY_MIRROR
  # The archive keyring and --force-check-gpg: the mirror is plain http, so every package is checked
  # against Debian's signed Release file, and an unsigned or tampered archive stops the build.
  debootstrap --variant=minbase --include="$TRANSFER_PACKAGES" --components=main \
    --keyring="$ARCHIVE_KEYRING" --force-check-gpg "$DEBIAN_SUITE" "$1" "$2"
  # debootstrap installs from one suite; the fixes since the last point release (OpenSSL's, rsync's)
  # are in -updates and -security. apt checks them against the keyring the image itself now holds.
  printf 'deb %s %s main\n' "$2" "$DEBIAN_SUITE" "$2" "$DEBIAN_SUITE-updates" "$3" "$DEBIAN_SUITE-security" \
    >"$1/etc/apt/sources.list"
  # No service may start inside the build (stunnel4 ships an init script).
  printf '#!/bin/sh\nexit 101\n' >"$1/usr/sbin/policy-rc.d"
  chmod 0755 "$1/usr/sbin/policy-rc.d"
  chroot "$1" /usr/bin/env -i PATH="$IMAGE_PATH" DEBIAN_FRONTEND=noninteractive \
    sh -c 'apt-get update && apt-get -y upgrade'
  rm -f "$1/usr/sbin/policy-rc.d"
}

trim_transfer_rootfs() { # ROOTFS
  local r="${1:?}"
  # apt's lists, caches and logs: apt never runs in a transfer pod.
  rm -rf "$r"/var/lib/apt/lists/* "$r"/var/cache/apt/* "$r"/var/cache/debconf/*-old \
    "$r"/var/log/* "$r"/tmp/* "$r"/var/tmp/*
  # Documentation, man and info pages, translations; the licences (copyright files) stay.
  find "$r/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
  find "$r/usr/share/doc" -mindepth 1 -type d -empty -delete
  rm -rf "$r"/usr/share/man/* "$r"/usr/share/info/* "$r"/usr/share/locale/* "$r"/usr/share/lintian
  # Host details debootstrap copies in; the kubelet mounts the pod's own /etc/hosts, hostname, resolv.conf.
  : >"$r/etc/resolv.conf"
  rm -f "$r/etc/hostname"
  printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' >"$r/etc/hosts"
  # Device nodes: the runtime mounts its own /dev.
  rm -rf "${r:?}"/dev/*
  # setuid/setgid programs (su, passwd, mount...): the pods run without privilege escalation, so the
  # bits are of no use to them and only widen what a compromised process could try elsewhere.
  find "$r" -xdev -type f -perm /6000 -exec chmod ug-s {} +
  # The pods run `stunnel`; Debian's stunnel4 package provides it as a link to stunnel4.
  [[ -e "$r/usr/bin/stunnel" ]] || ln -s stunnel4 "$r/usr/bin/stunnel"
}

transfer_tag() { # RSYNC_PACKAGE_VERSION
  local version="${1#*:}" # no epoch
  version="${version%%-*}" # no Debian revision
  version="${version%%[+~]*}" # no repack suffix (3.5.0+ds1): "+" is not allowed in a tag
  echo "$DEBIAN_SUITE-rsync-$version-$TRANSFER_RECIPE"
}

transfer_config() { # TAG
  echo --config.env=PATH="$IMAGE_PATH" --config.user="$TRANSFER_USER" --config.workingdir=/ \
    --config.cmd=rsync --config.cmd=--version \
    --config.label=org.opencontainers.image.title=dvm-transfer --config.label=org.opencontainers.image.version="$1"
}

make_local_path_rootfs() { # ROOTFS GOBIN
  # As the project's scripts/build does for its image: static, stripped, the version stamped in.
  # From the folder GOBIN names: outside any module, so `go install module@version` resolves it alone.
  cd "$2" && CGO_ENABLED=0 GOBIN="$2" go install -trimpath \
    -ldflags "-X main.VERSION=$LOCAL_PATH_VERSION -s -w" "$LOCAL_PATH_MODULE@$LOCAL_PATH_VERSION"
  mkdir -p "$1/usr/bin" "$1/tmp"
  chmod 1777 "$1/tmp"
  install -m 0755 "$2/local-path-provisioner" "$1/usr/bin/local-path-provisioner"
}

local_path_config() { # TAG
  echo --config.env=PATH=/usr/bin --config.user="$LOCAL_PATH_USER" --config.workingdir=/ \
    --config.entrypoint=/usr/bin/local-path-provisioner \
    --config.label=org.opencontainers.image.title=dvm-local-path --config.label=org.opencontainers.image.version="$1"
}

# What the transfer pods run (src/transfer/pods.ts, rsyncClient.ts, stunnel.ts), checked as the
# image's default user.
TRANSFER_COMMANDS="sh bash rsync stunnel openssl cat chmod rm sleep touch"

# The hash of a recipe: the functions as bash prints them (so comments do not count) and the settings
# they read. Any change gives a new tag, so a node never runs a stale image under a current name.
recipe_hash() { printf '%s\n' "$@" | sha256sum | cut -c1-12; }
PAUSE_RECIPE=$(recipe_hash "$(declare -f make_pause_rootfs pause_config)" "$KUBE_VERSION" "$PAUSE_USER")
TRANSFER_RECIPE=$(recipe_hash "$(declare -f make_transfer_rootfs trim_transfer_rootfs transfer_tag transfer_config)" \
  "$DEBIAN_SUITE" "$TRANSFER_PACKAGES" "$IMAGE_PATH" "$TRANSFER_USER" "$TRANSFER_COMMANDS")
LOCAL_PATH_RECIPE=$(recipe_hash "$(declare -f make_local_path_rootfs local_path_config)" "$LOCAL_PATH_MODULE" "$LOCAL_PATH_VERSION" "$LOCAL_PATH_USER")
PAUSE_DIR="$IMAGES/pause-$PAUSE_RECIPE"
TRANSFER_DIR="$IMAGES/transfer-$TRANSFER_RECIPE"
LOCAL_PATH_DIR="$IMAGES/local-path-$LOCAL_PATH_RECIPE"
# One manifest per set of recipes: checkouts with different recipes share the cache, and each must
# read its own images.
MANIFEST="$IMAGES/images-$PAUSE_RECIPE-$TRANSFER_RECIPE-$LOCAL_PATH_RECIPE.env"

# --- the steps ---

cached() { [[ -f "$1/.complete" && -f "$1/image.tar" && -s "$1/image.ref" ]]; }

# One line and exit 2 when this machine cannot build; checked only when something must be built.
preflight() {
  local problems=() tool
  [[ "$(id -u)" -eq 0 ]] || problems+=("must run as root (debootstrap, chroot, file owners in the image)")
  for tool in debootstrap umoci gcc strip chroot go; do
    command -v "$tool" >/dev/null 2>&1 || problems+=("no $tool")
  done
  if command -v gcc >/dev/null 2>&1 && ! printf 'int main(void){return 0;}\n' | gcc -x c -static -o /dev/null - 2>/dev/null; then
    problems+=("gcc cannot link statically (libc6-dev)")
  fi
  [[ -f "$ARCHIVE_KEYRING" ]] || problems+=("no $ARCHIVE_KEYRING (debian-archive-keyring)")
  if ((${#problems[@]} > 0)); then
    local joined
    printf -v joined '%s; ' "${problems[@]}"
    say "cannot build the node images here (${joined%; }): as root, apt-get install -y debootstrap umoci gcc libc6-dev debian-archive-keyring, and Go 1.26+"
    exit 2
  fi
}

# debian_mirror SUITE DEFAULT: the mirror this machine's apt uses for SUITE (deb822 .sources or
# one-line .list files), so the build goes where apt goes; DEFAULT when apt names none.
debian_mirror() {
  local found
  found=$(
    { cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk -v suite="$1" -v RS= '
        { uri = ""; ok = 0
          for (i = 1; i <= NF; i++) {
            if ($i == "URIs:") uri = $(i + 1)
            if ($i == "Suites:") for (j = i + 1; j <= NF && $j !~ /:$/; j++) if ($j == suite) ok = 1
          }
          if (ok && uri != "") print uri }'
      # "deb [options] URI SUITE COMPONENTS...": drop the options, then URI is $2 and SUITE $3.
      cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | awk -v suite="$1" '
        $1 == "deb" { sub(/\[[^]]*\]/, ""); $0 = $0; if ($3 == suite) print $2 }'
    } | head -n 1
  )
  echo "${found:-$2}"
}

mounts_under() { awk -v p="$1/" 'index($2 "/", p) == 1 { print $2 }' /proc/self/mounts | sort -r; }

# Leaves nothing mounted under DIR (debootstrap mounts /proc and /sys in the target while it runs, and
# a killed run can leave them behind).
unmount_under() {
  local m
  for m in $(mounts_under "$1"); do umount "$m" 2>/dev/null || umount -l "$m"; done
}

# Removes a work dir, but never through a mount point: rm -rf into a mounted /proc or /dev is not cleanup.
remove_work_dir() {
  [[ -d "$1" ]] || return 0
  unmount_under "$1"
  if [[ -n "$(mounts_under "$1")" ]]; then
    say "still mounted under $1, not removing it: $(mounts_under "$1" | tr '\n' ' ')"
    return 1
  fi
  rm -rf "$1"
}

WORK=""
cleanup() {
  local rc=$?
  [[ -z "$WORK" ]] || remove_work_dir "$WORK" || rc=1
  exit "$rc"
}

# package_image DIR TAG CONFIG...: turns DIR/rootfs into the OCI layout DIR/layout, tag TAG, with the
# image configuration CONFIG (umoci config flags). umoci does the layer, digests and manifests.
package_image() {
  local dir="$1" tag="$2"; shift 2
  umoci init --layout "$dir/layout"
  umoci new --image "$dir/layout:$tag"
  umoci unpack --image "$dir/layout:$tag" "$dir/bundle"
  rm -rf "$dir/bundle/rootfs"
  mv "$dir/rootfs" "$dir/bundle/rootfs"
  umoci repack --image "$dir/layout:$tag" --history.created_by="infra/dev/nodes/images.sh" "$dir/bundle"
  umoci config --image "$dir/layout:$tag" --history.created_by="infra/dev/nodes/images.sh" "$@"
  umoci gc --layout "$dir/layout"
  rm -rf "$dir/bundle"
}

# smoke_check DIR TAG CHECK: unpacks the finished image as a runtime would and runs CHECK on its rootfs.
smoke_check() {
  local bundle="$1/smoke"
  umoci unpack --image "$1/layout:$2" "$bundle" >/dev/null
  # The device nodes every runtime creates (the image has none; stunnel aborts without /dev/null).
  mkdir -p "$bundle/rootfs/dev"
  mknod -m 666 "$bundle/rootfs/dev/null" c 1 3
  mknod -m 666 "$bundle/rootfs/dev/zero" c 1 5
  mknod -m 666 "$bundle/rootfs/dev/urandom" c 1 9
  "$3" "$bundle/rootfs"
  rm -rf "$bundle"
}

check_pause() {
  local out
  out=$(chroot --userspec="$PAUSE_USER" "$1" /pause -v)
  [[ "$out" == "pause.c v"* ]] || { say "pause: smoke check failed: /pause -v printed '$out'"; return 1; }
  say "pause: smoke check: $out"
}

check_transfer() {
  local rootfs="$1" cmd out
  in_image() { chroot --userspec="$TRANSFER_USER" "$rootfs" /usr/bin/env -i PATH="$IMAGE_PATH" "$@"; }
  for cmd in $TRANSFER_COMMANDS; do
    in_image sh -c "command -v $cmd" >/dev/null || { say "transfer: smoke check failed: no $cmd in the image"; return 1; }
  done
  out=$(in_image rsync --version | sed -n 1p)
  [[ "$out" == "rsync "*"version"* ]] || { say "transfer: smoke check failed: rsync --version printed '$out'"; return 1; }
  say "transfer: smoke check: $out"
  out=$(in_image stunnel -version 2>&1 | sed -n -e '/^stunnel [0-9]/p' -e '/^Running /p' | tr -s ' \n' ' ' | sed 's/ $//')
  [[ "$out" == "stunnel "* ]] || { say "transfer: smoke check failed: stunnel -version printed '$out'"; return 1; }
  say "transfer: smoke check: $out"
  [[ "$(in_image bash -c 'echo ok')" == ok ]] || { say "transfer: smoke check failed: bash"; return 1; }
  out=$(find "$rootfs" -xdev -type f -perm /6000)
  [[ -z "$out" ]] || { say "transfer: smoke check failed: setuid/setgid files: $out"; return 1; }
}

check_local_path() {
  local out
  out=$(chroot --userspec="$LOCAL_PATH_USER" "$1" /usr/bin/local-path-provisioner --version)
  [[ "$out" == *"$LOCAL_PATH_VERSION"* ]] || { say "local-path: smoke check failed: --version printed '$out'"; return 1; }
  say "local-path: smoke check: $out"
}

# finish DIR REF LAYOUT: the tar for ctr import, the reference, and .complete last, so a half-built
# image is never taken for a finished one.
finish() {
  local dest="$1" ref="$2" layout="$3" staged="$WORK/staged"
  # What containerd's reference parser accepts; anything else would fail only at import time.
  [[ "${ref##*:}" =~ ^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$ ]] || { say "not a valid image tag: ${ref##*:}"; return 1; }
  rm -rf "$staged" && mkdir -p "$staged"
  tar -C "$layout" -cf "$staged/image.tar" .
  echo "$ref" >"$staged/image.ref"
  rm -rf "$dest"
  mv "$staged" "$dest"
  touch "$dest/.complete"
}

build_pause() {
  local start=$SECONDS module version tag dir="$WORK/pause"
  module="$(go env GOMODCACHE)/k8s.io/kubernetes@$KUBE_VERSION"
  if [[ ! -f "$module/build/pause/linux/pause.c" ]]; then
    say "pause: downloading the module k8s.io/kubernetes@$KUBE_VERSION"
    run_logged pause-module sh -c "cd '$WORK' && GOFLAGS=-mod=mod go mod download 'k8s.io/kubernetes@$KUBE_VERSION'"
  fi
  version=$(sed -n 's/^TAG ?= *//p' "$module/build/pause/Makefile")
  [[ -n "$version" ]] || { say "pause: no TAG in $module/build/pause/Makefile"; exit 1; }
  tag="$version-$PAUSE_RECIPE"
  mkdir -p "$dir/rootfs"
  say "pause: compiling $module/build/pause/linux/pause.c ($version)"
  run_logged pause-compile make_pause_rootfs "$module/build/pause/linux/pause.c" "$version" "$dir/rootfs"
  # shellcheck disable=SC2046 # the config flags are words without spaces
  run_logged pause-image package_image "$dir" "$tag" $(pause_config "$tag")
  smoke_check "$dir" "$tag" check_pause
  finish "$PAUSE_DIR" "$PAUSE_NAME:$tag" "$dir/layout"
  say "pause: $PAUSE_NAME:$tag ready in $((SECONDS - start)) s ($(du -h "$PAUSE_DIR/image.tar" | cut -f1))"
}

build_transfer() {
  local start=$SECONDS mirror security tag dir="$WORK/transfer"
  mirror=${DVM_DEBIAN_MIRROR:-$(debian_mirror "$DEBIAN_SUITE" http://deb.debian.org/debian)}
  security=${DVM_DEBIAN_SECURITY_MIRROR:-$(debian_mirror "$DEBIAN_SUITE-security" http://deb.debian.org/debian-security)}
  mkdir -p "$dir"
  say "transfer: debootstrap $DEBIAN_SUITE + $TRANSFER_PACKAGES from $mirror, then its updates (about 3 minutes)"
  run_logged transfer-debootstrap make_transfer_rootfs "$dir/rootfs" "$mirror" "$security"
  unmount_under "$dir"
  trim_transfer_rootfs "$dir/rootfs"
  tag=$(transfer_tag "$(dpkg-query --admindir="$dir/rootfs/var/lib/dpkg" -W -f='${Version}' rsync)")
  say "transfer: root file system $(du -sh "$dir/rootfs" | cut -f1) after trimming; packing it with umoci"
  # shellcheck disable=SC2046 # the config flags are words without spaces
  run_logged transfer-image package_image "$dir" "$tag" $(transfer_config "$tag")
  smoke_check "$dir" "$tag" check_transfer
  finish "$TRANSFER_DIR" "$TRANSFER_NAME:$tag" "$dir/layout"
  say "transfer: $TRANSFER_NAME:$tag ready in $((SECONDS - start)) s ($(du -h "$TRANSFER_DIR/image.tar" | cut -f1))"
}

build_local_path() {
  local start=$SECONDS tag="$LOCAL_PATH_VERSION-$LOCAL_PATH_RECIPE" dir="$WORK/local-path"
  mkdir -p "$dir/rootfs" "$dir/gobin"
  say "local-path: go install $LOCAL_PATH_MODULE@$LOCAL_PATH_VERSION (about 4 minutes of CPU: client-go)"
  run_logged local-path-build make_local_path_rootfs "$dir/rootfs" "$dir/gobin"
  # shellcheck disable=SC2046 # the config flags are words without spaces
  run_logged local-path-image package_image "$dir" "$tag" $(local_path_config "$tag")
  smoke_check "$dir" "$tag" check_local_path
  finish "$LOCAL_PATH_DIR" "$LOCAL_PATH_NAME:$tag" "$dir/layout"
  say "local-path: $LOCAL_PATH_NAME:$tag ready in $((SECONDS - start)) s ($(du -h "$LOCAL_PATH_DIR/image.tar" | cut -f1))"
}

write_manifest() {
  local tmp
  tmp=$(mktemp "$IMAGES/.images.env.XXXXXX")
  {
    echo "# Written by infra/dev/nodes/images.sh. Import: ctr -n k8s.io images import --base-name <image without :tag> <tar>"
    echo "DVM_PAUSE_IMAGE=$(cat "$PAUSE_DIR/image.ref")"
    echo "DVM_PAUSE_TAR=$PAUSE_DIR/image.tar"
    echo "DVM_TRANSFER_IMAGE=$(cat "$TRANSFER_DIR/image.ref")"
    echo "DVM_TRANSFER_TAR=$TRANSFER_DIR/image.tar"
    echo "DVM_LOCAL_PATH_IMAGE=$(cat "$LOCAL_PATH_DIR/image.ref")"
    echo "DVM_LOCAL_PATH_TAR=$LOCAL_PATH_DIR/image.tar"
  } >"$tmp"
  chmod 0644 "$tmp"
  mv "$tmp" "$MANIFEST"
}

if cached "$PAUSE_DIR" && cached "$TRANSFER_DIR" && cached "$LOCAL_PATH_DIR"; then
  say "$(cat "$PAUSE_DIR/image.ref"), $(cat "$TRANSFER_DIR/image.ref"), $(cat "$LOCAL_PATH_DIR/image.ref"): cached"
else
  preflight
  mkdir -p "$IMAGES"
  take_lock "$IMAGES/.build.lock"
  trap cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  # Work dirs of a killed run; safe to remove while we hold the lock.
  for stale in "$IMAGES"/.work-*; do remove_work_dir "$stale"; done
  WORK=$(mktemp -d "$IMAGES/.work-XXXXXX")
  if cached "$PAUSE_DIR"; then say "$(cat "$PAUSE_DIR/image.ref"): cached"; else build_pause; fi
  if cached "$TRANSFER_DIR"; then say "$(cat "$TRANSFER_DIR/image.ref"): cached"; else build_transfer; fi
  if cached "$LOCAL_PATH_DIR"; then say "$(cat "$LOCAL_PATH_DIR/image.ref"): cached"; else build_local_path; fi
fi
write_manifest
echo "$PAUSE_DIR/image.tar"
echo "$TRANSFER_DIR/image.tar"
echo "$LOCAL_PATH_DIR/image.tar"
echo "$MANIFEST"
