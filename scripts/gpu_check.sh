#!/usr/bin/env bash
# Everything a GPU machine must check, in one command (about 10 minutes on an H100):
# the CUDA build with the server, the GPU tests (kernels vs their CPU references,
# whole-model parity, GPU exactness), the backend-selection test, crossreg-bench-gpu at
# Llama-3-8B shapes, the PyTorch eager peer at the same shapes, and crossreg-server
# --backend cuda against --backend cpu on stories260K and on the default model, every
# mode greedy. A summary table ends the run (also in $OUT/summary.md).
#
# The GPU machine has CUDA, CMake, ninja and PyTorch but no Debian build dependencies,
# no network and no ../shared, so both travel with the working tree:
#   here, once per change:        scripts/gpu_check.sh pack
#       writes .devdeps/ (../shared/tools/device-deps.sh) and .gpu_check/ (stories260K)
#   on the GPU machine (device tool `run`, carry [".devdeps", ".gpu_check"]):
#                                 scripts/gpu_check.sh
# Prebuilt mode (no compiling on the device: its minutes are scarce):
#   here, after building build-cuda:  scripts/gpu_check.sh pack-prebuilt
#       writes .gpucarry/ (the binaries and the Debian libraries they load, xz: ~10 MB) and
#       .gpu_check/ (stories260K)
#   on the GPU machine (carry [".gpucarry", ".gpu_check"]): GC_PREBUILT=1 scripts/gpu_check.sh
#   with the default steps "tests backend bench peer streams" minus build; the bench runs
#   bf16 and fp8 weights, the predictive rows' attention apart on tensor cores (the
#   default), apart on the SIMT kernel and by the per-row rule, and with the greedy rows'
#   summaries reduced on the device.
# Exit status: 0 every check passed, 1 some failed, 2 no GPU on this machine.
# QUICK=1 benchmarks 4 layers instead of 32 (a smoke run).
# GC_STEPS picks steps (default: all of "build tests backend bench peer streams");
# GC_JOBS sets the build's parallelism (default: every core).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

if [ "${1:-}" = pack ]; then
  set -e
  ../shared/tools/device-deps.sh .devdeps
  # Beyond that list: cpp-httplib (the server's HTTP endpoints) and what it links, and
  # civetweb's CMake config, which prometheus-cpp's CMake config asks for.
  (cd .devdeps && apt-get download libcpp-httplib-dev libcpp-httplib0.11 libbrotli-dev libbrotli1 libcivetweb-dev >/dev/null)
  rm -rf .gpu_check && mkdir -p .gpu_check/shared/models
  cp -r ../shared/models/stories260K .gpu_check/shared/models/
  du -sh .devdeps .gpu_check
  echo 'gpu_check: packed; in the device tool: run scripts/gpu_check.sh with carry [".devdeps", ".gpu_check"]'
  exit 0
fi

if [ "${1:-}" = pack-prebuilt ]; then
  set -e
  B=${BUILD_DIR:-build-cuda}/bin
  BINS=(crossreg_gpu_tests crossreg-bench-gpu crossreg-server crossreg-generate crossreg-random-adapter crossreg)
  for b in "${BINS[@]}"; do [ -x "$B/$b" ] || { echo "gpu_check: $B/$b missing: build the CUDA tree first" >&2; exit 2; }; done
  stage=$(mktemp -d)
  mkdir -p "$stage/bin" "$stage/lib"
  for b in "${BINS[@]}"; do cp "$B/$b" "$stage/bin/" && strip "$stage/bin/$b"; done
  # The Debian libraries they load, less the C runtime and CUDA (the GPU machine has both).
  for b in "${BINS[@]}"; do ldd "$B/$b"; done | awk '{print $3}' | sort -u | grep -E '^/(usr/)?lib' |
    grep -vE '/(libc|libm|libgcc_s|libstdc\+\+|ld-linux-x86-64|libpthread|libdl|librt)\.so' |
    xargs -I{} cp -L {} "$stage/lib/"
  rm -rf .gpucarry && mkdir -p .gpucarry
  tar cf - -C "$stage" bin lib | xz -9 -T0 > .gpucarry/prebuilt.tar.xz
  rm -rf "$stage"
  rm -rf .gpu_check && mkdir -p .gpu_check/shared/models/stories260K
  cp ../shared/models/stories260K/{stories260K.gguf,reference_greedy.json} .gpu_check/shared/models/stories260K/
  du -sh .gpucarry .gpu_check
  echo 'gpu_check: packed; in the device tool: GC_PREBUILT=1 scripts/gpu_check.sh with carry [".gpucarry", ".gpu_check"]'
  exit 0
fi

OUT=${OUT:-$ROOT/gpu_check_out}
mkdir -p "$OUT"
SUMMARY=()   # "step|result|detail"
FAILED=0
GC_STEPS=" ${GC_STEPS:-build tests backend bench peer streams} "
want() { [[ "$GC_STEPS" == *" $1 "* ]]; }
record() { SUMMARY+=("$1|$2|$3"); [ "$2" = PASS ] || FAILED=1; echo "[gpu_check] $1: $2 $3"; }
# step NAME TIMEOUT_S LOG COMMAND...: runs it with a time limit, output to LOG and the console.
step() {
  local name=$1 limit=$2 log=$3; shift 3
  echo "[gpu_check] == $name (limit ${limit}s)"
  timeout "$limit" "$@" 2>&1 | tee "$log"
  return "${PIPESTATUS[0]}"
}

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu_check: no GPU on this machine (nvidia-smi finds none); nothing to check"
  exit 2
fi
GPU=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1)
ARCH=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' .')
echo "[gpu_check] $GPU, sm_$ARCH, $(nproc) cores"

if [ -f .devdeps/activate.sh ]; then
  # shellcheck disable=SC1091
  source .devdeps/activate.sh
fi
SHARED=$ROOT/.gpu_check/shared
[ -d "$SHARED" ] || SHARED=$(cd .. && pwd)/shared
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
BIN=build-gpu/bin
if [ "${GC_PREBUILT:-0}" = 1 ]; then
  # Binaries built on the CPU machine: unpacked here, with their libraries on the path and
  # the tests told where the shared data, the programs and the source tree are here.
  [ -x /tmp/gpucarry/bin/crossreg_gpu_tests ] || { mkdir -p /tmp/gpucarry && xz -dc .gpucarry/prebuilt.tar.xz | tar xf - -C /tmp/gpucarry; }
  BIN=/tmp/gpucarry/bin
  export LD_LIBRARY_PATH="/tmp/gpucarry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  for d in /usr/local/cuda/lib64 /usr/local/cuda/lib; do [ -d "$d" ] && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$d"; done
  export CROSSREG_SOURCE_DIR=$ROOT CROSSREG_SHARED_DIR=$SHARED CROSSREG_BIN_DIR=$BIN
  missing=$(ldd "$BIN/crossreg_gpu_tests" "$BIN/crossreg-server" | grep -c "not found" || true)
  echo "[gpu_check] prebuilt binaries in $BIN; unresolved libraries: $missing"
  GC_STEPS=${GC_STEPS/ build / }
fi

# 1. Build: the CUDA backend, its tests and benchmark, the server and its CLI.
if ! want build; then
  :
elif step build 420 "$OUT/build.log" bash -c "
    cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCROSSREG_CUDA=ON \
      -DCMAKE_CUDA_COMPILER=$NVCC -DCMAKE_CUDA_ARCHITECTURES=$ARCH -DCROSSREG_SHARED_DIR=$SHARED >/dev/null &&
    cmake --build build-gpu -j ${GC_JOBS:-$(nproc)} --target crossreg_gpu_tests crossreg-bench-gpu crossreg-server crossreg \
      crossreg-generate crossreg-random-adapter crossreg_backend_selection_tests"; then
  record build PASS "sm_$ARCH"
else
  record build FAIL "see $OUT/build.log"
fi

if want tests && [ -x "$BIN/crossreg_gpu_tests" ]; then
  # 2. GPU tests: kernels vs CPU references, CPU-vs-CUDA logits per row, GPU exactness.
  if [ "${GC_PREBUILT:-0}" = 1 ]; then
    step "gpu tests" 240 "$OUT/gpu_tests.log" "$BIN/crossreg_gpu_tests"
    rc=$?
    line="$(grep -E '^\[  PASSED  \]' "$OUT/gpu_tests.log" | tail -1) $(grep -E '^\[  FAILED  \] [0-9]+ test' "$OUT/gpu_tests.log" | tail -1)"
  else
    step "gpu tests" 300 "$OUT/gpu_tests.log" ctest --test-dir build-gpu -L gpu --output-on-failure
    rc=$?
    line=$(grep -E "tests passed" "$OUT/gpu_tests.log" | tail -1)
  fi
  # ReportsNoDeviceAsFailedPrecondition checks the no-device path: it skips wherever a GPU is.
  skipped=$(grep "Skipped" "$OUT/gpu_tests.log" | grep -vc "NoDevice" || true)
  [ $rc = 0 ] && [ "$skipped" = 0 ] && record "gpu tests" PASS "$line" || record "gpu tests" FAIL "$line, $skipped skipped"

  # 3. The CUDA-built server: --backend cuda serves, auto picks CUDA.
  if [ "${GC_PREBUILT:-0}" != 1 ]; then
    step "backend selection" 300 "$OUT/backend_tests.log" ctest --test-dir build-gpu -L backend --output-on-failure
    rc=$?
    record "backend selection" "$([ $rc = 0 ] && echo PASS || echo FAIL)" "$(grep -E 'tests passed' "$OUT/backend_tests.log" | tail -1)"
  fi
fi

# 4. Benchmarks at Llama-3-8B shapes (random bf16 weights made on the device).
LAYERS=32
[ "${QUICK:-0}" = 1 ] && LAYERS=4
if want bench && [ -x "$BIN/crossreg-bench-gpu" ]; then
  # Same machine, one after another: bf16 (the default: summaries, predictive attention
  # split apart), FP8 weights, the predictive rows split by the per-row rule, whole rows.
  for variant in "bf16|" "fp8|--weights fp8" "simt-apart|--pred_attention_mma=false" \
                 "per-row-splits|--pred_attention_splits=-1" "device-summaries|--device_summaries=true"; do
    IFS='|' read -r name flags <<<"$variant"
    # shellcheck disable=SC2086
    if step "crossreg-bench-gpu $name" 150 "$OUT/bench_gpu_$name.md" "$BIN/crossreg-bench-gpu" --layers "$LAYERS" $flags; then
      record "crossreg-bench-gpu $name" PASS "$LAYERS layers, $OUT/bench_gpu_$name.md"
    else
      record "crossreg-bench-gpu $name" FAIL "see $OUT/bench_gpu_$name.md"
    fi
  done
fi
if ! want peer; then
  :
elif python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
  if step "pytorch peer" 300 "$OUT/pytorch_peer.md" python3 engine/cuda/tools/bench_pytorch_peer.py --layers "$LAYERS"; then
    record "pytorch peer" PASS "$LAYERS layers, figures in $OUT/pytorch_peer.md"
  else
    record "pytorch peer" FAIL "see $OUT/pytorch_peer.md"
  fi
else
  record "pytorch peer" FAIL "no PyTorch with CUDA on this machine"
fi

# 5. crossreg-server --backend cuda vs --backend cpu, greedy, every mode.
if want streams && [ -x "$BIN/crossreg-server" ]; then
  STORIES=$SHARED/models/stories260K/stories260K.gguf
  ADAPTER=/tmp/stories260K_random_adapter
  "$BIN/crossreg-random-adapter" --model "$STORIES" --out "$ADAPTER" --rank 8 >/dev/null 2>&1
  for target in "stories260K|$STORIES|$ADAPTER" "default model|models/default|"; do
    IFS='|' read -r name model adapter <<<"$target"
    if [ "$name" = "default model" ] && [ ! -f models/default/config.json ]; then
      echo "[gpu_check] streams default model: skipped (models/default was left behind)"
      continue
    fi
    log="$OUT/streams_${name// /_}.md"
    step "streams $name" 150 "$log" python3 scripts/compare_backends.py --bin "$BIN" --model "$model" \
      --adapter "$adapter" --backends cuda,cpu --max_tokens 64
    rc=$?
    record "streams $name" "$([ $rc = 0 ] && echo PASS || echo FAIL)" "$(tail -1 "$log")"
  done
fi

{
  echo "## scripts/gpu_check.sh on $GPU (sm_$ARCH), $(date -u +%FT%TZ)"
  echo
  echo "| step | result | detail |"
  echo "|---|---|---|"
  for row in "${SUMMARY[@]}"; do IFS='|' read -r a b c <<<"$row"; echo "| $a | $b | $c |"; done
} | tee "$OUT/summary.md"
exit $FAILED
