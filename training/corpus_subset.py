"""A smaller packed corpus cut from a packed corpus: the same tokenizer and held-out stream,
and --pieces evenly spaced runs of the train stream, --train-tokens in all. For a GPU
machine reached by copying the working tree (64 MiB for everything): distillation draws
prefixes, not epochs, so a few million train tokens from all over the stream serve it.

python3 -m training corpus-subset --corpus training/data/corpus --out .distill_corpus
"""
import argparse
import hashlib
import json
import os
import shutil

import numpy as np

from . import packed_corpus
from .common import log


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python3 -m training corpus-subset", description=__doc__,
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--corpus", default="training/data/corpus", help="packed corpus to cut from")
    p.add_argument("--out", required=True, help="directory for the smaller packed corpus")
    p.add_argument("--train-tokens", type=int, default=8_000_000, help="train tokens kept")
    p.add_argument("--pieces", type=int, default=64, help="evenly spaced runs they come in")
    return p


def main(argv=None) -> int:
    a = build_parser().parse_args(argv)
    if a.train_tokens <= 0 or a.pieces <= 0:
        raise SystemExit("--train-tokens and --pieces must be positive")
    meta, tok_path, streams = packed_corpus.load(a.corpus)
    train = streams["train"]
    piece = max(a.train_tokens // a.pieces, 1)
    if a.train_tokens >= len(train):
        kept = train
    else:
        starts = np.linspace(0, len(train) - piece, a.pieces).astype(np.int64)
        kept = np.concatenate([train[s:s + piece] for s in starts])
    os.makedirs(a.out, exist_ok=True)
    shutil.copyfile(tok_path, os.path.join(a.out, "tokenizer.json"))
    manifest = os.path.join(a.corpus, "manifest.tsv")
    if os.path.exists(manifest):  # names the held-out documents (scripts/acceptance_report.py)
        shutil.copyfile(manifest, os.path.join(a.out, "manifest.tsv"))
    out = dict(meta)
    out["streams"] = {
        "train": packed_corpus.write_stream(packed_corpus.stream_path(a.out, "train"), kept),
        "heldout": packed_corpus.write_stream(packed_corpus.stream_path(a.out, "heldout"),
                                              streams["heldout"])}
    spec = f"{meta['manifest_sha256']} train-tokens {len(kept)} pieces {a.pieces}"
    # Other data than the whole corpus: a distillation's cached examples must not match it.
    out["manifest_sha256"] = hashlib.sha256(spec.encode()).hexdigest()
    out["subset_of"] = {"corpus": os.path.abspath(a.corpus), "manifest_sha256": meta["manifest_sha256"],
                        "train_tokens": int(len(kept)), "pieces": a.pieces}
    with open(os.path.join(a.out, "corpus.json"), "w") as f:
        json.dump(out, f, indent=1)
    log(f"{a.out}: {len(kept)} train tokens in {a.pieces} pieces, {len(streams['heldout'])} "
        f"held-out tokens, tokenizer of {a.corpus}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
