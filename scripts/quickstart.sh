#!/usr/bin/env bash
# The main job on a fresh Debian 12 machine: install packages, build, start
# crossreg-server on the embedded default model (models/default, with its
# Cross-Regression adapter), stream one request through it, and keep serving until
# Ctrl-C. Without the default model it serves the stories260K model from ../shared.
#   scripts/quickstart.sh                 # gRPC on :50051, metrics on :9090
#   PORT=50052 METRICS_PORT=9091 HTTP_PORT=8001 scripts/quickstart.sh
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

PORT=${PORT:-50051}
METRICS_PORT=${METRICS_PORT:-9090}
HTTP_PORT=${HTTP_PORT:-8000}
# --adaptive_gamma: the server times its forward cost curve at start and speculative
# requests pick each forward's draft length (or plain AR) for the most tokens/s.
SERVER_ARGS=(--host=127.0.0.1 --port="$PORT" --metrics_port="$METRICS_PORT" --http_port="$HTTP_PORT" --adaptive_gamma)
if [ -f models/default/config.json ]; then
  PROMPT=${PROMPT:-$'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n'}
  # n-gram drafting is the default model's fastest exact mode on a CPU (docs/acceptance.md);
  # lossless/lossy use the adapter, best with the forked refill and n-gram assist.
  MODE=${MODE:-ngram}
  TRY="--prompt 'import os' --mode lossless --gamma 8 --fork_outcomes 2 --fork_depth 3 --ngram_assist"
else
  SERVER_ARGS+=(--model ../shared/models/stories260K/stories260K.gguf)
  PROMPT=${PROMPT:-Once upon a time}
  MODE=${MODE:-ngram}
  TRY="--prompt 'Tom had a red ball' --mode ar --temperature 0.8"
fi

echo "[quickstart] build/bin/crossreg-server ${SERVER_ARGS[*]}"
build/bin/crossreg-server "${SERVER_ARGS[@]}" &
SERVER=$!
trap 'kill -TERM $SERVER 2>/dev/null; wait $SERVER' INT TERM
for _ in $(seq 1 100); do
  build/bin/crossreg --server "127.0.0.1:$PORT" --model_info >/dev/null 2>&1 && break
  kill -0 $SERVER 2>/dev/null || { echo "[quickstart] the server exited"; exit 1; }
  sleep 0.2
done

echo "[quickstart] build/bin/crossreg --mode $MODE --prompt ..."
build/bin/crossreg --server "127.0.0.1:$PORT" --prompt "$PROMPT" --mode "$MODE" --max_tokens "${MAX_TOKENS:-128}" --echo "$@"
echo
echo "[quickstart] serving gRPC on 127.0.0.1:$PORT, the OpenAI HTTP API on http://127.0.0.1:$HTTP_PORT/v1" \
     "(metrics: http://127.0.0.1:$METRICS_PORT/metrics); Ctrl-C stops it."
echo "[quickstart] try: build/bin/crossreg --server 127.0.0.1:$PORT $TRY"
echo "[quickstart]  or: curl -s 127.0.0.1:$HTTP_PORT/v1/completions -d '{\"prompt\": \"import os\", \"max_tokens\": 32, \"mode\": \"ngram\"}'"
wait $SERVER
