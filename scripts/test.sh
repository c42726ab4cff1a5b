#!/usr/bin/env bash
# The whole test suite: installs packages, builds, runs every CTest test (unit,
# scheduler, integration against a real server, the trainer's pytest suite), then the
# exactness tests once more on the portable kernels (CROSSREG_SIMD=scalar) and, on an
# AVX-512 host, on the AVX2 kernels with the scripts' tests (CROSSREG_SIMD=avx2). Where the
# CUDA toolkit is installed it also builds the CUDA tree (-DCROSSREG_CUDA=ON: the
# backend, its GPU tests, which skip with a message on a machine without a GPU, and the
# server with --backend cuda|auto, checked by the backend-selection test). Then the
# deployment files (scripts/check_deploy.sh: kustomize renders, promtool), the tests
# under ASan+UBSan and TSan (scripts/sanitize.sh) and every libFuzzer target for
# FUZZ_SECONDS (default 20) each (scripts/fuzz.sh).
# SKIP_CUDA=1, SKIP_DEPLOY_CHECK=1, SKIP_SANITIZERS=1, SKIP_FUZZ=1 leave a stage out.
set -euo pipefail
cd "$(dirname "$0")/.."
# Stage times: each stage line says how long the previous one took, and a table of all
# of them is printed at the end, on success or failure, for CI's log.
run_start=$(date +%s)
stage_start=$run_start
stage_name="setup: packages, configure, build (scripts/setup.sh)"
stage_rows=()
stage() {  # starts stage "$*"
  local now
  now=$(date +%s)
  stage_rows+=("$(printf '%6d s  %s' $((now - stage_start)) "$stage_name")")
  echo "[test] ---- $* (previous stage: $((now - stage_start)) s)"
  stage_start=$now
  stage_name=$*
}
print_stage_times() {
  local rc=$? now
  now=$(date +%s)
  [ "$stage_name" != done ] && stage_rows+=("$(printf '%6d s  %s (ended with exit code %d)' $((now - stage_start)) "$stage_name" "$rc")")
  echo "[test] ---- stage times"
  printf '[test] %s\n' "${stage_rows[@]}"
  printf '[test] %6d s  total\n' $((now - run_start))
}
trap print_stage_times EXIT
WITH_TEST_TOOLS=1 scripts/setup.sh
# On a failure, the failing tests' output is printed again at the very end (from CTest's
# LastTest.log), since a CI log viewer often shows only the tail.
run_ctest() {
  local dir=$1
  shift
  if ctest --test-dir "$dir" --output-on-failure "$@"; then return 0; fi
  local log="$dir/Testing/Temporary/LastTest.log" failed="$dir/Testing/Temporary/LastTestsFailed.log"
  if [ -f "$failed" ] && [ -f "$log" ]; then
    echo "[test] ---- the failing tests' output again:"
    cut -d: -f2- "$failed" | while read -r name; do
      echo "[test] ==== $name"
      awk -v n="$name" '!on && /^[0-9]+\/[0-9]+ Test: / && substr($0, index($0, "Test: ") + 6) == n {on = 1}
        on {print} on && / end time: / {on = 0}' \
        "$log" | tail -n 80
    done
  fi
  return 1
}
stage "ctest"
run_ctest "${BUILD_DIR:-build}" -j "$(nproc)" --timeout 900
# The exactness tests again on the portable kernels (no AVX at all), so every SIMD path
# of this CPU and the one a CPU without AVX-512 would run keep AR's outputs. Left out of
# both passes: the suites that already loop over every SIMD level up to this CPU's
# (cpu::AvailableSimdLevels: the quantized layouts' greedy identity, the quantized
# kernels, batch invariance), which the first pass ran on each of these paths.
EXACTNESS='CrossRegressionExactness|DistributionTest|SchedulerExactness|SeedIdentity|SeedExact|TokenDraw|StoriesReference|VerifyTest|VerifyRule|PagedAttention'
stage "ctest exactness tests with CROSSREG_SIMD=scalar"
CROSSREG_SIMD=scalar run_ctest "${BUILD_DIR:-build}" -j "$(nproc)" --timeout 900 -R "$EXACTNESS"
# On an AVX-512 host, the same tests and the scripts' tests (which run the benchmark
# programs and read their peak probes and tables back) again as an AVX2-only host runs
# them: a suite that passes only where AVX-512 is present has failed on AVX2 hosts before.
if grep -q -w avx512f /proc/cpuinfo 2>/dev/null; then
  stage "ctest exactness and scripts tests with CROSSREG_SIMD=avx2 (as an AVX2-only host)"
  CROSSREG_SIMD=avx2 run_ctest "${BUILD_DIR:-build}" -j "$(nproc)" --timeout 900 -R "$EXACTNESS|scripts_pytest"
fi

NVCC=$(command -v nvcc || true)
[ -z "$NVCC" ] && [ -x /usr/local/cuda/bin/nvcc ] && NVCC=/usr/local/cuda/bin/nvcc
if [ -n "$NVCC" ] && [ "${SKIP_CUDA:-0}" != 1 ]; then
  stage "CUDA build with $NVCC (sm_80, sm_90): backend, GPU tests, benchmark, server"
  cmake -S . -B build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DCROSSREG_CUDA=ON \
    -DCMAKE_CUDA_COMPILER="$NVCC" >/dev/null
  cmake --build build-cuda -j "$(nproc)" --target crossreg_cuda crossreg_gpu_tests crossreg-bench-gpu \
    crossreg-server crossreg-generate crossreg_backend_selection_tests
  echo "[test] ctest -L gpu (GPU tests: they skip with a message without a device)"
  ctest --test-dir build-cuda -L gpu --output-on-failure
  echo "[test] ctest -L backend (the CUDA-built server: --backend cuda refused without a device, auto serves)"
  ctest --test-dir build-cuda -L backend --output-on-failure
else
  echo "[test] no nvcc found: CUDA backend not built"
fi

if [ "${SKIP_DEPLOY_CHECK:-0}" != 1 ]; then
  stage "deployment files: kustomize overlays, metric names, promtool (scripts/check_deploy.sh)"
  scripts/check_deploy.sh
fi
if [ "${SKIP_SANITIZERS:-0}" != 1 ]; then
  stage "sanitizers: ASan+UBSan (unit, scheduler, integration), TSan (scheduler, threaded forwards) (scripts/sanitize.sh)"
  scripts/sanitize.sh
fi
if [ "${SKIP_FUZZ:-0}" != 1 ]; then
  stage "fuzzers: every libFuzzer target for ${FUZZ_SECONDS:-20} s (scripts/fuzz.sh)"
  scripts/fuzz.sh "${FUZZ_SECONDS:-20}"
fi
stage "done"
