#!/usr/bin/env bash
# Installs the Python packages the tests fetch from PyPI, pinned, into one folder that
# the tests put first on PYTHONPATH (pip --target: Debian's python stays as apt left it):
# the official OpenAI client and jsonschema (tests/clients), and gguf-py, the reader
# the PyTorch reference dequantizes SmolLM2 with (tests/parity). gguf is installed
# without dependencies: it needs numpy, and Debian's (which python3-torch is built
# against) must not be shadowed by a newer one. Quick when the folder is current.
#   scripts/install_test_pydeps.sh [DEST]     # default build/pydeps
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=${1:-build/pydeps}
PACKAGES=(openai==1.109.1 jsonschema==4.26.0)
NO_DEPS=(gguf==0.19.0)
stamp="$DEST/.crossreg-pydeps"
want="${PACKAGES[*]} | ${NO_DEPS[*]}"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "$DEST"
  exit 0
fi
PYTHON=/usr/bin/python3
echo "[pydeps] installing ${PACKAGES[*]} ${NO_DEPS[*]} into $DEST" >&2
rm -rf "$DEST"
mkdir -p "$DEST"
"$PYTHON" -m pip install --quiet --disable-pip-version-check --no-warn-script-location --target "$DEST" \
  "${PACKAGES[@]}" >&2
"$PYTHON" -m pip install --quiet --disable-pip-version-check --no-warn-script-location --no-deps --target "$DEST" \
  "${NO_DEPS[@]}" >&2
PYTHONPATH="$DEST" "$PYTHON" -c "import openai, jsonschema, gguf" >&2
echo "$want" >"$stamp"
echo "$DEST"
