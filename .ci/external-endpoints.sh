#!/usr/bin/env bash
# The integration suite against endpoints it did not start (the kind + LocalStack path, proven here with
# a control plane pair and DynamoDB Local started outside the test run by infra/dev/local/services.ts).
# Arguments go to vitest (e.g. one test file). The services run in their own process group, started from
# one node process with tsx's loader (no npx or tsx wrapper that swallows or races the signal), and the whole
# group is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
# Node 24 from node_modules/.bin first, as npm scripts have it (the machine's Node only starts npm).
export PATH="$PWD/node_modules/.bin:$PATH"
env_file=$(mktemp)
setsid node --import tsx infra/dev/local/services.ts "$env_file" &
services=$!
stop_services() {
  # SIGTERM lets services.ts stop its control planes and DynamoDB Local; whatever is left gets SIGKILL.
  kill -TERM -- "-$services" 2>/dev/null || true
  for _ in $(seq 1 30); do kill -0 -- "-$services" 2>/dev/null || break; sleep 1; done
  kill -KILL -- "-$services" 2>/dev/null || true
  wait "$services" 2>/dev/null || true
  rm -f "$env_file"
}
trap stop_services EXIT
trap 'exit 130' INT TERM
for _ in $(seq 1 180); do [ -s "$env_file" ] && break; kill -0 "$services" || exit 1; sleep 1; done
[ -s "$env_file" ] || { echo "services did not come up" >&2; exit 1; }
set -a
# shellcheck disable=SC1090
. "$env_file"
set +a
echo "running the integration suite against $DVM_SOURCE_KUBECONFIG, $DVM_DESTINATION_KUBECONFIG and $AWS_ENDPOINT_URL"
node_modules/.bin/vitest run --project integration "$@"
