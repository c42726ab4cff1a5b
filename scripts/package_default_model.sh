#!/usr/bin/env bash
# Packages the GPU-trained default model into models/default: the base model's bf16 shards
# and index, config, tokenizer, the distilled adapter, both runs' run.json and the corpus
# manifest (sha256 of every training file). Inputs are the run directories of
# scripts/pretrain_default.sh and scripts/distill_default.sh (on the device machine they come
# back through RETURN_DIR; unpack them as training/README.md says). The model card
# (models/default/README.md) is kept; refresh its figures by hand and regenerate
# docs/acceptance.md with scripts/acceptance_report.py --packed-corpus training/data/corpus.
#   scripts/package_default_model.sh [PRETRAIN_RUN] [DISTILL_RUN]
# A model that drafts for itself (scripts/pretrain_default.sh with HYBRID=1, usually from
# INIT_MODEL=models/default) replaces the base and the adapter: its weights and config
# (crossreg_draft) become models/default, with no adapter/; its run.json is kept as
# hybrid_run.json beside the pretrain_run.json of the base it started from, and the corpus
# n-gram table (ngram_table.bin) stays:
#   HYBRID_RUN=training/runs/hybrid scripts/package_default_model.sh
set -euo pipefail
case "${1:-}" in -h|--help) sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0;; esac
cd "$(dirname "$0")/.."
if [ -n "${HYBRID_RUN:-}" ]; then
  CORPUS=${CORPUS:-training/data/corpus}
  for f in "$HYBRID_RUN/model/config.json" "$HYBRID_RUN/model/model.safetensors.index.json" "$HYBRID_RUN/run.json" \
           "$CORPUS/manifest.tsv"; do
    [ -f "$f" ] || { echo "[package] missing $f" >&2; exit 2; }
  done
  grep -q '"crossreg_draft"' "$HYBRID_RUN/model/config.json" ||
    { echo "[package] $HYBRID_RUN/model/config.json has no crossreg_draft: not a self-drafting model" >&2; exit 2; }
  new=models/default.new
  rm -rf "$new" && mkdir -p "$new"
  cp "$HYBRID_RUN"/model/{config.json,generation_config.json,model.safetensors.index.json,tokenizer.json,tokenizer_config.json} "$new/"
  cp "$HYBRID_RUN"/model/model-*.safetensors "$new/"
  cp "$HYBRID_RUN/run.json" "$new/hybrid_run.json"
  for f in pretrain_run.json ngram_table.bin README.md; do
    [ -f "models/default/$f" ] && cp "models/default/$f" "$new/"
  done
  cp "$CORPUS/manifest.tsv" "$new/corpus_manifest.tsv"
  chmod 644 "$new"/*.safetensors
  rm -rf models/default && mv "$new" models/default
  du -sh models/default
  exit 0
fi
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
