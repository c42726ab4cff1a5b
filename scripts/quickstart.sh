#!/usr/bin/env bash
# The main job on a fresh Debian 12 machine: install packages, build, start
# crossreg-server on the embedded default model (models/default, a model that drafts for
# itself), measure which exact mode serves the first request fastest on this host
# (scripts/pick_mode.py: AR, n-gram, lossless on the model's own drafts alone and with
# n-gram assist, the same request and seed), stream that request's answer in that mode with its speedup over AR, and keep
# serving until Ctrl-C. Without the default model it serves stories260K from ../shared.
# The request samples as a user would (temperature 0.8, top-p 0.95, repetition penalty 1.1,
# seed 4): greedy decoding of a small model loops, and so does sampling without the penalty
# (scripts/tests/test_pick_mode.py). Every exact mode writes the same answer for the seed
# (seed-exact verification, docs/algorithm.md), so the pick changes the speed, not the text.
#   scripts/quickstart.sh                 # gRPC on :50051, metrics on :9090
#   MODE=lossless scripts/quickstart.sh   # skip the measurement, use this mode
#   MODE=lossless+ngram_assist scripts/quickstart.sh
#   TEMPERATURE=0 SEED=1 MAX_TOKENS=64 scripts/quickstart.sh
#   PORT=50052 METRICS_PORT=9091 HTTP_PORT=8001 scripts/quickstart.sh
# The server's own log goes to SERVER_LOG (default build/quickstart-server.log) until the answer
# has streamed, so its lines do not break into the answer, and is followed on the terminal after.
set -euo pipefail
cd "$(dirname "$0")/.."
setup_start=$(date +%s)
# Only what the quickstart runs: the server, the client and pick_mode.py's programs.
SETUP_TARGETS="crossreg-server crossreg" scripts/setup.sh
echo "[quickstart] setup took $(( $(date +%s) - setup_start )) s"

PORT=${PORT:-50051}
METRICS_PORT=${METRICS_PORT:-9090}
HTTP_PORT=${HTTP_PORT:-8000}
# The server's defaults: it times its forward cost curve at start and speculative requests
# pick each forward's draft length (or plain AR) for the most tokens/s (--adaptive_gamma).
SERVER_ARGS=(--host=127.0.0.1 --port="$PORT" --metrics_port="$METRICS_PORT" --http_port="$HTTP_PORT")
if [ -f models/default/config.json ]; then
  PROMPT=${PROMPT:-$'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n    '}
  TRY="--prompt 'import os' --mode lossless --gamma 4 --draft_layout blocks --ngram_assist"
else
  SERVER_ARGS+=(--model ../shared/models/stories260K/stories260K.gguf)
  PROMPT=${PROMPT:-Once upon a time}
  TRY="--prompt 'Tom had a red ball' --mode ngram --temperature 0.8"
fi
REQUEST=(--max_tokens "${MAX_TOKENS:-128}" --temperature "${TEMPERATURE:-0.8}" --top_p "${TOP_P:-0.95}"
         --repetition_penalty "${REPETITION_PENALTY:-1.1}" --seed "${SEED:-4}")

SERVER_LOG=${SERVER_LOG:-build/quickstart-server.log}
echo "[quickstart] build/bin/crossreg-server ${SERVER_ARGS[*]} (log: $SERVER_LOG)"
build/bin/crossreg-server "${SERVER_ARGS[@]}" >"$SERVER_LOG" 2>&1 &
SERVER=$!
trap 'kill -TERM $SERVER 2>/dev/null; wait $SERVER' INT TERM
for _ in $(seq 1 100); do
  build/bin/crossreg --server "127.0.0.1:$PORT" --model_info >/dev/null 2>&1 && break
  if ! kill -0 $SERVER 2>/dev/null; then
    echo "[quickstart] the server exited; the end of its log ($SERVER_LOG):"
    tail -n 20 "$SERVER_LOG"
    exit 1
  fi
  sleep 0.2
done
grep -a -m1 'crossreg-server ready' "$SERVER_LOG" || true

SPEEDUP=""
if [ -z "${MODE:-}" ]; then
  echo "[quickstart] the same request in each exact mode, three times each (scripts/pick_mode.py):"
  # The table is echoed line by line from this shell: `tee /dev/stderr` would reopen the
  # terminal's file, and where the output goes to a file (`quickstart.sh > log 2>&1`) that
  # truncates it, losing the lines above and leaving NUL bytes in their place.
  pick=""
  while IFS= read -r line; do
    printf '%s\n' "$line"
    pick=$line
  done < <(python3 scripts/pick_mode.py --server "127.0.0.1:$PORT" --prompt "$PROMPT" -- "${REQUEST[@]}" || true)
  if [[ "$pick" != PICK\ * ]]; then
    echo "[quickstart] scripts/pick_mode.py chose no mode (above); MODE=ar scripts/quickstart.sh skips it" >&2
    kill -TERM $SERVER 2>/dev/null; wait $SERVER || true
    exit 1
  fi
  read -r _ MODE MODE_TPS AR_TPS <<<"$pick"
  SPEEDUP=$(python3 -c "print(f'{$MODE_TPS / $AR_TPS:.2f}')")
fi
# A candidate's extra flags follow its mode: "lossless+ngram_assist".
PICKED=$MODE
case "$MODE" in
  *+ngram_assist) MODE=${MODE%%+*}; REQUEST+=(--ngram_assist) ;;
esac
echo "[quickstart] build/bin/crossreg --mode $MODE ${REQUEST[*]} --prompt ..."
build/bin/crossreg --server "127.0.0.1:$PORT" --prompt "$PROMPT" --mode "$MODE" "${REQUEST[@]}" --echo "$@"
echo
if [ -n "$SPEEDUP" ] && [ "$PICKED" != ar ]; then
  echo "[quickstart] $PICKED is this host's fastest exact mode for this request: $MODE_TPS tokens/s against AR's" \
       "$AR_TPS, ${SPEEDUP}x AR (same prompt, settings and seed)"
elif [ -n "$SPEEDUP" ]; then
  echo "[quickstart] no drafting mode beat AR ($AR_TPS tokens/s) on this host for this request by more than" \
       "its noise (the table above), so this ran as AR: 1.00x"
fi
echo "[quickstart] serving gRPC on 127.0.0.1:$PORT, the OpenAI HTTP API on http://127.0.0.1:$HTTP_PORT/v1" \
     "(metrics: http://127.0.0.1:$METRICS_PORT/metrics); Ctrl-C stops it."
echo "[quickstart] try: build/bin/crossreg --server 127.0.0.1:$PORT $TRY"
echo "[quickstart]  or: curl -s 127.0.0.1:$HTTP_PORT/v1/completions -d '{\"prompt\": \"import os\", \"max_tokens\": 32, \"mode\": \"ngram\"}'"
echo "[quickstart] the server's log from here on:"
tail -n 0 -f --pid=$SERVER "$SERVER_LOG" &
wait $SERVER
