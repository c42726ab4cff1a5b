#!/usr/bin/env bash
# The tests under sanitizers, as CI runs them (scripts/test.sh calls this):
#   build-asan: AddressSanitizer + UndefinedBehaviorSanitizer (any report fails), the
#               unit, server-unit, scheduler and integration tests (the integration
#               tests start the sanitized crossreg-server, so its reports count too);
#   build-tsan: ThreadSanitizer, the scheduler tests (the scheduler thread, client
#               threads submitting and aborting, event handlers) and the CPU backend's
#               threaded forwards (rows split between threads, per-op threads).
# Left out under ASan, for CI's 90 minutes on the slowest 2-core hosts, and run in the
# Release and portable-kernel passes of scripts/test.sh: the statistical DistributionTest
# suite (45 s each there; it runs the same code as the exactness tests, which stay in),
# and three long poles, each the same code path on a bigger model as a quick test that
# stays in: greedy identity on stories260K with a random adapter and with a corpus n-gram
# table (about 4-5 minutes each under ASan on a Zen 1 class host; GreedyIdentityOnRandomModels
# stays) and structured output on the default model (over 5 minutes; StructuredOutputTest,
# every mode on both APIs on a tiny model, stays).
# Usage: scripts/sanitize.sh [asan|tsan|all] (default all). Assumes scripts/setup.sh ran.
set -euo pipefail
cd "$(dirname "$0")/.."
WHICH=${1:-all}
JOBS=${SANITIZE_JOBS:-$(nproc)}

# Reports are errors: the test process exits non-zero and CTest shows the report.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}

configure() {  # dir, sanitizers
  # -O1 keeps the sanitized tests quick to build and not too slow to run, and line tables
  # (-g1) are all the reports need: with full debug info the ASan tree took 28 minutes
  # to build on a 2-core Zen 1 class host, 21 with line tables.
  # Building the tests and the server at -O0 (2.3x faster to compile) made the engine's
  # tests 2-4x slower to run: the linker keeps the tests' -O0 copies of the template
  # functions that the engine calls too. The portable kernels are not forced: every SIMD
  # path this CPU has is checked. At -O1 with ASan, GCC 12 warns "may be used
  # uninitialized" inside libstdc++'s <regex> (std::function moved into an NFA state: a
  # false positive), so that warning is off.
  cmake -S . -B "$1" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
    -DCROSSREG_SANITIZE="$2" -DCMAKE_CXX_FLAGS="-fno-sanitize-recover=all -Wno-maybe-uninitialized" >/dev/null
}

# Also left out under ASan: the greedy-identity sweep over quantized layouts for all but
# one layout of each family (Q8_0, Q4_K_M, IQ4_XS stay; every layout's kernels still run
# under ASan in QuantizedLinearTest and LogitsAgreeWithTheDequantizedModel, and the sweep
# runs whole in the Release, portable and AVX2 passes): the sweep was half of the ASan
# tree's test time. And the Jinja step budget's wall-time bound, a timing, not a memory
# check (the budget itself is tested with small budgets).
ASAN_LEFT_OUT='parity|DistributionTest|GreedyIdentityOnStories260KWithRandomAdapter|GreedyIdentityWithCorpusNgramTable|StructuredOutputDefaultModelTest'
ASAN_LEFT_OUT+='|LosslessAndNgramEqualArOnEverySimdPath/(Q4_0|Q4_1|Q5_0|Q5_1|Q2_K|Q3_K_mix|Q5_K_M|Q6_K|IQ4_NL)( |$)'
ASAN_LEFT_OUT+='|JinjaLimits.DefaultStepBudgetEndsARunawayLoopInSeconds'

if [ "$WHICH" = all ] || [ "$WHICH" = asan ]; then
  echo "[sanitize] ASan+UBSan: building unit, scheduler, server and integration tests"
  configure build-asan address,undefined
  time cmake --build build-asan -j "$JOBS" --target crossreg_unit_tests crossreg_scheduler_tests \
    crossreg_server_unit_tests crossreg_client_tests crossreg_integration_tests crossreg-server crossreg-generate
  echo "[sanitize] ASan+UBSan: ctest -L 'unit|scheduler|integration'"
  time ctest --test-dir build-asan -L 'unit|scheduler|integration' -E "$ASAN_LEFT_OUT" --output-on-failure \
    -j "$JOBS" --timeout 1200
fi

if [ "$WHICH" = all ] || [ "$WHICH" = tsan ]; then
  echo "[sanitize] TSan: building the scheduler tests and the threaded unit tests"
  configure build-tsan thread
  time cmake --build build-tsan -j "$JOBS" --target crossreg_scheduler_tests crossreg_threaded_unit_tests
  echo "[sanitize] TSan: ctest -L scheduler"
  time ctest --test-dir build-tsan -L scheduler --output-on-failure -j "$JOBS" --timeout 1200
  echo "[sanitize] TSan: the threaded forwards (batch invariance, rows split and per-op threads; the acceptance memory shared by threads)"
  time ctest --test-dir build-tsan -L threaded -R 'rowsplit|perop|ManyThreadsShareOneMemory' --output-on-failure -j "$JOBS" --timeout 1200
fi
