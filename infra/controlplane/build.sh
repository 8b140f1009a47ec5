#!/usr/bin/env bash
# Builds, once, the real control-plane binaries the tests and `npm start` use when no cluster is
# configured: kube-apiserver, etcd and kwok (a fake kubelet). kind needs Docker; this needs only Go.
# Idempotent: a binary whose version stamp matches is reused. Output: the bin dir, printed last on stdout
# (progress goes to stderr). First build: about 8 minutes on 2 cores (kube-apiserver is most of it).
# Concurrent runs (a developer and CI, two terminals) wait for each other instead of racing.
set -euo pipefail

KUBE_VERSION="${KUBE_VERSION:-v1.36.3}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.16}"
KWOK_VERSION="${KWOK_VERSION:-v0.8.0}"
CACHE_ROOT="${DVM_CACHE_DIR:-$HOME/.cache/dvm-controlplane}"
BIN="$CACHE_ROOT/bin"

say() { printf '[controlplane] %s\n' "$*" >&2; }

if ! command -v go >/dev/null 2>&1; then
  say "Go is not installed, so the local control plane cannot be built."
  say "Either install Go (1.26+), or point KUBECONFIG at an existing cluster (for example one made by kind)"
  say "and the tests and 'npm start' will use it instead of starting their own."
  exit 2
fi

mkdir -p "$BIN"
export CGO_ENABLED=0 GOFLAGS=-buildvcs=false

if command -v flock >/dev/null 2>&1; then
  exec 9>"$CACHE_ROOT/.build.lock"
  flock -n 9 || { say "another build is running; waiting for it"; flock 9; }
fi

# Runs a build step quietly; on failure shows its output (the last lines), so errors are not swallowed.
run_logged() {
  local what="$1"; shift
  local log="$CACHE_ROOT/build-$what.log" start=$SECONDS
  if ! "$@" >"$log" 2>&1; then
    say "$what: FAILED; last lines of $log:"
    tail -n 40 "$log" >&2
    exit 1
  fi
  say "$what: done in $((SECONDS - start)) s"
}

stamp_ok() { [ -x "$BIN/$1" ] && [ "$(cat "$BIN/$1.version" 2>/dev/null)" = "$2" ]; }
stamp() { echo "$2" > "$BIN/$1.version"; }

build_kube_apiserver() {
  if stamp_ok kube-apiserver "$KUBE_VERSION"; then say "kube-apiserver $KUBE_VERSION: cached"; return; fi
  local work="$CACHE_ROOT/src/kube-$KUBE_VERSION" minor="v0.${KUBE_VERSION#v1.}"
  mkdir -p "$work"
  say "kube-apiserver $KUBE_VERSION: resolving staging modules (first build takes several minutes)"
  local gomod
  gomod=$(cd "$work" && { [ -f go.mod ] || go mod init kubebuild >/dev/null 2>&1; } && go list -m -f '{{.GoMod}}' "k8s.io/kubernetes@$KUBE_VERSION")
  {
    echo "module kubebuild"
    echo "go 1.26"
    echo "require k8s.io/kubernetes $KUBE_VERSION"
    # k8s.io/kubernetes requires its staging modules at v0.0.0 with local replaces; pin each to the
    # matching published release instead (derived from that release's own go.mod, so it tracks new ones).
    grep -E '^\s*k8s.io/[a-z0-9-]+ => ./staging/' "$gomod" | awk -v v="$minor" '{print "replace " $1 " => " $1 " " v}'
  } > "$work/go.mod"
  echo 'package tools
import _ "k8s.io/kubernetes/cmd/kube-apiserver"' > "$work/tools.go"
  say "kube-apiserver $KUBE_VERSION: downloading modules"
  run_logged kube-apiserver-modules sh -c "cd '$work' && go mod tidy"
  say "kube-apiserver $KUBE_VERSION: compiling (the long part)"
  run_logged kube-apiserver sh -c "cd '$work' && go build -trimpath -ldflags '-s -w -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${minor#v0.}' -o '$BIN/kube-apiserver.tmp' k8s.io/kubernetes/cmd/kube-apiserver"
  mv "$BIN/kube-apiserver.tmp" "$BIN/kube-apiserver"
  stamp kube-apiserver "$KUBE_VERSION"
}

build_etcd() {
  if stamp_ok etcd "$ETCD_VERSION"; then say "etcd $ETCD_VERSION: cached"; return; fi
  local work="$CACHE_ROOT/src/etcd-$ETCD_VERSION"
  mkdir -p "$work"
  say "etcd $ETCD_VERSION: building"
  printf 'package tools\nimport _ "go.etcd.io/etcd/server/v3"\n' > "$work/tools.go"
  run_logged etcd sh -c "cd '$work' && rm -f go.mod go.sum && go mod init etcdbuild \
    && go get 'go.etcd.io/etcd/server/v3@$ETCD_VERSION' && go mod tidy \
    && go build -trimpath -ldflags '-s -w' -o '$BIN/etcd.tmp' go.etcd.io/etcd/server/v3"
  mv "$BIN/etcd.tmp" "$BIN/etcd"
  stamp etcd "$ETCD_VERSION"
}

build_kwok() {
  if stamp_ok kwok "$KWOK_VERSION"; then say "kwok $KWOK_VERSION: cached"; return; fi
  say "kwok $KWOK_VERSION: building"
  run_logged kwok env GOBIN="$BIN" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
  stamp kwok "$KWOK_VERSION"
}

build_etcd
build_kwok
build_kube_apiserver
say "ready in $BIN"
echo "$BIN"
