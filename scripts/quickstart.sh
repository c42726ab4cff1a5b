#!/usr/bin/env bash
# The main job on a fresh machine: set up, build, and generate text with the engine.
# Uses the embedded default model when it exists, else the stories260K model that
# sits beside the checkout in ../shared.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
MODEL_ARGS=()
if [ ! -f models/default/config.json ]; then
  MODEL_ARGS=(--model ../shared/models/stories260K/stories260K.gguf)
fi
PROMPT=${PROMPT:-Once upon a time}
echo "[quickstart] build/bin/crossreg-generate ${MODEL_ARGS[*]} --prompt \"$PROMPT\""
build/bin/crossreg-generate "${MODEL_ARGS[@]}" --prompt "$PROMPT" --max-new-tokens "${MAX_NEW_TOKENS:-200}" "$@"
