#!/usr/bin/env bash
# Packages the GPU-trained default model into models/default: the base model's bf16 shards
# and index, config, tokenizer, the distilled adapter, both runs' run.json and the corpus
# manifest (sha256 of every training file). Inputs are the run directories of
# scripts/pretrain_default.sh and scripts/distill_default.sh (on the device machine they come
# back through RETURN_DIR; unpack them as training/README.md says). The model card
# (models/default/README.md) is kept; refresh its figures by hand and regenerate
# docs/acceptance.md with scripts/acceptance_report.py --packed-corpus training/data/corpus.
#   scripts/package_default_model.sh [PRETRAIN_RUN] [DISTILL_RUN]
set -euo pipefail
case "${1:-}" in -h|--help) sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0;; esac
cd "$(dirname "$0")/.."
PRE=${1:-training/runs/pretrain}
DIS=${2:-training/runs/distill}
CORPUS=${CORPUS:-training/data/corpus}
for f in "$PRE/model/config.json" "$PRE/model/model.safetensors.index.json" "$PRE/run.json" \
         "$DIS/adapter/adapter_config.json" "$DIS/run.json" "$CORPUS/manifest.tsv"; do
  [ -f "$f" ] || { echo "[package] missing $f" >&2; exit 2; }
done
new=models/default.new
rm -rf "$new" && mkdir -p "$new/adapter"
cp "$PRE"/model/{config.json,generation_config.json,model.safetensors.index.json,tokenizer.json,tokenizer_config.json} "$new/"
cp "$PRE"/model/model-*.safetensors "$new/"
cp "$DIS"/adapter/{adapter_config.json,adapter_model.safetensors,crossreg_adapter.json} "$new/adapter/"
cp "$PRE/run.json" "$new/pretrain_run.json"
cp "$DIS/run.json" "$new/distill_run.json"
cp "$CORPUS/manifest.tsv" "$new/corpus_manifest.tsv"
[ -f models/default/README.md ] && cp models/default/README.md "$new/"
chmod 644 "$new"/*.safetensors
rm -rf models/default && mv "$new" models/default
du -sh models/default
