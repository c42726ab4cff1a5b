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

if want tests && [ -x build-gpu/bin/crossreg_gpu_tests ]; then
  # 2. GPU tests: kernels vs CPU references, CPU-vs-CUDA logits per row, GPU exactness.
  step "gpu tests" 300 "$OUT/gpu_tests.log" ctest --test-dir build-gpu -L gpu --output-on-failure
  rc=$?
  line=$(grep -E "tests passed" "$OUT/gpu_tests.log" | tail -1)
  # ReportsNoDeviceAsFailedPrecondition checks the no-device path: it skips wherever a GPU is.
  skipped=$(grep "Skipped" "$OUT/gpu_tests.log" | grep -vc "NoDevice" || true)
  [ $rc = 0 ] && [ "$skipped" = 0 ] && record "gpu tests" PASS "$line" || record "gpu tests" FAIL "$line, $skipped skipped"

  # 3. The CUDA-built server: --backend cuda serves, auto picks CUDA.
  step "backend selection" 300 "$OUT/backend_tests.log" ctest --test-dir build-gpu -L backend --output-on-failure
  rc=$?
  record "backend selection" "$([ $rc = 0 ] && echo PASS || echo FAIL)" "$(grep -E 'tests passed' "$OUT/backend_tests.log" | tail -1)"
fi

# 4. Benchmarks at Llama-3-8B shapes (random bf16 weights made on the device).
LAYERS=32
[ "${QUICK:-0}" = 1 ] && LAYERS=4
if want bench && [ -x build-gpu/bin/crossreg-bench-gpu ]; then
  if step "crossreg-bench-gpu" 300 "$OUT/bench_gpu.md" build-gpu/bin/crossreg-bench-gpu --layers "$LAYERS"; then
    record "crossreg-bench-gpu" PASS "$LAYERS layers, figures in $OUT/bench_gpu.md"
  else
    record "crossreg-bench-gpu" FAIL "see $OUT/bench_gpu.md"
  fi
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
if want streams && [ -x build-gpu/bin/crossreg-server ]; then
  STORIES=$SHARED/models/stories260K/stories260K.gguf
  ADAPTER=$OUT/stories260K_random_adapter
  build-gpu/bin/crossreg-random-adapter --model "$STORIES" --out "$ADAPTER" --rank 8 >/dev/null 2>&1
  for target in "stories260K|$STORIES|$ADAPTER" "default model|models/default|"; do
    IFS='|' read -r name model adapter <<<"$target"
    log="$OUT/streams_${name// /_}.md"
    step "streams $name" 300 "$log" python3 scripts/compare_backends.py --bin build-gpu/bin --model "$model" \
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
