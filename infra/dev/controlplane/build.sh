#!/usr/bin/env bash
# Builds, once, the real Kubernetes binaries the tests and `npm start` use when no cluster is configured:
# etcd, kube-apiserver and kwok (a fake kubelet) for kwok mode, and kubelet, kube-controller-manager,
# kube-scheduler and kube-proxy for node mode (real pods; images come from infra/dev/nodes/images.sh).
# kind needs Docker; this needs only Go. Idempotent: a binary whose version stamp matches is reused.
# Output: the bin dir, printed last on stdout (progress goes to stderr). First build on 2 cores: about
# 8 minutes for kube-apiserver, then about 3 more for the node binaries (same module set, shared build cache).
# Concurrent runs (a developer and CI, two terminals) wait for each other instead of racing.
set -euo pipefail

KUBE_VERSION="${KUBE_VERSION:-v1.36.3}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.16}"
KWOK_VERSION="${KWOK_VERSION:-v0.8.0}"
CACHE_ROOT="${DVM_CACHE_DIR:-$HOME/.cache/dvm-controlplane}"
BIN="$CACHE_ROOT/bin"
# All from one k8s.io/kubernetes release and one module set, so they agree with each other.
KUBE_COMPONENTS=(kube-apiserver kubelet kube-controller-manager kube-scheduler kube-proxy)

# shellcheck disable=SC2034 # read by build-steps.sh
STEP_PREFIX=controlplane STEP_LOG_DIR="$CACHE_ROOT"
# shellcheck source=infra/dev/lib/build-steps.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/build-steps.sh"

if ! command -v go >/dev/null 2>&1; then
  say "Go is not installed, so the local control plane cannot be built."
  say "Either install Go (1.26+), or point KUBECONFIG at an existing cluster (for example one made by kind)"
  say "and the tests and 'npm start' will use it instead of starting their own."
  exit 2
fi

mkdir -p "$BIN"
# Static binaries throughout; kubelet too builds and runs without cgo on Linux.
export CGO_ENABLED=0 GOFLAGS=-buildvcs=false

take_lock "$CACHE_ROOT/.build.lock"

stamp_ok() { [ -x "$BIN/$1" ] && [ "$(cat "$BIN/$1.version" 2>/dev/null)" = "$2" ]; }
stamp() { echo "$2" > "$BIN/$1.version"; }

# The throwaway module every Kubernetes component builds from. k8s.io/kubernetes requires its staging
# modules at v0.0.0 with local replaces; pin each to the matching published release instead (derived
# from that release's own go.mod, so it tracks new ones). Tidied again only when the component list
# changes: .tidied holds the tools.go it was tidied for, written after a successful tidy.
prepare_kube_module() {
  local work="$1" minor="v0.${KUBE_VERSION#v1.}" tools component gomod
  tools=$(
    printf 'package tools\n\nimport (\n'
    for component in "${KUBE_COMPONENTS[@]}"; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$component"; done
    printf ')\n'
  )
  if [ -f "$work/.tidied" ] && [ "$(cat "$work/.tidied")" = "$tools" ]; then return; fi
  mkdir -p "$work"
  say "kubernetes $KUBE_VERSION: resolving staging modules"
  gomod=$(cd "$work" && { [ -f go.mod ] || go mod init kubebuild >/dev/null 2>&1; } && go list -m -f '{{.GoMod}}' "k8s.io/kubernetes@$KUBE_VERSION")
  {
    echo "module kubebuild"
    echo "go 1.26"
    echo "require k8s.io/kubernetes $KUBE_VERSION"
    grep -E '^\s*k8s.io/[a-z0-9-]+ => ./staging/' "$gomod" | awk -v v="$minor" '{print "replace " $1 " => " $1 " " v}'
  } > "$work/go.mod"
  echo "$tools" > "$work/tools.go"
  rm -f "$work/.tidied"
  say "kubernetes $KUBE_VERSION: downloading modules"
  run_logged kube-modules sh -c "cd '$work' && go mod tidy"
  echo "$tools" > "$work/.tidied"
}

# One `go build` for every component not yet cached: they share most packages, so one invocation
# compiles each shared package once and links the binaries in parallel.
build_kube_components() {
  local work="$CACHE_ROOT/src/kube-$KUBE_VERSION" minor="v0.${KUBE_VERSION#v1.}" out="$BIN/.kube-build"
  local component missing=() packages=()
  for component in "${KUBE_COMPONENTS[@]}"; do
    if stamp_ok "$component" "$KUBE_VERSION"; then say "$component $KUBE_VERSION: cached"; else missing+=("$component"); fi
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  prepare_kube_module "$work"
  for component in "${missing[@]}"; do packages+=("k8s.io/kubernetes/cmd/$component"); done
  rm -rf "$out" && mkdir -p "$out"
  say "${missing[*]} $KUBE_VERSION: compiling (the long part: kube-apiserver about 8 minutes, the node binaries about 3 more)"
  run_logged kube-components sh -c "cd '$work' && go build -trimpath -ldflags '-s -w -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${minor#v0.}' -o '$out/' ${packages[*]}"
  for component in "${missing[@]}"; do
    mv "$out/$component" "$BIN/$component"
    stamp "$component" "$KUBE_VERSION"
  done
  rm -rf "$out"
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
build_kube_components
say "ready in $BIN"
echo "$BIN"
