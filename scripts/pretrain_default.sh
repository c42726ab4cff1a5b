#!/usr/bin/env bash
# Pretrains the GPU-sized default base model on the packed corpus (scripts/build_corpus.sh).
# Model: 22.5M parameters = vocab 16384 (the corpus tokenizer), hidden 384, 10 layers, 6 heads
# over 3 KV heads (head_dim 64), SwiGLU 1024, context 1024, tied embeddings; exported in bf16
# as safetensors shards of at most 16 MiB + model.safetensors.index.json.
# Sized for one H100 and a 10-minute command: the trainer stops taking steps in time to
# evaluate, checkpoint and export within TIME_BUDGET_S, and --auto-steps fits the cosine LR
# schedule to the speed it measures during warm-up. bf16 autocast, TF32, fused AdamW, SDPA and
# torch.compile are used where the installed PyTorch has them (CUDA, torch >= 2.0).
#   scripts/pretrain_default.sh                    # DEVICE=auto: CUDA when present
#   RESUME=1 scripts/pretrain_default.sh           # continue from $RUN_DIR/checkpoint.pt
#   RETURN_DIR=$OUT scripts/pretrain_default.sh    # device machine: also pack results there
#   DEVICE=cpu BATCH=2 SEQ_LEN=128 TIME_BUDGET_S=120 COMPILE=0 scripts/pretrain_default.sh
#   HYBRID=1 COMPILE=0 scripts/pretrain_default.sh # a base that drafts for itself (no adapter;
#                                                  # outcome blocks, training/README.md)
#   INIT_MODEL=models/default HYBRID=1 HYBRID_TARGET=self LR=5e-4 WARMUP=100 COMPILE=0 \
#     scripts/pretrain_default.sh                  # teach the shipped base to draft for itself
# Every setting below can be overridden from the environment; extra arguments go to
# `python3 -m training pretrain` (see its --help).
set -euo pipefail
case "${1:-}" in -h|--help) sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0;; esac
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
CORPUS=${CORPUS:-training/data/corpus}
RUN_DIR=${RUN_DIR:-training/runs/pretrain}
DEVICE=${DEVICE:-auto}
TIME_BUDGET_S=${TIME_BUDGET_S:-540}   # of a 600 s command: ~60 s for start-up and copying
RESERVE_S=${RESERVE_S:-30}
AUTO_STEPS=${AUTO_STEPS:-1}
STEPS=${STEPS:-4000}                  # the plan before --auto-steps measures (H100 estimate)
BATCH=${BATCH:-64}
SEQ_LEN=${SEQ_LEN:-1024}
LR=${LR:-2e-3}
WARMUP=${WARMUP:-200}
HIDDEN=${HIDDEN:-384}
LAYERS=${LAYERS:-10}
HEADS=${HEADS:-6}
KV_HEADS=${KV_HEADS:-3}
FFN=${FFN:-1024}
EVAL_EVERY=${EVAL_EVERY:-500}
EVAL_BATCHES=${EVAL_BATCHES:-4}
LOG_EVERY=${LOG_EVERY:-50}
CKPT_EVERY_S=${CKPT_EVERY_S:-120}
COMPILE=${COMPILE:-1}
SEED=${SEED:-1234}
MAX_SHARD_BYTES=${MAX_SHARD_BYTES:-16777216}

if [ ! -f "$CORPUS/corpus.json" ]; then
  echo "[pretrain] no packed corpus at $CORPUS: build it with scripts/build_corpus.sh" \
       "(on a GPU machine: carry $CORPUS along, see training/README.md)" >&2
  exit 2
fi
FLAGS=()
[ "${RESUME:-0}" = 1 ] && FLAGS+=(--resume)
[ "$AUTO_STEPS" = 1 ] && FLAGS+=(--auto-steps)
[ "$COMPILE" = 1 ] && FLAGS+=(--compile)
if [ "${HYBRID:-0}" = 1 ]; then
  [ "$COMPILE" = 1 ] && { echo "[pretrain] HYBRID=1 runs eager: set COMPILE=0" >&2; exit 2; }
  FLAGS+=(--hybrid --hybrid-anchors "${HYBRID_ANCHORS:-4}" --hybrid-rows "${HYBRID_ROWS:-8}"
          --hybrid-target "${HYBRID_TARGET:-text}")
fi
# Start from a trained model (its config sets the architecture; the size settings are ignored).
[ -n "${INIT_MODEL:-}" ] && FLAGS+=(--init-model "$INIT_MODEL")
mkdir -p "$RUN_DIR"
TEE=(tee); [ "${RESUME:-0}" = 1 ] && TEE=(tee -a)
echo "[pretrain] $CORPUS -> $RUN_DIR: hidden $HIDDEN x $LAYERS layers, ${BATCH}x$SEQ_LEN tokens/step," \
     "budget ${TIME_BUDGET_S}s, device $DEVICE" | "${TEE[@]}" "$RUN_DIR/train.log"
"$PY" -u -m training pretrain --out "$RUN_DIR" --corpus "$CORPUS" \
  --hidden "$HIDDEN" --layers "$LAYERS" --heads "$HEADS" --kv-heads "$KV_HEADS" --ffn "$FFN" \
  --max-pos 1024 --seq-len "$SEQ_LEN" --batch "$BATCH" --steps "$STEPS" --lr "$LR" \
  --warmup "$WARMUP" --eval-every "$EVAL_EVERY" --eval-batches "$EVAL_BATCHES" \
  --log-every "$LOG_EVERY" --ckpt-every 1000000 --ckpt-every-s "$CKPT_EVERY_S" \
  --time-budget-s "$TIME_BUDGET_S" --reserve-s "$RESERVE_S" --export-dtype bf16 \
  --max-shard-bytes "$MAX_SHARD_BYTES" --device "$DEVICE" --seed "$SEED" "${FLAGS[@]}" "$@" \
  2>&1 | tee -a "$RUN_DIR/train.log"

if [ -n "${RETURN_DIR:-}" ]; then
  # The device machine returns at most 8 files of <= 16 MiB: the shards as they are, every
  # small file (config, tokenizer, index, run.json, log) in one tarball.
  mkdir -p "$RETURN_DIR"
  cp "$RUN_DIR"/model/model*.safetensors "$RETURN_DIR"/
  tar czf "$RETURN_DIR/pretrain-files.tar.gz" -C "$RUN_DIR" --exclude='*.safetensors' \
    model run.json train.log
  ls -la "$RETURN_DIR"
fi
