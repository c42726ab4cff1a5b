#!/usr/bin/env bash
# Builds the packed training corpus in training/data/corpus/ (gitignored): the Python standard
# library plus the Python files of the Debian packages in training/corpus_packages.txt, which
# this script apt-get installs first. Outputs: manifest.tsv, tokenizer.json, train.tokens.xz,
# heldout.tokens.xz, corpus.json (see training/README.md). CPU only, ~5-10 min on 2 cores plus
# the package download.
#   scripts/build_corpus.sh                        # install packages + build
#   SKIP_APT=1 scripts/build_corpus.sh             # packages already installed
#   CORPUS_DIR=/tmp/corpus VOCAB=8192 scripts/build_corpus.sh
# Extra arguments go to `python3 -m training corpus` (see its --help).
set -euo pipefail
case "${1:-}" in -h|--help) sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0;; esac
cd "$(dirname "$0")/.."
PY=${PYTHON:-/usr/bin/python3}
CORPUS_DIR=${CORPUS_DIR:-training/data/corpus}
VOCAB=${VOCAB:-16384}
LIST=training/corpus_packages.txt

# Package list without comments; the stdlib packages are named so that the walked
# /usr/lib/python3.11 tree is the same on every bookworm machine (python3-tk adds tkinter/).
mapfile -t PKGS < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' "$LIST" | grep -v '^$')
STDLIB_PKGS=(libpython3.11-stdlib python3-distutils python3-lib2to3 python3.11-venv python3-tk)

if [ "${SKIP_APT:-0}" != 1 ]; then
  missing=()
  for p in "${STDLIB_PKGS[@]}" "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "[corpus] apt-get installing ${#missing[@]} packages: ${missing[*]}"
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
      "${missing[@]}" >/dev/null
  fi
fi

echo "[corpus] building $CORPUS_DIR from the stdlib + ${#PKGS[@]} packages (vocab $VOCAB)"
time nice -n "${NICE:-10}" "$PY" -u -m training corpus --out "$CORPUS_DIR" \
  --packages-file "$LIST" --vocab-size "$VOCAB" "$@"
du -sh "$CORPUS_DIR"/*
