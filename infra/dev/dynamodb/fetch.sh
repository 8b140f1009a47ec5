#!/usr/bin/env bash
# Fetches the official DynamoDB Local (Java) without installing amplify-dynamodb-simulator's 347 MB of
# dependencies: `npm pack` the package and keep only its emulator/ folder, in a cache outside the repo.
# Idempotent: a complete cache (marked by .complete) is reused. Prints the emulator path on stdout last.
set -euo pipefail

VERSION="${DVM_DYNAMODB_SIMULATOR_VERSION:-2.9.30}"
CACHE_ROOT="${DVM_CACHE_DIR:-$HOME/.cache/dvm-dynamodb-local}"
TARGET="$CACHE_ROOT/$VERSION"
EMULATOR="$TARGET/emulator"

if [[ -f "$TARGET/.complete" && -f "$EMULATOR/DynamoDBLocal.jar" ]]; then
  echo "DynamoDB Local already fetched" >&2
  echo "$EMULATOR"
  exit 0
fi

mkdir -p "$CACHE_ROOT"
# Two test runs may start at once: the second waits for the first and then finds the cache complete.
if command -v flock >/dev/null 2>&1; then
  exec 9>"$CACHE_ROOT/.fetch.lock"
  flock 9
  if [[ -f "$TARGET/.complete" && -f "$EMULATOR/DynamoDBLocal.jar" ]]; then
    echo "DynamoDB Local already fetched" >&2
    echo "$EMULATOR"
    exit 0
  fi
fi
WORK="$(mktemp -d "$CACHE_ROOT/.fetch-XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

echo "Downloading amplify-dynamodb-simulator@$VERSION (about 56 MB) ..." >&2
(cd "$WORK" && npm pack --silent "amplify-dynamodb-simulator@$VERSION" >/dev/null)
TARBALL="$(ls "$WORK"/*.tgz)"

echo "Extracting package/emulator ..." >&2
tar -xzf "$TARBALL" -C "$WORK" package/emulator
if [[ ! -f "$WORK/package/emulator/DynamoDBLocal.jar" ]]; then
  echo "error: $TARBALL has no package/emulator/DynamoDBLocal.jar" >&2
  exit 1
fi

# .complete is written last, so a half-extracted folder is never taken for a finished one.
rm -rf "$TARGET"
mkdir -p "$TARGET"
mv "$WORK/package/emulator" "$EMULATOR"
touch "$TARGET/.complete"
echo "DynamoDB Local ready" >&2
echo "$EMULATOR"
