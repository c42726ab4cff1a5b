"""The packed corpus directory: token streams on disk and their loading.

Layout (written by `python3 -m training corpus`, see training/corpus.py):
  corpus.json        counts, sizes, package versions, manifest sha256, stream checksums
  manifest.tsv       sha256, bytes, split, source, path of every file (sorted by path)
  tokenizer.json     the byte-level BPE trained on the train split (HF format)
  train.tokens.xz    uint16 little-endian token ids, xz-compressed
  heldout.tokens.xz  the same for the held-out files (never seen by pretrain or distill)
Each file is `<|bos|> tokens <|eos|>` in its stream, in manifest order.

xz because the GPU machine is reached by copying the working tree (64 MiB for everything):
the uint16 ids compress 3.6x (6.8x relative to the source text they encode; xz of the text
itself is ~12% larger), and Python's lzma module is in every interpreter.
"""
import hashlib
import json
import lzma
import os
from typing import Dict

import numpy as np

FORMAT = "crossreg-corpus-v1"
DTYPE = np.dtype("<u2")  # vocabularies up to 65536
SPLITS = ("train", "heldout")
BUILD_HINT = "scripts/build_corpus.sh (or: python3 -m training corpus --out {path})"

# LZMA2 at preset 9 (64 MiB dictionary: the whole stream's repeats are in reach); lp=1/pb=1
# tell the range coder that symbols are 2-byte aligned, which gains ~0.5% on uint16 ids.
_FILTERS = [{"id": lzma.FILTER_LZMA2, "preset": 9, "lc": 3, "lp": 1, "pb": 1}]


def stream_path(corpus_dir: str, split: str) -> str:
    return os.path.join(corpus_dir, f"{split}.tokens.xz")


def write_stream(path: str, ids: np.ndarray) -> Dict[str, object]:
    """Compress ids (any integer dtype, values < 65536) to `path`; returns its record."""
    if len(ids) and int(ids.max()) > np.iinfo(DTYPE).max:
        raise ValueError(f"{path}: token id {int(ids.max())} does not fit in uint16")
    raw = np.ascontiguousarray(ids, dtype=DTYPE).tobytes()
    data = lzma.compress(raw, format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64, filters=_FILTERS)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
    return {"file": os.path.basename(path), "tokens": int(len(ids)),
            "compressed_bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(),
            "dtype": "uint16-le"}


def read_stream(path: str, record: Dict[str, object] = None) -> np.ndarray:
    """Decompress a stream to a uint16 array; checks it against its corpus.json record."""
    with open(path, "rb") as f:
        data = f.read()
    if record is not None and hashlib.sha256(data).hexdigest() != record["sha256"]:
        raise SystemExit(f"{path}: sha256 differs from corpus.json (partial copy?); rebuild "
                         f"with {BUILD_HINT.format(path=os.path.dirname(path))}")
    ids = np.frombuffer(lzma.decompress(data), dtype=DTYPE)
    if record is not None and len(ids) != record["tokens"]:
        raise SystemExit(f"{path}: {len(ids)} tokens, corpus.json says {record['tokens']}")
    return ids


def load_meta(corpus_dir: str) -> dict:
    path = os.path.join(corpus_dir, "corpus.json")
    if not os.path.exists(path):
        raise SystemExit(f"no packed corpus at {corpus_dir} (missing {path}). Build it with "
                         f"{BUILD_HINT.format(path=corpus_dir)}; on a GPU machine, carry that "
                         f"directory along (see training/README.md)")
    with open(path) as f:
        meta = json.load(f)
    if meta.get("format") != FORMAT:
        raise SystemExit(f"{path}: format {meta.get('format')!r}, expected {FORMAT!r}")
    return meta


def load(corpus_dir: str, splits=SPLITS):
    """-> (meta, tokenizer path, {split: uint16 array}) with every file checked."""
    meta = load_meta(corpus_dir)
    tok_path = os.path.join(corpus_dir, "tokenizer.json")
    if not os.path.exists(tok_path):
        raise SystemExit(f"{tok_path} is missing; rebuild with "
                         f"{BUILD_HINT.format(path=corpus_dir)}")
    streams = {}
    for split in splits:
        path = stream_path(corpus_dir, split)
        if not os.path.exists(path):
            raise SystemExit(f"{path} is missing; rebuild with "
                             f"{BUILD_HINT.format(path=corpus_dir)}")
        streams[split] = read_stream(path, meta["streams"][split])
    return meta, tok_path, streams


def file_sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
