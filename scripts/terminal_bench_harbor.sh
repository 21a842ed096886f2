#!/bin/sh
# Terminal-Bench 2.0 through harbor, with Claude Code's LLM traffic scheduled by a shared TAO proxy.
#
#   REPLICAS="r0=http://gpu0:8000 r1=http://gpu1:8000" CONCURRENCY=64 scripts/terminal_bench_harbor.sh
#
# harbor runs each trial's agent inside its own container, so `tao-run` cannot wrap it. Instead this
# starts `tao coordinator` + `tao proxy` on this host and gives the agents the proxy as their base URL
# (PROXY_HOST must be reachable from the containers, e.g. the docker bridge address). Each trial is
# identified by Claude Code's own `X-Claude-Code-Session-Id` header. No hook runs inside the containers:
# the proxy reads each trial's tool calls from its LLM traffic (the response that names a Bash call, with
# its command and timeout, starts it; the request carrying its result ends it, with is_error and the exit
# code Claude Code writes into it), so the coordinator knows at once which trials are in a tool and for
# how long, and records every call in the history (`source` "proxy"; docs/proxy-telemetry.md says what
# the traffic cannot show: background jobs' own ends, exact tool starts).
set -eu
cd "$(dirname "$0")/.."
CONCURRENCY=${CONCURRENCY:-32}
MODEL=${MODEL:-anthropic/tao-replica}
PROXY_HOST=${PROXY_HOST:-172.17.0.1}
COORDINATOR_PORT=${COORDINATOR_PORT:-8500}
PROXY_PORT=${PROXY_PORT:-8400}
REPLICA_FLAGS=""
for replica in ${REPLICAS:?set REPLICAS="r0=http://host:8000 ..."}; do REPLICA_FLAGS="$REPLICA_FLAGS --replica $replica"; done

# shellcheck disable=SC2086
.venv/bin/tao coordinator --port "$COORDINATOR_PORT" $REPLICA_FLAGS &
COORDINATOR_PID=$!
# shellcheck disable=SC2086
.venv/bin/tao proxy --host 0.0.0.0 --port "$PROXY_PORT" --coordinator "http://127.0.0.1:$COORDINATOR_PORT" $REPLICA_FLAGS &
PROXY_PID=$!
trap 'kill "$PROXY_PID" "$COORDINATOR_PID" 2>/dev/null' EXIT INT TERM

export ANTHROPIC_BASE_URL="http://$PROXY_HOST:$PROXY_PORT"
export ANTHROPIC_API_KEY=${ANTHROPIC_API_KEY:-dummy}
harbor run --dataset terminal-bench@2.0 --agent claude-code --model "$MODEL" --n-concurrent "$CONCURRENCY" "$@"
