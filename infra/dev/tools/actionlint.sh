#!/usr/bin/env bash
# Builds actionlint (the GitHub Actions workflow linter) once, from the Go module proxy, pinned, and caches
# it next to the control-plane binaries (infra/dev/controlplane/build.sh). Idempotent: a binary whose version
# stamp matches is reused. Output: the binary's path, printed last on stdout (progress goes to stderr).
# test/unit/ci/workflow.test.ts calls this when the binary is missing; .ci/run calls it before `npm test`.
set -euo pipefail

ACTIONLINT_VERSION="${ACTIONLINT_VERSION:-v1.7.12}"
CACHE_ROOT="${DVM_CACHE_DIR:-$HOME/.cache/dvm-controlplane}"
BIN="$CACHE_ROOT/bin"
TARGET="$BIN/actionlint"

say() { printf '[actionlint] %s\n' "$*" >&2; }

if [ -x "$TARGET" ] && [ "$(cat "$TARGET.version" 2>/dev/null)" = "$ACTIONLINT_VERSION" ]; then
  say "$ACTIONLINT_VERSION: cached"
  echo "$TARGET"
  exit 0
fi

if ! command -v go >/dev/null 2>&1; then
  say "Go is not installed, so actionlint cannot be built (install Go 1.26+)."
  exit 2
fi

mkdir -p "$BIN"
# Concurrent builds (a test run and CI) wait for each other instead of racing on the same file.
if command -v flock >/dev/null 2>&1; then
  exec 9>"$CACHE_ROOT/.actionlint.lock"
  flock 9
  if [ -x "$TARGET" ] && [ "$(cat "$TARGET.version" 2>/dev/null)" = "$ACTIONLINT_VERSION" ]; then
    say "$ACTIONLINT_VERSION: built by another run"
    echo "$TARGET"
    exit 0
  fi
fi

say "building $ACTIONLINT_VERSION"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
log="$CACHE_ROOT/build-actionlint.log"
if ! CGO_ENABLED=0 GOFLAGS=-buildvcs=false GOBIN="$work" \
  go install -trimpath -ldflags "-s -w -X github.com/rhysd/actionlint.version=$ACTIONLINT_VERSION" \
  "github.com/rhysd/actionlint/cmd/actionlint@$ACTIONLINT_VERSION" >"$log" 2>&1; then
  say "FAILED; last lines of $log:"
  tail -n 40 "$log" >&2
  exit 1
fi
mv "$work/actionlint" "$TARGET"
echo "$ACTIONLINT_VERSION" > "$TARGET.version"
say "ready: $TARGET"
echo "$TARGET"
