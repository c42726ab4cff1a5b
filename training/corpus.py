"""Build the packed training corpus: Python sources -> manifest, tokenizer, compressed tokens.

python3 -m training corpus --out training/data/corpus     (scripts/build_corpus.sh runs this)

Sources, in this order: the standard library (--stdlib, a directory walk), the Debian packages
of --packages / --packages-file (their `dpkg -L` files under /usr/lib/python3/dist-packages;
they must be installed), then any --root directories. Test and vendored directories are
skipped (training/corpus_sources.py). A file is kept when it is UTF-8, not empty, at most
--max-file-bytes, not generated-looking (--max-zlib-ratio), and its content (sha256) was not
already kept from an earlier source or path.
A file is held out when sha256(relative path) falls below --holdout-pct percent (the split
training/common.py has always used); neither pretraining nor distillation reads held-out files.

Writes OUT/manifest.tsv, OUT/tokenizer.json, OUT/train.tokens.xz, OUT/heldout.tokens.xz and
OUT/corpus.json (training/packed_corpus.py describes them). Deterministic: the same sources and
arguments give byte-identical files, except corpus.json's "build" timings.
"""
import argparse
import contextlib
import hashlib
import multiprocessing
import os
import shutil
import time
import zlib
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import common, corpus_sources, packed_corpus
from .common import log
from .tokenizer import ByteBPETokenizer, DEFAULT_SPECIALS, count_words, train_bpe_from_counts

PACKAGES_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus_packages.txt")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python3 -m training corpus", description=__doc__,
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--out", default="training/data/corpus", help="output directory")
    p.add_argument("--stdlib", default=common.DEFAULT_CORPUS_ROOT,
                   help="standard library directory to walk ('none' to skip)")
    p.add_argument("--packages", default="",
                   help="comma-separated Debian packages, or 'none' (default: --packages-file)")
    p.add_argument("--packages-file", default=PACKAGES_FILE,
                   help="file with one Debian package per line (used when --packages is empty)")
    p.add_argument("--root", action="append", default=[],
                   help="extra directory whose *.py files join the corpus (repeatable; the "
                        "source is named after the directory)")
    p.add_argument("--max-files", type=int, default=0,
                   help="keep only the first N accepted files, in source order (0 = all)")
    p.add_argument("--max-file-bytes", type=int, default=1_000_000,
                   help="skip larger files (generated tables, data dumps)")
    p.add_argument("--max-zlib-ratio", type=float, default=10.0,
                   help="skip files that zlib compresses more than this (generated code: rule "
                        "tables, parser tables, stub families; hand-written Python is 3-6x)")
    p.add_argument("--holdout-pct", type=float, default=2.5,
                   help="percent of files held out (by sha256 of the relative path)")
    p.add_argument("--vocab-size", type=int, default=16384)
    p.add_argument("--tokenizer", default="",
                   help="encode with this tokenizer.json instead of training one (a corpus for a "
                        "model trained earlier, when the sources have drifted since)")
    p.add_argument("--tokenizer-max-bytes", type=int, default=64_000_000,
                   help="train the tokenizer on at most this many bytes of train files, chosen "
                        "by content hash (a spread over all sources); 0 = all")
    p.add_argument("--workers", type=int, default=0,
                   help="processes for word counting and encoding (0 = all cores)")
    return p


# ---- selection -------------------------------------------------------------------------------
def list_sources(a) -> Tuple[List[corpus_sources.Candidate], Dict[str, dict]]:
    """All candidate files in source order, and a per-source record (root, Debian version)."""
    cands: List[corpus_sources.Candidate] = []
    info: Dict[str, dict] = {}
    if a.stdlib and a.stdlib != "none":
        found = list(corpus_sources.walk_tree("stdlib", a.stdlib))
        cands += found
        info["stdlib"] = {"root": a.stdlib, "debian": corpus_sources.versions(
            corpus_sources.stdlib_packages(a.stdlib)) if _is_debian() else {}}
    for pkg in package_names(a):
        cands += list(corpus_sources.package_files(pkg))
        info[pkg] = {"root": corpus_sources.DIST_PACKAGES,
                     "debian": {pkg: corpus_sources.package_version(pkg)}}
    for root in a.root:
        name = os.path.basename(os.path.normpath(root))
        cands += list(corpus_sources.walk_tree(name, root))
        info[name] = {"root": os.path.abspath(root), "debian": {}}
    return cands, info


def package_names(a) -> List[str]:
    if a.packages == "none":
        return []
    if a.packages:
        return [p for p in a.packages.split(",") if p]
    return corpus_sources.read_package_list(a.packages_file)


def _is_debian() -> bool:
    return os.path.exists("/var/lib/dpkg/status")


def select_files(cands, a):
    """Reads every candidate once; returns (kept rows, texts by row, skip counts). A row is
    dict(source, root, path, sha256, bytes, split)."""
    seen = set()
    rows, texts = [], []
    skipped = {"too_large": 0, "not_utf8": 0, "empty": 0, "duplicate": 0, "bad_name": 0,
               "repetitive": 0}
    for source, root, rel in cands:
        if a.max_files and len(rows) >= a.max_files:
            break
        if any(c in rel for c in "\t\n\r"):
            skipped["bad_name"] += 1  # would break the TSV manifest
            continue
        full = os.path.join(root, rel)
        size = os.path.getsize(full)
        if size > a.max_file_bytes:
            skipped["too_large"] += 1
            continue
        with open(full, "rb") as f:
            data = f.read()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            skipped["not_utf8"] += 1
            continue
        if not text.strip():
            skipped["empty"] += 1  # empty __init__.py files: nothing to learn
            continue
        digest = hashlib.sha256(data).hexdigest()
        if digest in seen:
            skipped["duplicate"] += 1
            continue
        if a.max_zlib_ratio and len(data) > 4096 and \
                len(data) > a.max_zlib_ratio * len(zlib.compress(data, 6)):
            skipped["repetitive"] += 1  # small files are exempt: their ratio means little
            continue
        seen.add(digest)
        rows.append({"source": source, "root": root, "path": rel, "sha256": digest,
                     "bytes": len(data),
                     "split": "heldout" if common.is_heldout(rel, a.holdout_pct) else "train"})
        texts.append(text)
    if len(rows) > 1 and all(r["split"] == "train" for r in rows):
        rows[-1]["split"] = "heldout"  # tiny corpora: still evaluate on something unseen
    return rows, texts, skipped


def manifest_text(rows) -> str:
    """TSV sorted by (path, source): the same file set always hashes the same."""
    lines = ["sha256\tbytes\tsplit\tsource\tpath"]
    for r in sorted(rows, key=lambda r: (r["path"], r["source"])):
        lines.append(f"{r['sha256']}\t{r['bytes']}\t{r['split']}\t{r['source']}\t{r['path']}")
    return "\n".join(lines) + "\n"


# ---- tokenizer and encoding (process pools share the texts by fork) -------------------------
_TEXTS: Sequence[str] = ()
_TOK: Optional[ByteBPETokenizer] = None


def _count_chunk(idx: List[int]):
    return count_words(_TEXTS[i] for i in idx)


def _encode_chunk(args) -> bytes:
    idx, bos, eos = args
    out: List[int] = []
    for i in idx:
        out.append(bos)
        out.extend(_TOK.encode_ordinary(_TEXTS[i]))
        out.append(eos)
    return np.asarray(out, dtype=packed_corpus.DTYPE).tobytes()


def _chunks(idx: List[int], texts, target_bytes: int) -> List[List[int]]:
    """Consecutive runs of indices of about target_bytes of text each (order preserved)."""
    out, cur, n = [], [], 0
    for i in idx:
        cur.append(i)
        n += len(texts[i])
        if n >= target_bytes:
            out.append(cur)
            cur, n = [], 0
    if cur:
        out.append(cur)
    return out


def _pool(workers: int):
    """Forked workers see _TEXTS/_TOK without pickling 175 MB of text; None for 1 worker."""
    if workers <= 1:
        return None
    return multiprocessing.get_context("fork").Pool(workers)


def train_tokenizer(rows, texts, a, pool) -> ByteBPETokenizer:
    train_idx = [i for i, r in enumerate(rows) if r["split"] == "train"]
    # A content-hash order spreads the sample over every source instead of the first few.
    train_idx.sort(key=lambda i: rows[i]["sha256"])
    sample, n = [], 0
    for i in train_idx:
        if a.tokenizer_max_bytes and n >= a.tokenizer_max_bytes:
            break
        sample.append(i)
        n += rows[i]["bytes"]
    chunks = _chunks(sample, texts, 4_000_000)
    counts: Dict[str, int] = {}
    for part in (pool.imap(_count_chunk, chunks) if pool else map(_count_chunk, chunks)):
        for w, c in part.items():
            counts[w] = counts.get(w, 0) + c
    log(f"tokenizer: {len(sample)} files, {n / 1e6:.1f} MB, {len(counts)} distinct words")
    return train_bpe_from_counts(counts, a.vocab_size, DEFAULT_SPECIALS, log=None)


def encode_split(rows, texts, split: str, tok: ByteBPETokenizer, pool) -> Tuple[np.ndarray, int]:
    """Token stream of one split in manifest order; returns (ids, number of documents)."""
    order = sorted((i for i, r in enumerate(rows) if r["split"] == split),
                   key=lambda i: (rows[i]["path"], rows[i]["source"]))
    bos, eos = tok.specials["<|bos|>"], tok.specials["<|eos|>"]
    jobs = [(c, bos, eos) for c in _chunks(order, texts, 2_000_000)]
    parts = list(pool.imap(_encode_chunk, jobs) if pool else map(_encode_chunk, jobs))
    ids = np.frombuffer(b"".join(parts), dtype=packed_corpus.DTYPE)
    return ids, len(order)


# ---- command ---------------------------------------------------------------------------------
def build(a) -> dict:
    global _TEXTS, _TOK
    t_start = time.time()
    os.makedirs(a.out, exist_ok=True)
    if a.vocab_size > 65536:
        raise SystemExit("--vocab-size above 65536 does not fit the uint16 token streams")
    cands, info = list_sources(a)
    rows, texts, skipped = select_files(cands, a)
    if not rows:
        raise SystemExit("no corpus files selected (check --stdlib/--packages/--root)")
    t_read = time.time() - t_start
    manifest = manifest_text(rows)
    with open(os.path.join(a.out, "manifest.tsv"), "w") as f:
        f.write(manifest)
    manifest_sha = hashlib.sha256(manifest.encode()).hexdigest()
    split_bytes = {s: sum(r["bytes"] for r in rows if r["split"] == s) for s in ("train", "heldout")}
    log(f"corpus: {len(cands)} candidates -> {len(rows)} files ({sum(split_bytes.values()) / 1e6:.1f}"
        f" MB; held out {sum(r['split'] == 'heldout' for r in rows)} files, "
        f"{split_bytes['heldout'] / 1e6:.2f} MB); skipped {skipped}; manifest sha256 "
        f"{manifest_sha} ({t_read:.0f}s)")

    workers = a.workers or os.cpu_count() or 1
    _TEXTS = texts
    t0 = time.time()
    if a.tokenizer:
        tok = ByteBPETokenizer.load(a.tokenizer)
        log(f"tokenizer: {a.tokenizer} (vocab {tok.vocab_size}), not trained")
    else:
        with _pool(workers) or contextlib.nullcontext() as pool:
            tok = train_tokenizer(rows, texts, a, pool)
    t_tok = time.time() - t0
    if a.tokenizer:
        shutil.copyfile(a.tokenizer, os.path.join(a.out, "tokenizer.json"))
    else:
        tok.save(os.path.join(a.out, "tokenizer.json"))
    if not a.tokenizer:
        log(f"tokenizer: vocab {tok.vocab_size} trained in {t_tok:.1f}s")

    _TOK = tok
    t0 = time.time()
    streams, docs = {}, {}
    with _pool(workers) or contextlib.nullcontext() as pool:  # forked after _TOK is set
        for split in ("train", "heldout"):
            streams[split], docs[split] = encode_split(rows, texts, split, tok, pool)
    t_enc = time.time() - t0
    n_tok = sum(len(s) for s in streams.values())
    total_bytes = sum(split_bytes.values())
    log(f"encoded {n_tok} tokens in {t_enc:.1f}s ({total_bytes / max(t_enc, 1e-9) / 1e6:.1f} "
        f"MB/s, {workers} workers); {total_bytes / max(n_tok, 1):.3f} bytes/token")

    t0 = time.time()
    records = {}
    for split in ("train", "heldout"):
        records[split] = packed_corpus.write_stream(packed_corpus.stream_path(a.out, split),
                                                    streams[split])
        records[split]["documents"] = docs[split]
    t_xz = time.time() - t0
    _TEXTS, _TOK = (), None

    per_source: Dict[str, dict] = {}
    for r in rows:
        s = per_source.setdefault(r["source"], {"files": 0, "bytes": 0, "heldout_files": 0})
        s["files"] += 1
        s["bytes"] += r["bytes"]
        s["heldout_files"] += r["split"] == "heldout"
    for name, rec in info.items():
        rec.update(per_source.get(name, {"files": 0, "bytes": 0, "heldout_files": 0}))
    tok_sha = packed_corpus.file_sha256(os.path.join(a.out, "tokenizer.json"))
    artifact = sum(os.path.getsize(os.path.join(a.out, f)) for f in
                   ("manifest.tsv", "tokenizer.json", "train.tokens.xz", "heldout.tokens.xz"))
    meta = {
        "format": packed_corpus.FORMAT,
        "command": "python3 -m training corpus",
        "args": {k: v for k, v in vars(a).items() if k not in ("out", "workers")},
        "manifest_sha256": manifest_sha,
        "holdout_pct": a.holdout_pct,
        "files": {"candidates": len(cands), "kept": len(rows),
                  "train": sum(r["split"] == "train" for r in rows),
                  "heldout": sum(r["split"] == "heldout" for r in rows), "skipped": skipped},
        "bytes": {"train": split_bytes["train"], "heldout": split_bytes["heldout"],
                  "total": total_bytes},
        "tokens": {"train": len(streams["train"]), "heldout": len(streams["heldout"])},
        "bytes_per_token": round(total_bytes / max(n_tok, 1), 4),
        "tokenizer": {"file": "tokenizer.json", "sha256": tok_sha, "vocab_size": tok.vocab_size,
                      "specials": tok.specials},
        "streams": records,
        "sources": info,
        "artifact_bytes": artifact,
        "build": {"read_s": round(t_read, 1), "tokenizer_s": round(t_tok, 1),
                  "encode_s": round(t_enc, 1), "compress_s": round(t_xz, 1),
                  "total_s": round(time.time() - t_start, 1), "workers": workers},
    }
    common.write_json(os.path.join(a.out, "corpus.json"), meta)
    log(f"wrote {a.out}: train {records['train']['compressed_bytes'] / 2**20:.2f} MiB, held-out "
        f"{records['heldout']['compressed_bytes'] / 2**20:.2f} MiB, artifact "
        f"{artifact / 2**20:.2f} MiB (compress {t_xz:.0f}s, total {time.time() - t_start:.0f}s)")
    return meta


def main(argv=None) -> int:
    a = build_parser().parse_args(argv)
    build(a)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
