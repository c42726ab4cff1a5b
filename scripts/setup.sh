#!/usr/bin/env bash
# Installs the Debian 12 packages crossreg builds and tests with, then configures and
# builds it into ./build (Release). Safe to run again: apt and ninja skip what is done.
#   scripts/setup.sh            # packages + build
#   SKIP_APT=1 scripts/setup.sh # build only
#   WITH_TEST_TOOLS=1 ...       # also what scripts/test.sh needs beyond the build: clang and
#                               # libFuzzer (scripts/fuzz.sh), openssl (the TLS tests' certificates)
#   SETUP_TARGETS="crossreg-server crossreg" scripts/setup.sh   # build only these (the
#                               # quickstart's: the tests take most of a full build)
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  build-essential cmake ninja-build pkg-config git ccache
  libabsl-dev nlohmann-json3-dev libpcre2-dev
  libgtest-dev libgmock-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libspdlog-dev prometheus-cpp-dev libcpp-httplib-dev libssl-dev
  python3 python3-numpy python3-pytest python3-torch python3-jinja2 libopenblas0-pthread
  python3-grpcio python3-protobuf
)

[ "${WITH_TEST_TOOLS:-0}" = 1 ] && PACKAGES+=(clang libclang-rt-14-dev openssl)

if [ "${SKIP_APT:-0}" != 1 ]; then
  missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "[setup] installing ${#missing[@]} Debian packages: ${missing[*]}"
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "[setup] all Debian packages present"
  fi
fi

BUILD_DIR=${BUILD_DIR:-build}
echo "[setup] configuring $BUILD_DIR (${CMAKE_BUILD_TYPE:-Release})"
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="${CMAKE_BUILD_TYPE:-Release}" ${CMAKE_ARGS:-} >/dev/null
if [ -n "${SETUP_TARGETS:-}" ]; then
  echo "[setup] building $SETUP_TARGETS (a few minutes on 2 cores)"
  # shellcheck disable=SC2086
  cmake --build "$BUILD_DIR" -j "$(nproc)" --target $SETUP_TARGETS
else
  echo "[setup] building (this takes a few minutes on 2 cores)"
  cmake --build "$BUILD_DIR" -j "$(nproc)"
fi
echo "[setup] done: programs are in $BUILD_DIR/bin"
