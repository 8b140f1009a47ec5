#!/usr/bin/env bash
# The integration suite against endpoints it did not start (the kind + LocalStack path, proven here with
# a control plane pair and DynamoDB Local started outside the test run by infra/local/services.ts).
set -euo pipefail
cd "$(dirname "$0")/.."
env_file=$(mktemp)
npx tsx infra/local/services.ts "$env_file" &
services=$!
stop_services() { kill "$services" 2>/dev/null; wait "$services" 2>/dev/null; rm -f "$env_file"; }
trap stop_services EXIT
for _ in $(seq 1 180); do [ -s "$env_file" ] && break; kill -0 "$services" || exit 1; sleep 1; done
[ -s "$env_file" ] || { echo "services did not come up" >&2; exit 1; }
set -a; . "$env_file"; set +a
echo "running the integration suite against $DVM_SOURCE_KUBECONFIG, $DVM_DESTINATION_KUBECONFIG and $AWS_ENDPOINT_URL"
status=0
npx vitest run --project integration "$@" || status=$?
trap - EXIT
stop_services || true
exit "$status"
