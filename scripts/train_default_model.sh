#!/usr/bin/env bash
# Reproduces models/default: pretrain the base model and its tokenizer on this
# machine's Python standard library, distill the Cross-Regression adapter, package
# both into models/default, and write docs/acceptance.md.
#   scripts/train_default_model.sh                # DEVICE=auto: CUDA when present
#   DEVICE=cpu RESUME=1 scripts/train_default_model.sh   # continue an interrupted run
# CPU (2 cores): ~65 min pretraining + ~25 min distillation. A GPU takes minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-/usr/bin/python3}   # Debian's python3-torch
RUNS=${RUNS:-training/runs}
DEVICE=${DEVICE:-auto}
RESUME_FLAG=()
[ "${RESUME:-0}" = 1 ] && RESUME_FLAG=(--resume)

# Base model: 5.4M parameters (vocab 4096, hidden 256, 6 layers, 8/4 heads, SwiGLU 688,
# tied embeddings); 700 steps x 16 x 256 tokens = 2.9M tokens, about one epoch.
"$PY" -u -m training pretrain --out "$RUNS/default-pretrain" --layers 6 --ffn 688 \
  --batch 16 --seq-len 256 --steps 700 --warmup 50 --lr 3e-3 --eval-every 100 --ckpt-every 50 \
  --device "$DEVICE" --seed 1234 "${RESUME_FLAG[@]}"

# Predictive-stream adapter: rank 32 on all seven linear layers, w = 16.
"$PY" -u -m training distill --base "$RUNS/default-pretrain/model" --out "$RUNS/default-distill" \
  --n-examples 2048 --n-eval 128 --prefix-max 128 --batch 16 --steps 500 --eval-every 100 \
  --device "$DEVICE" --seed 1234 "${RESUME_FLAG[@]}"

rm -rf models/default.new && mkdir -p models/default.new
cp "$RUNS"/default-pretrain/model/* models/default.new/
cp -r "$RUNS/default-distill/adapter" models/default.new/adapter
cp "$RUNS/default-pretrain/corpus_files.txt" models/default.new/corpus_files.txt
cp "$RUNS/default-pretrain/run.json" models/default.new/pretrain_run.json
cp "$RUNS/default-distill/run.json" models/default.new/distill_run.json
rm -rf models/default && mv models/default.new models/default
du -sh models/default

scripts/setup.sh
"$PY" scripts/acceptance_report.py --model models/default
