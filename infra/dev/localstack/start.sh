#!/usr/bin/env bash
# Starts LocalStack for the kind end-to-end run (infra/dev/kind/e2e.sh) and prints its IP address on the
# Docker network it shares with the kind nodes, once it answers. Needs Docker.
#
# - On the kind network (LOCALSTACK_NETWORK, default "kind"), so the relay pods in kind reach it by IP,
#   and with LAMBDA_DOCKER_NETWORK set to the same network, so the Lambda containers LocalStack starts
#   reach the kind API servers (and LocalStack itself) too.
# - MAIN_CONTAINER_NAME tells LocalStack which container it is: it looks itself up to give its Lambda
#   containers its address on that network.
# - SERVICES: what `osls deploy` and the stack use: CloudFormation, S3 (the deployment bucket), IAM, STS,
#   Lambda, CloudWatch Logs (log groups), DynamoDB (the ledger), SSM (the host kubeconfig), SQS (the
#   dead-letter queue), EventBridge (events), API Gateway (the trigger's HTTP route; HTTP APIs are not
#   in every LocalStack edition, and CFN_IGNORE_UNSUPPORTED_RESOURCE_TYPES lets the rest of the stack
#   deploy without them: the end-to-end run does not use that route).
# - LAMBDA_IGNORE_ARCHITECTURE: serverless.yml deploys arm64; run the functions natively on x86 runners.
# - The image is pinned: LocalStack's images after 4.14 need an account (LOCALSTACK_AUTH_TOKEN, passed
#   through when set); set LOCALSTACK_IMAGE to use another.
set -euo pipefail

NAME="${LOCALSTACK_CONTAINER:-dvm-localstack}"
IMAGE="${LOCALSTACK_IMAGE:-localstack/localstack:4.14.0}"
NETWORK="${LOCALSTACK_NETWORK:-kind}"
PORT="${LOCALSTACK_PORT:-4566}"
SERVICES="cloudformation,s3,iam,sts,lambda,logs,dynamodb,ssm,sqs,events,apigateway"

say() { printf '[localstack] %s\n' "$*" >&2; }

docker network inspect "$NETWORK" >/dev/null 2>&1 || { say "Docker network $NETWORK does not exist (create the kind clusters first)"; exit 2; }
docker rm -f "$NAME" >/dev/null 2>&1 || true

args=(
  run --detach --name "$NAME" --network "$NETWORK"
  --publish "127.0.0.1:$PORT:4566"
  --volume /var/run/docker.sock:/var/run/docker.sock
  --env "SERVICES=$SERVICES"
  --env "MAIN_CONTAINER_NAME=$NAME"
  --env "LAMBDA_DOCKER_NETWORK=$NETWORK"
  --env LAMBDA_IGNORE_ARCHITECTURE=1
  --env CFN_IGNORE_UNSUPPORTED_RESOURCE_TYPES=1
  --env LAMBDA_RUNTIME_ENVIRONMENT_TIMEOUT=120
  --env "DEBUG=${LOCALSTACK_DEBUG:-0}"
)
if [ -n "${LOCALSTACK_AUTH_TOKEN:-}" ]; then args+=(--env LOCALSTACK_AUTH_TOKEN); fi
say "starting $IMAGE as $NAME on network $NETWORK (port $PORT)"
docker "${args[@]}" "$IMAGE" >/dev/null

deadline=$((SECONDS + 180))
until curl -fsS "http://127.0.0.1:$PORT/_localstack/health" 2>/dev/null | grep -q '"dynamodb": *"\(available\|running\)"'; do
  if [ "$(docker inspect -f '{{.State.Running}}' "$NAME" 2>/dev/null)" != "true" ]; then
    say "LocalStack exited; its last log lines:"
    docker logs --tail 40 "$NAME" >&2 || true
    exit 1
  fi
  if [ "$SECONDS" -ge "$deadline" ]; then
    say "LocalStack did not become healthy in 180 s; its last log lines:"
    docker logs --tail 40 "$NAME" >&2 || true
    exit 1
  fi
  sleep 2
done
ip=$(docker inspect -f "{{ (index .NetworkSettings.Networks \"$NETWORK\").IPAddress }}" "$NAME")
say "ready at http://127.0.0.1:$PORT (http://$ip:4566 on $NETWORK)"
echo "$ip"
