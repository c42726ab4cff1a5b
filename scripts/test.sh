#!/usr/bin/env bash
# The whole test suite: installs packages, builds, runs every CTest test (unit and
# integration; GPU tests skip with a message on machines without one).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
echo "[test] ctest"
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j "$(nproc)" --timeout 900
