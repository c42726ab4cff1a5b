#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/) with clang into ./build-fuzz, writes their seeds,
# and runs each target for a bounded time over seeds + the committed regression inputs
# (fuzz/corpus/<target>/). New inputs go to build-fuzz/corpus/<target>/ (the repository
# is not written); crash inputs to build-fuzz/artifacts/<target>/.
#   scripts/fuzz.sh [seconds_per_target]     # default 45
# Environment: FUZZ_JOBS (build parallelism, default nproc), FUZZ_TARGETS (space-separated
# subset), FUZZ_PARALLEL (targets fuzzed at once, default nproc), BUILD_DIR (default
# build-fuzz). Needs: apt-get install clang libclang-rt-14-dev.
# Prints one line per target and exits 1 if any target crashed, leaked, timed out or ran
# out of memory.
set -uo pipefail
cd "$(dirname "$0")/.."

SECONDS_PER_TARGET=${1:-45}
JOBS=${FUZZ_JOBS:-$(nproc)}
BUILD_DIR=${BUILD_DIR:-build-fuzz}
CC_BIN=${CC_BIN:-clang}
CXX_BIN=${CXX_BIN:-clang++}

if ! command -v "$CXX_BIN" >/dev/null; then
  echo "[fuzz] $CXX_BIN not found: apt-get install clang libclang-rt-14-dev" >&2
  exit 2
fi
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)

echo "[fuzz] configuring $BUILD_DIR ($CXX_BIN, ASan + UBSan + libFuzzer)"
if ! cmake -S . -B "$BUILD_DIR" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER="$CC_BIN" -DCMAKE_CXX_COMPILER="$CXX_BIN" -DCROSSREG_FUZZ=ON \
    -DCROSSREG_BUILD_SERVER=OFF -DCROSSREG_BUILD_TESTS=OFF >"$BUILD_DIR.configure.log" 2>&1; then
  cat "$BUILD_DIR.configure.log" >&2
  exit 2
fi
rm -f "$BUILD_DIR.configure.log"
echo "[fuzz] building with -j$JOBS"
build_start=$(date +%s)
if ! cmake --build "$BUILD_DIR" -j "$JOBS" --target crossreg_fuzz >"$BUILD_DIR/build.log" 2>&1; then
  tail -40 "$BUILD_DIR/build.log" >&2
  exit 2
fi
echo "[fuzz] built in $(( $(date +%s) - build_start )) s"

rm -rf "$BUILD_DIR/seeds"
"$BUILD_DIR/bin/crossreg-fuzz-seeds" "$BUILD_DIR/seeds" || exit 2

targets=${FUZZ_TARGETS:-$(cat "$BUILD_DIR/fuzz_targets.txt")}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}

# One target: its row of the table goes to logs/<target>.row, and logs/<target>.failed
# marks a failure.
fuzz_one() {
  local target=$1 corpus artifacts log before inputs options start rc elapsed execs after artifact result kind
  corpus="$BUILD_DIR/corpus/$target"
  artifacts="$BUILD_DIR/artifacts/$target"
  log="$BUILD_DIR/logs/$target.log"
  mkdir -p "$corpus" "$artifacts" "$(dirname "$log")"
  rm -f "$BUILD_DIR/logs/$target.failed"
  before=$(find "$corpus" -type f | wc -l)
  inputs=("$corpus")
  [ -d "$BUILD_DIR/seeds/$target" ] && inputs+=("$BUILD_DIR/seeds/$target")
  [ -d "fuzz/corpus/$target" ] && inputs+=("fuzz/corpus/$target")
  options=(-max_total_time="$SECONDS_PER_TARGET" -rss_limit_mb=2048 -timeout=10
           -print_final_stats=1 -artifact_prefix="$artifacts/")
  [ -f "fuzz/$target.dict" ] && options+=(-dict="fuzz/$target.dict")
  echo "[fuzz] $target: ${SECONDS_PER_TARGET} s (log $log)"
  start=$(date +%s)
  "$BUILD_DIR/bin/$target" "${options[@]}" "${inputs[@]}" >"$log" 2>&1
  rc=$?
  elapsed=$(( $(date +%s) - start ))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  [ -z "$execs" ] && execs=$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$log" | tail -1)
  after=$(find "$corpus" -type f | wc -l)
  artifact=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -1)
  if [ "$rc" -eq 0 ] && [ -z "$artifact" ]; then
    result=ok
  else
    touch "$BUILD_DIR/logs/$target.failed"
    kind=$(basename "${artifact:-failure}" | cut -d- -f1)
    result="FAILED (${kind}, exit $rc) ${artifact:-see $log}"
  fi
  printf '%-22s %12s %8s %16s   %s\n' "$target" "${execs:-?}" "$elapsed" \
    "+$((after - before)) ($after)" "$result" >"$BUILD_DIR/logs/$target.row"
}

# Each fuzzer runs on one core, so FUZZ_PARALLEL of them (default: the cores) run at once:
# the same fuzzing time per target in half the wall time on 2 cores.
PARALLEL=${FUZZ_PARALLEL:-$(nproc)}
mkdir -p "$BUILD_DIR/logs"
for target in $targets; do
  while [ "$(jobs -rp | wc -l)" -ge "$PARALLEL" ]; do wait -n; done
  fuzz_one "$target" &
done
wait

failed=0
printf '\n%-22s %12s %8s %16s   %s\n' target executions seconds "new corpus" result
for target in $targets; do
  cat "$BUILD_DIR/logs/$target.row" 2>/dev/null || { echo "$target: no result"; failed=1; }
  [ -f "$BUILD_DIR/logs/$target.failed" ] && failed=1
done
exit $failed
