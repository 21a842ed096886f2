#!/bin/sh
# SWE-bench with mini-SWE-agent under tao-run: `mini-extra swebench -w N` in one tao-run; each instance
# (on whichever worker thread runs it) is its own TAO session `<session>.<instance_id>`.
#
#   REPLICAS="r0=http://gpu0:8000 r1=http://gpu1:8000" WORKERS=64 MODEL=openai/qwen3-32b \
#     scripts/swebench_mini.sh --slice 0:64
#
# Extra arguments go to `mini-extra swebench`. Set COORDINATOR=http://host:8500 (and PROXY=...) to use a
# shared coordinator instead of the embedded one. mini-SWE-agent comes from `make agents` (.tools/mini).
set -eu
cd "$(dirname "$0")/.."
WORKERS=${WORKERS:-16}
MODEL=${MODEL:-openai/tao-replica}
SUBSET=${SUBSET:-lite}
SPLIT=${SPLIT:-test}
OUTPUT=${OUTPUT:-runs/swebench-$(date +%Y%m%d-%H%M%S)}
SESSION=${SESSION:-swebench-$(date +%s)}
PATH="$PWD/.tools/mini/bin:$PATH"
export OPENAI_API_KEY=${OPENAI_API_KEY:-dummy}

set -- --subset "$SUBSET" --split "$SPLIT" -w "$WORKERS" -m "$MODEL" -o "$OUTPUT" "$@"
TAO_FLAGS="--session $SESSION --labels bench=swebench workers=$WORKERS"
for replica in ${REPLICAS:-}; do TAO_FLAGS="$TAO_FLAGS --replica $replica"; done
[ -n "${COORDINATOR:-}" ] && TAO_FLAGS="$TAO_FLAGS --coordinator $COORDINATOR"
[ -n "${PROXY:-}" ] && TAO_FLAGS="$TAO_FLAGS --proxy $PROXY"
# shellcheck disable=SC2086 # TAO_FLAGS is a list of words on purpose
exec .venv/bin/tao-run $TAO_FLAGS -- mini-extra swebench "$@"
