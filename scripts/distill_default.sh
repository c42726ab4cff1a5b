#!/usr/bin/env bash
# Distils the Cross-Regression adapter (LoRA r=32, alpha 32, all seven projections, window 16)
# for the base model of scripts/pretrain_default.sh, with prefixes from the packed corpus's
# train stream (held-out files only score the evaluation). Output: $RUN_DIR/adapter (PEFT
# directory + crossreg_adapter.json), run.json, train.log.
# Sized for one H100 and a 10-minute command: 327,680 base continuations of prefixes up to 768
# tokens (generated in length-sorted batches), then a warm-up + cosine schedule whose step count
# --auto-steps fits to TIME_BUDGET_S, so the LR anneals before the final evaluation and export.
# Loss weights: placeholder rows (the empty draft slots a fork or a first forward fills) weigh
# PLACEHOLDER_WEIGHT · PLACEHOLDER_DECAY^k for the k-th of a run, and FORK_FRAC of the windows
# take the engine's forked-refill layout (clean rows, then placeholders).
#   scripts/distill_default.sh                     # DEVICE=auto: CUDA when present
#   RESUME=1 scripts/distill_default.sh            # continue from $RUN_DIR/checkpoint.pt
#   RETURN_DIR=$OUT scripts/distill_default.sh     # device machine: also pack results there
#   DEVICE=cpu N_EXAMPLES=256 N_EVAL=32 BATCH=8 STEPS=50 AUTO_STEPS=0 scripts/distill_default.sh
#   DRAFT_LAYOUT=blocks scripts/distill_default.sh # an adapter for outcome blocks (docs/algorithm.md)
# Outcome blocks learn faster than the chain. At this 520 s budget on 2 CPU cores, 3-row blocks
# beat the shipped chain recipe on held-out rows 1 and 3, fork acceptance and forked TPF with two
# seeds (row 2 a tie); on a GPU they reached TPF 1.42-1.44 against the chain's 1.36
# (docs/training.md, "The recipes compared").
# The adapter shipped until 2026-11-28 (git show 025c763:models/default/distill_run.json) came from
# the earlier recipe:
#   N_EXAMPLES=32768 PREFIX_MAX=192 GEN_BATCH=512 WARMUP=50 LR_DECAY=none AUTO_STEPS=0 \
#   PLACEHOLDER_WEIGHT=1 PLACEHOLDER_DECAY=1 FORK_FRAC=0 TIME_BUDGET_S=520 scripts/distill_default.sh
# Every setting below can be overridden from the environment; extra arguments go to
# `python3 -m training distill` (see its --help).
set -euo pipefail
case "${1:-}" in -h|--help) sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0;; esac
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
CORPUS=${CORPUS:-training/data/corpus}
BASE=${BASE:-training/runs/pretrain/model}
RUN_DIR=${RUN_DIR:-training/runs/distill}
DEVICE=${DEVICE:-auto}
TIME_BUDGET_S=${TIME_BUDGET_S:-540}
RESERVE_S=${RESERVE_S:-30}
N_EXAMPLES=${N_EXAMPLES:-327680}
N_EVAL=${N_EVAL:-256}
PREFIX_MAX=${PREFIX_MAX:-768}
GEN_BATCH=${GEN_BATCH:-1024}
BATCH=${BATCH:-64}
STEPS=${STEPS:-8000}
LR=${LR:-1e-3}
WARMUP=${WARMUP:-100}
LR_DECAY=${LR_DECAY:-cosine}
PLACEHOLDER_WEIGHT=${PLACEHOLDER_WEIGHT:-4}
PLACEHOLDER_DECAY=${PLACEHOLDER_DECAY:-0.8}
FORK_FRAC=${FORK_FRAC:-0.25}
RANK=${RANK:-32}
ALPHA=${ALPHA:-32}
EVAL_EVERY=${EVAL_EVERY:-500}
LOG_EVERY=${LOG_EVERY:-50}
CKPT_EVERY_S=${CKPT_EVERY_S:-120}
SEED=${SEED:-1234}
DRAFT_LAYOUT=${DRAFT_LAYOUT:-chain}     # chain, or blocks (BLOCK_ANCHORS blocks of BLOCK_ROWS per window)
BLOCK_ANCHORS=${BLOCK_ANCHORS:-4}
BLOCK_ROWS=${BLOCK_ROWS:-0}

if [ ! -f "$CORPUS/corpus.json" ]; then
  echo "[distill] no packed corpus at $CORPUS: build it with scripts/build_corpus.sh" \
       "(on a GPU machine: carry $CORPUS along, see training/README.md)" >&2
  exit 2
fi
if [ ! -f "$BASE/config.json" ]; then
  echo "[distill] no base model at $BASE: run scripts/pretrain_default.sh first" >&2
  exit 2
fi
FLAGS=()
[ "${RESUME:-0}" = 1 ] && FLAGS+=(--resume)
[ "${AUTO_STEPS:-1}" = 1 ] && FLAGS+=(--auto-steps)
mkdir -p "$RUN_DIR"
TEE=(tee); [ "${RESUME:-0}" = 1 ] && TEE=(tee -a)
echo "[distill] $BASE + $CORPUS -> $RUN_DIR: $N_EXAMPLES examples, ${BATCH} windows/step," \
     "r=$RANK, budget ${TIME_BUDGET_S}s, device $DEVICE" | "${TEE[@]}" "$RUN_DIR/train.log"
"$PY" -u -m training distill --base "$BASE" --out "$RUN_DIR" --corpus "$CORPUS" \
  --n-examples "$N_EXAMPLES" --n-eval "$N_EVAL" --prefix-max "$PREFIX_MAX" \
  --gen-batch "$GEN_BATCH" --rank "$RANK" --alpha "$ALPHA" --batch "$BATCH" --steps "$STEPS" \
  --lr "$LR" --warmup "$WARMUP" --lr-decay "$LR_DECAY" \
  --placeholder-weight "$PLACEHOLDER_WEIGHT" --placeholder-decay "$PLACEHOLDER_DECAY" --fork-frac "$FORK_FRAC" \
  --draft-layout "$DRAFT_LAYOUT" --block-anchors "$BLOCK_ANCHORS" --block-rows "$BLOCK_ROWS" \
  --eval-every "$EVAL_EVERY" --log-every "$LOG_EVERY" --ckpt-every 1000000 \
  --ckpt-every-s "$CKPT_EVERY_S" --time-budget-s "$TIME_BUDGET_S" --reserve-s "$RESERVE_S" \
  --dtype auto --device "$DEVICE" --seed "$SEED" "${FLAGS[@]}" "$@" \
  2>&1 | tee -a "$RUN_DIR/train.log"

if [ -n "${RETURN_DIR:-}" ]; then
  mkdir -p "$RETURN_DIR"
  tar czf "$RETURN_DIR/distill-files.tar.gz" -C "$RUN_DIR" adapter run.json train.log
  ls -la "$RETURN_DIR"
fi
