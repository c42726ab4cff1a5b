#!/usr/bin/env bash
# Stages of GPU work, each one device-tool call under its 10-minute limit, with the GPU's
# training and the checks side by side where they only share the GPU. A lease is 15 minutes
# of device time today: `drafters` (one call, about 6 minutes) is the training stage that fits.
#   hybrid-ab  two drafters for the self-drafting default model at once (issue 47): the hybrid
#          objective continued (HYBRID_A: extra trainer arguments) and a blocks LoRA adapter
#          distilled over it (or, SECOND=hybrid, a second continuation with HYBRID_B); pack-drafters
#          (here) prepares .lease_drafters.
#   drafters  the default model's drafters (issue 47): the base taught to draft for itself
#          (pretrain --init-model --hybrid) and a LoRA adapter for outcome blocks, beside the
#          GPU tests and the server streams, then crossreg-bench-gpu alone; pack-drafters (here)
#          prepares .lease_drafters. drafter-speed: a self-drafting model's TPF and tokens/s
#          through crossreg-generate on CUDA and on the CPU, after the GPU parity tests.
#   train  the default base model's pretraining on the GPU (scripts/pretrain_default.sh) while
#          the CPU builds the CUDA tree (niced, 12 jobs) and then runs the GPU tests and the
#          backend-selection test (scripts/gpu_check.sh "build tests backend"): tests check
#          correctness, not time, so sharing the GPU with training costs them nothing.
#   distill  the adapter's distillation (scripts/distill_default.sh) while the CUDA-built
#          server is compared with the CPU server, greedy, every mode (gpu_check "streams").
#          Needs the warm machine of `train` (its base model and build stay there); call it
#          within the 30 s the machine stays warm.
#   bench  crossreg-bench-gpu and the PyTorch eager peer at Llama-3-8B shapes, alone on the
#          GPU (timings).
#   prebuilt  no build on the device: the GPU tests, both benchmarks (crossreg's also without
#          CUDA graphs, without the XR logits' copy and with a bf16 K/V cache; BEFORE=folder
#          adds an earlier build's)
#          and the stories260K server comparison with binaries built here (build-cuda, copied
#          and stripped into .gpubin), about 1.5 minutes. Used on 2026-11-23 and -24.
#   profile  Nsight Compute over one AR and one 33-row forward (2 layers): time per kernel.
#   loadgen  crossreg-loadgen against crossreg-server --backend cuda on a random ~0.8B Llama
#          (needs .gpu_check/tokenizer.json, copied from models/default), about 1.5 minutes.
# Each stage returns at most 8 files: training's shards and tarballs, plus lease-<stage>.tar.gz
# with every log. Device tool calls (carry lists keep the tree under 64 MiB: the corpus and
# .devdeps do not fit beside models/default, which `train` does not need: move it aside first):
#   run(carry=["training/data/corpus", ".devdeps", ".gpu_check"], command="scripts/gpu_lease.sh train")
#   run(command="scripts/gpu_lease.sh distill")
#   run(command="scripts/gpu_lease.sh bench")
#   here: mkdir -p .gpubin && cp build-cuda/bin/{crossreg_gpu_tests,crossreg-bench-gpu,crossreg-server,\
#         crossreg,crossreg-generate,crossreg-random-adapter} .gpubin/ && strip .gpubin/*
#   run(carry=[".devdeps", ".gpu_check", ".gpubin"], command="scripts/gpu_lease.sh prebuilt")
set -uo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = pack-drafters ]; then
  # Here, before `drafters`: .lease_drafters/ holds models/default's base (shards xz'd: 44 ->
  # ~33 MB) and a packed-corpus subset (DRAFTERS_TRAIN_TOKENS, default 26M train tokens), so
  # that with .gpucarry and .gpu_check (scripts/gpu_check.sh pack-prebuilt) one call carries
  # everything under 64 MiB with models/default moved out of the checkout.
  # DRAFTERS_MODEL packs another model directory (e.g. a trained hybrid, for drafter-speed).
  set -e
  D=.lease_drafters
  M=${DRAFTERS_MODEL:-models/default}
  rm -rf "$D" && mkdir -p "$D/base"
  for f in "$M"/*.json; do cp "$f" "$D/base/"; done
  for f in "$M"/*.safetensors; do xz -1 -T0 -c "$f" >"$D/base/$(basename "$f").xz"; done
  /usr/bin/python3 -m training corpus-subset --corpus "${CORPUS:-training/data/corpus}" --out "$D/corpus" \
    --train-tokens "${DRAFTERS_TRAIN_TOKENS:-26000000}" --pieces 256
  du -sh "$D" "$D"/*
  exit 0
fi
: "${OUT:?the device tool sets OUT}"
stage=${1:?usage: gpu_lease.sh train|distill|bench}
LOGS=/tmp/lease-$stage
rm -rf "$LOGS" && mkdir -p "$LOGS"
echo "[lease] $stage on $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)," \
     "$(nproc) cores, python3 $(python3 -c 'import torch; print("torch", torch.__version__)' 2>&1)"

# The carried Debian libraries and the CUDA runtime on the library path (binaries built here).
device_env() {
  # shellcheck disable=SC1091
  source .devdeps/activate.sh
  for d in /usr/local/cuda/lib64 /usr/local/cuda/lib; do
    [ -d "$d" ] && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$d"
  done
}

# The model pack-drafters packed (.lease_drafters/base, shards xz'd) unpacked into $1.
restore_base() {
  mkdir -p "$1"
  for f in .lease_drafters/base/*.json; do cp "$f" "$1"/; done
  for f in .lease_drafters/base/*.xz; do xz -dc -T0 "$f" >"$1/$(basename "$f" .xz)"; done
  echo "[lease] base restored in $1 at ${SECONDS}s: $(du -sh "$1" | cut -f1)"
}

pack_logs() {
  tar czf "$OUT/lease-$stage.tar.gz" -C "$LOGS" . 2>/dev/null
  for f in "$LOGS"/check/summary.md; do [ -f "$f" ] && cat "$f"; done
  ls -la "$OUT"
}

case "$stage" in
  train)
    (GC_STEPS="build tests backend" GC_JOBS=12 OUT=$LOGS/check timeout 560 nice -n 10 \
       scripts/gpu_check.sh >"$LOGS/check.out" 2>&1) &
    check=$!
    TIME_BUDGET_S=${PRETRAIN_BUDGET_S:-520} RETURN_DIR=$OUT timeout 585 scripts/pretrain_default.sh
    echo "[lease] pretrain exit $?"
    wait "$check"; echo "[lease] gpu_check exit $?"
    tail -5 "$LOGS/check.out"
    pack_logs
    ;;
  distill)
    if [ ! -f training/runs/pretrain/model/config.json ]; then
      echo "[lease] no base model at training/runs/pretrain/model: this machine is not train's" >&2
      exit 3
    fi
    (GC_STEPS="streams" OUT=$LOGS/check timeout 560 nice -n 10 \
       scripts/gpu_check.sh >"$LOGS/check.out" 2>&1) &
    check=$!
    TIME_BUDGET_S=${DISTILL_BUDGET_S:-520} RETURN_DIR=$OUT timeout 585 scripts/distill_default.sh
    echo "[lease] distill exit $?"
    wait "$check"; echo "[lease] gpu_check exit $?"
    pack_logs
    ;;
  bench)
    GC_STEPS="${BENCH_STEPS:-bench peer}" OUT=$LOGS/check timeout 560 scripts/gpu_check.sh \
      >"$LOGS/check.out" 2>&1
    echo "[lease] gpu_check exit $?"
    pack_logs
    ;;
  prebuilt)
    # Binaries built on the CPU machine (build-cuda, sm_80+sm_90, same Debian libraries as
    # .devdeps) carried as .gpubin: no device time spent compiling. The tests find the
    # shared data through CROSSREG_SHARED_DIR; .gpu_check carries stories260K.
    device_env
    for lib in $(ldd .gpubin/crossreg_gpu_tests | awk '/not found/{print $1}'); do
      d=$(find /usr/local /opt -name "$lib" 2>/dev/null | head -1)
      [ -n "$d" ] && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$(dirname "$d")" && echo "[lease] $lib in $d"
    done
    export CROSSREG_SHARED_DIR="$PWD/.gpu_check/shared" CROSSREG_SOURCE_DIR="$PWD"
    B=.gpubin
    ldd $B/crossreg_gpu_tests | grep -i "not found"
    timeout 200 $B/crossreg_gpu_tests 2>&1 | tee "$LOGS/gpu_tests.log" | grep -E "^\[ *(OK|FAILED|PASSED|SKIPPED) *\]|tests ran|Failure|error" | tail -60
    echo "[lease] gpu tests exit ${PIPESTATUS[0]}"
    timeout 170 $B/crossreg-bench-gpu --layers 32 2>&1 | tee "$LOGS/bench_gpu.md"
    echo "[lease] bench exit ${PIPESTATUS[0]}"
    # Same call, same machine: without CUDA graphs, and (BEFORE=folder) an earlier build.
    timeout 120 $B/crossreg-bench-gpu --layers 32 --graphs=false 2>&1 | tee "$LOGS/bench_gpu_nographs.md"
    timeout 120 $B/crossreg-bench-gpu --layers 32 --xr_logits=false 2>&1 | tee "$LOGS/bench_gpu_nologits.md"
    # Whole logit rows to the host instead of row summaries (the default run returns summaries).
    timeout 120 $B/crossreg-bench-gpu --layers 32 --summaries=false 2>&1 | tee "$LOGS/bench_gpu_whole_rows.md"
    if [ -n "${BEFORE:-}" ] && [ -x "$BEFORE/crossreg-bench-gpu" ]; then
      timeout 120 "$BEFORE/crossreg-bench-gpu" --layers 32 2>&1 | tee "$LOGS/bench_gpu_before.md"
    fi
    timeout 120 python3 engine/cuda/tools/bench_pytorch_peer.py --layers 32 2>&1 | tee "$LOGS/pytorch_peer.md"
    echo "[lease] peer exit ${PIPESTATUS[0]}"
    STORIES=$CROSSREG_SHARED_DIR/models/stories260K/stories260K.gguf
    $B/crossreg-random-adapter --model "$STORIES" --out "$LOGS/adapter" --rank 8 >/dev/null 2>&1
    timeout 90 python3 scripts/compare_backends.py --bin $B --model "$STORIES" --adapter "$LOGS/adapter" \
      --backends cuda,cpu --max_tokens 64 2>&1 | tee "$LOGS/streams_stories260K.md" | tail -8
    echo "[lease] streams exit ${PIPESTATUS[0]}"
    pack_logs
    ;;
  prebuilt-distill)
    # One call, nothing compiled there (scripts/gpu_check.sh pack-prebuilt here first), the
    # adapter distilled from models/default's base on a packed-corpus subset
    # (python3 -m training corpus-subset --out .distill_corpus):
    #   1. timings alone on the GPU: crossreg-bench-gpu (bf16, fp8, per-row attention
    #      splits, whole rows) and the PyTorch peer;
    #   2. scripts/distill_default.sh for the rest of the call, beside the correctness
    #      checks (GPU tests, server streams CUDA vs CPU), which only share the GPU.
    # Carry [".gpucarry", ".gpu_check", ".distill_corpus"], with models/default's adapter/,
    # ngram_table.bin and corpus_manifest.tsv moved aside (64 MiB).
    GC_PREBUILT=1 GC_STEPS="bench peer" OUT=$LOGS/timings timeout 240 scripts/gpu_check.sh >"$LOGS/timings.out" 2>&1
    echo "[lease] timings exit $? at ${SECONDS}s"
    budget=$((560 - SECONDS))
    (BASE=models/default CORPUS=.distill_corpus RUN_DIR=/tmp/distill TIME_BUDGET_S=$budget RESERVE_S=40 \
       RETURN_DIR=$OUT timeout $((budget + 15)) scripts/distill_default.sh >"$LOGS/distill.out" 2>&1
     echo "[lease] distill exit $? at ${SECONDS}s" >>"$LOGS/distill.out") &
    distill=$!
    GC_PREBUILT=1 GC_STEPS="tests streams" OUT=$LOGS/checks timeout 300 nice -n 5 scripts/gpu_check.sh \
      >"$LOGS/checks.out" 2>&1
    echo "[lease] checks exit $? at ${SECONDS}s"
    wait "$distill"
    grep -E "auto-steps|time budget|eval step|exported|exit" "$LOGS/distill.out" | tail -8
    { cat "$LOGS/timings/summary.md" "$LOGS/checks/summary.md" 2>/dev/null
      echo; echo '```'; grep -E "eval step|auto-steps|exit" "$LOGS/distill.out" | tail -4; echo '```'
      for f in "$LOGS"/timings/bench_gpu_*.md "$LOGS/timings/pytorch_peer.md"; do echo; echo "### $(basename "$f")"; echo '```'; cat "$f"; echo '```'; done
      grep -h "fp8 quality" "$LOGS/checks/gpu_tests.log" 2>/dev/null
    } >"$OUT/summary.md"
    cat "$OUT/summary.md"
    pack_logs
    ;;
  drafters)
    # One call that trains the default model's drafters on the GPU (issue 47) while the CUDA
    # checks run beside them, then times the engine alone:
    #   hybrid   the shipped base taught to draft for itself in the outcome-block layout
    #            (pretrain --init-model --hybrid, HYBRID_TARGET self: its own distributions);
    #   distill  a LoRA drafter for outcome blocks over the frozen base (DRAFT_LAYOUT=blocks);
    #   checks   the GPU tests and the CUDA-vs-CPU server streams (correctness only);
    #   bench    crossreg-bench-gpu at Llama-3-8B shapes, batch 1 and 8, once training is done.
    # Carry [".gpucarry", ".gpu_check", ".lease_drafters"] (this script's pack-drafters and
    # gpu_check.sh pack-prebuilt, here) with models/default moved out of the checkout.
    D=.lease_drafters
    restore_base models/default
    budget=${DRAFTERS_BUDGET_S:-400}
    (INIT_MODEL=models/default HYBRID=1 HYBRID_TARGET=${HYBRID_TARGET:-self} HYBRID_ANCHORS=${HYBRID_ANCHORS:-16} \
       HYBRID_ROWS=${HYBRID_ROWS:-6} LR=${HYBRID_LR:-5e-4} WARMUP=100 BATCH=${HYBRID_BATCH:-32} COMPILE=0 \
       CORPUS=$D/corpus RUN_DIR=/tmp/hybrid TIME_BUDGET_S=$budget RESERVE_S=45 \
       timeout $((budget + 30)) scripts/pretrain_default.sh >"$LOGS/hybrid.out" 2>&1
     echo "[lease] hybrid exit $? at ${SECONDS}s" >>"$LOGS/hybrid.out") &
    hybrid=$!
    (BASE=models/default CORPUS=$D/corpus RUN_DIR=/tmp/distill DRAFT_LAYOUT=blocks \
       N_EXAMPLES=${DISTILL_EXAMPLES:-98304} TIME_BUDGET_S=$budget RESERVE_S=45 \
       timeout $((budget + 30)) scripts/distill_default.sh >"$LOGS/distill.out" 2>&1
     echo "[lease] distill exit $? at ${SECONDS}s" >>"$LOGS/distill.out") &
    distill=$!
    GC_PREBUILT=1 GC_STEPS="tests streams" OUT=$LOGS/checks timeout 330 nice -n 5 scripts/gpu_check.sh \
      >"$LOGS/checks.out" 2>&1
    echo "[lease] checks exit $? at ${SECONDS}s"
    wait "$hybrid" "$distill"
    tail -4 "$LOGS/hybrid.out" "$LOGS/distill.out"
    export LD_LIBRARY_PATH="/tmp/gpucarry/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    if [ $((SECONDS + 70)) -lt "${DRAFTERS_DEADLINE_S:-540}" ]; then
      timeout $((${DRAFTERS_DEADLINE_S:-540} - SECONDS - 15)) /tmp/gpucarry/bin/crossreg-bench-gpu --layers 32 \
        --batches 1,8 --gammas 4,30 --iters 10 2>&1 | tee "$LOGS/bench_gpu.md"
    fi
    # What comes back (8 files at most, 16 MiB each): the hybrid's shards, its small files,
    # the blocks adapter, every log.
    cp /tmp/hybrid/model/model*.safetensors "$OUT"/ 2>/dev/null
    tar czf "$OUT/hybrid-files.tar.gz" -C /tmp/hybrid --exclude='*.safetensors' model run.json train.log 2>/dev/null
    tar czf "$OUT/distill-files.tar.gz" -C /tmp/distill adapter run.json train.log 2>/dev/null
    cat "$LOGS/checks/summary.md" 2>/dev/null
    grep -E "eval step|auto-steps|exported|exit" "$LOGS/hybrid.out" "$LOGS/distill.out" | tail -14
    pack_logs
    ;;
  hybrid-ab)
    # Two ways to a better drafter for the self-drafting default model, side by side on the one
    # GPU (issue 47), from the model pack-drafters packed:
    #   A  the hybrid objective continued (HYBRID_A: extra `training pretrain` arguments);
    #   B  SECOND=distill (default): a LoRA adapter for outcome blocks distilled over the
    #      frozen model (its control stream unchanged, the drafting rows gain capacity);
    #      SECOND=hybrid: the hybrid objective with HYBRID_B instead.
    # A hybrid comes back whole if its held-out next-token loss stayed within 0.01 nats of the
    # base's; of two hybrids, the one accepting more drafts at depth 4 on the held-out stream
    # (`heldout_block_accepted_4`). The adapter, the logs and run.json always come back.
    # Carry [".lease_drafters"] with models/default moved out of the checkout (64 MiB).
    D=.lease_drafters
    restore_base models/default
    budget=${HYBRID_BUDGET_S:-430}
    second=${SECOND:-distill}
    hybrid() {  # hybrid VARIANT EXTRA-ARGS...
      local v=$1; shift
      INIT_MODEL=models/default HYBRID=1 HYBRID_TARGET=self HYBRID_ANCHORS=${HYBRID_ANCHORS:-64} \
        HYBRID_ROWS=${HYBRID_ROWS:-6} LR=${HYBRID_LR:-3e-4} WARMUP=100 BATCH=${HYBRID_BATCH:-32} COMPILE=0 \
        CORPUS=$D/corpus RUN_DIR=/tmp/hybrid-$v TIME_BUDGET_S=$budget RESERVE_S=45 \
        timeout $((budget + 30)) scripts/pretrain_default.sh "$@" >"$LOGS/hybrid-$v.out" 2>&1
      echo "[lease] hybrid-$v exit $? at ${SECONDS}s" >>"$LOGS/hybrid-$v.out"
    }
    # shellcheck disable=SC2086
    hybrid A ${HYBRID_A:-} &
    if [ "$second" = hybrid ]; then
      # shellcheck disable=SC2086
      hybrid B ${HYBRID_B:-} &
    else
      (BASE=models/default CORPUS=$D/corpus RUN_DIR=/tmp/distill DRAFT_LAYOUT=blocks BLOCK_ROWS=${HYBRID_ROWS:-6} \
         N_EXAMPLES=${DISTILL_EXAMPLES:-131072} TIME_BUDGET_S=$budget RESERVE_S=45 \
         timeout $((budget + 30)) scripts/distill_default.sh >"$LOGS/distill.out" 2>&1
       echo "[lease] distill exit $? at ${SECONDS}s" >>"$LOGS/distill.out") &
    fi
    wait
    grep -hE "auto-steps|eval step|exit" "$LOGS"/hybrid-*.out "$LOGS"/distill.out 2>/dev/null | tail -24
    win=$(python3 - <<'PY'
import json
import sys
best = None
for v in "AB":
    try:
        h = json.load(open(f"/tmp/hybrid-{v}/run.json"))["history"]
    except (OSError, ValueError, KeyError):
        continue
    first, last = h[0], h[-1]
    ok = last["heldout_loss"] <= first["heldout_loss"] + 0.01
    print(f"hybrid-{v}: accepted@4 {first.get('heldout_block_accepted_4')} -> "
          f"{last.get('heldout_block_accepted_4')}, held-out loss {first['heldout_loss']:.4f} -> "
          f"{last['heldout_loss']:.4f}{'' if ok else ' (worse: not returned)'}", file=sys.stderr)
    if ok and (best is None or last["heldout_block_accepted_4"] > best[1]):
        best = (v, last["heldout_block_accepted_4"])
print(best[0] if best else "")
PY
)
    echo "[lease] returning hybrid-${win:-none}"
    [ -n "$win" ] && cp /tmp/hybrid-"$win"/model/model*.safetensors "$OUT"/
    for v in A B; do
      [ -d /tmp/hybrid-$v ] && tar czf "$OUT/hybrid-$v-files.tar.gz" -C /tmp/hybrid-$v --exclude='*.safetensors' model run.json train.log 2>/dev/null
    done
    [ -d /tmp/distill ] && tar czf "$OUT/distill-files.tar.gz" -C /tmp/distill adapter run.json train.log 2>/dev/null
    echo "${win:-none}" >"$OUT/winner.txt"
    pack_logs
    ;;
  drafter-speed)
    # A self-drafting model (pack-drafters with DRAFTERS_MODEL=its directory and a small
    # DRAFTERS_TRAIN_TOKENS: the held-out stream gives the prompts) served by crossreg-generate
    # on CUDA and on the CPU: scripts/acceptance_report.py's AR and outcome-block rows on
    # SPEED_PROMPTS held-out prompts, tokens/s and TPF per backend; first the GPU parity tests
    # (FILTER). Carry [".gpucarry", ".gpu_check", ".lease_drafters"].
    D=.lease_drafters
    restore_base /tmp/drafter
    [ -x /tmp/gpucarry/bin/crossreg_gpu_tests ] || { mkdir -p /tmp/gpucarry && xz -dc .gpucarry/prebuilt.tar.xz | tar xf - -C /tmp/gpucarry; }
    export LD_LIBRARY_PATH="/tmp/gpucarry/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export CROSSREG_SHARED_DIR="$PWD/.gpu_check/shared" CROSSREG_SOURCE_DIR="$PWD"
    timeout 120 /tmp/gpucarry/bin/crossreg_gpu_tests --gtest_filter="${FILTER:-CudaBackendParityTest.*}" 2>&1 |
      tee "$LOGS/gpu_tests.log" | grep -E "^\[ *(OK|FAILED|PASSED) *\]|Failure|actual|INTERNAL|logits row" | head -60
    for backend in cuda cpu; do
      timeout 150 python3 scripts/acceptance_report.py --binary /tmp/gpucarry/bin/crossreg-generate --model /tmp/drafter \
        --adapter none --packed-corpus "$D/corpus" --prompts "${SPEED_PROMPTS:-4}" --backend $backend \
        --threads 8 --only "lossless blocks" --out "$LOGS/speed_$backend.md" 2>&1 | grep -E "TPF|wrote|Error|failed"
    done
    cp "$LOGS"/speed_*.md "$OUT"/ 2>/dev/null
    pack_logs
    ;;
  diagnose)
    # Reruns failing GPU tests per setting (CROSSREG_TEST_* in tests/gpu/gpu_test_support.h),
    # under compute-sanitizer, and with an earlier build's test binary (.gpucarry/old/, if
    # packed): which change broke them. FILTER picks the tests.
    mkdir -p /tmp/gpucarry && xz -dc .gpucarry/prebuilt.tar.xz | tar xf - -C /tmp/gpucarry
    export LD_LIBRARY_PATH="/tmp/gpucarry/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    shared=$(cat .gpucarry/shared_dir)
    [ -e "$shared" ] || { mkdir -p "$(dirname "$shared")" && ln -s "$PWD/.gpu_check/shared" "$shared"; }
    export CROSSREG_SOURCE_DIR=$PWD
    T=/tmp/gpucarry/bin/crossreg_gpu_tests
    F=${FILTER:-CudaBackendTest.*:CudaExactnessTest.*:CudaFp8BackendTest.GreedyLossless*}
    brief() { grep -E "^\[ *(OK|FAILED) *\]|Which is|step [0-9]|: Failure|ERROR SUMMARY|Invalid|Uninitialized|at 0x|by thread" | head -${1:-40}; }
    for setting in "default|" "graphs off|CROSSREG_TEST_CUDA_GRAPHS=0" "per-row splits|CROSSREG_TEST_PREDICTIVE_SPLITS=-1" \
                   "simt apart|CROSSREG_TEST_PREDICTIVE_MMA=0"; do
      IFS='|' read -r name envs <<<"$setting"
      echo "[diagnose] == $name"
      # shellcheck disable=SC2086
      env $envs timeout 60 "$T" --gtest_filter="$F" >"$LOGS/tests_${name// /_}.log" 2>&1
      brief 30 <"$LOGS/tests_${name// /_}.log"
    done
    if [ -f .gpucarry/old/crossreg_gpu_tests.xz ]; then
      xz -dc .gpucarry/old/crossreg_gpu_tests.xz >/tmp/old_gpu_tests && chmod +x /tmp/old_gpu_tests
      echo "[diagnose] == the earlier build"
      timeout 60 /tmp/old_gpu_tests --gtest_filter="${OLD_FILTER:-CudaBackendTest.*:CudaExactnessTest.*}" >"$LOGS/old.log" 2>&1
      brief 30 <"$LOGS/old.log"
    fi
    CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null | head -1)
    SF=${SANITIZE_FILTER:-CudaBackendTest.OneRowForwardsReplayLikeEagerOnes:CudaBackendTest.SummaryRows*}
    for tool in memcheck initcheck; do
      echo "[diagnose] == compute-sanitizer --tool $tool"
      timeout 100 "$CS" --tool "$tool" --print-limit 8 "$T" --gtest_filter="$SF" >"$LOGS/sanitizer_$tool.log" 2>&1
      brief 40 <"$LOGS/sanitizer_$tool.log"
    done
    pack_logs
    ;;
  profile)
    # Per-kernel times of one AR and one XR forward (2 layers, Nsight Compute) with the
    # binaries of `prebuilt`; PROFILE_BIN names another folder of them (before/after).
    device_env
    B=${PROFILE_BIN:-.gpubin}
    NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
    timeout 240 "$NCU" --csv --clock-control none --metrics gpu__time_duration.sum,launch__grid_size \
      $B/crossreg-bench-gpu --layers 2 --batches 1 --gammas 30 --iters 1 >"$LOGS/profile.csv" 2>"$LOGS/ncu.err"
    echo "[lease] ncu exit $?"; tail -3 "$LOGS/ncu.err"
    python3 engine/cuda/tools/ncu_summary.py "$LOGS/profile.csv" | tee "$LOGS/profile.txt" | head -45
    pack_logs
    ;;
  loadgen)
    # crossreg-loadgen against crossreg-server --backend cuda on a random ~0.8B Llama
    # (python3 -m training.random_model; tokenizer carried in .gpu_check) with a random
    # rank-16 adapter, at concurrency 1, 8 and 32: AR, lossless and n-gram at gamma 8,
    # fixed and adaptive. Binaries of `prebuilt`.
    device_env
    B=.gpubin
    M=/tmp/random-llama
    python3 -m training.random_model --out $M --tokenizer .gpu_check/tokenizer.json ${RANDOM_MODEL_ARGS:-} 2>&1 | tail -1
    $B/crossreg-random-adapter --model $M --out $M/adapter --rank 16 | tail -1
    $B/crossreg-server --backend cuda --model $M --adapter $M/adapter --port 50071 --metrics_port 0 --http_port 0 \
      --adaptive_gamma --max_running 32 >"$LOGS/server.log" 2>&1 &
    server=$!
    for c in 1 8 32; do
      for cfg in "ar|" "lossless|--gamma 8 --adaptive_gamma false" "lossless|--gamma 8 --adaptive_gamma true" \
                 "ngram|--gamma 8 --adaptive_gamma false" "ngram|--gamma 8 --adaptive_gamma true"; do
        IFS='|' read -r mode extra <<<"$cfg"
        echo "[loadgen] concurrency $c, $mode $extra"
        timeout 120 $B/crossreg-loadgen --server localhost:50071 --connect_timeout_s 180 --concurrency $c \
          --requests $((c < 4 ? 4 : 2 * c)) --mode $mode --max_tokens 128 --ignore_eos $extra 2>&1 | tail -4
      done
    done 2>&1 | tee "$LOGS/loadgen.txt"
    kill $server; wait $server
    grep -iE "error|loaded|backend|cost" "$LOGS/server.log" | head -8
    pack_logs
    ;;
  *) echo "usage: gpu_lease.sh train|distill|bench|prebuilt|prebuilt-distill|pack-drafters|drafters|hybrid-ab|drafter-speed|diagnose|profile|loadgen" >&2; exit 2 ;;
esac
