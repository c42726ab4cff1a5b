"""Build the corpus n-gram table the server's n-gram drafter consults (ngram_table.bin).

    python3 -m training ngram-table [--corpus training/data/corpus] [--model models/default]

For every context of n tokens (n = --min-n..--max-n) in the corpus's train stream, the
token that followed it most often is kept when it followed at least --min-count times
and in at least --min-share of the context's occurrences: a draft from the table should
be right often enough to pay for its verification row. n-grams that cross a document
boundary (<|bos|>, <|eos|>, in the context or as the continuation) are left out. The default model's table (models/default)
comes from the defaults here; its figures are in docs/acceptance.md.

The drafter uses the table only where a request's own context has no match of 2+ tokens,
and every draft is verified exactly: the table changes speed, never output.

File format: engine/decoding/ngram_table.h (the C++ reader checks every field).
"""
import argparse
import json
import os
import struct
import sys
import time

import numpy as np

from training import packed_corpus

MAGIC = b"CRNGRAM\0"
VERSION = 1


def bits_for(vocab_size: int) -> int:
    return max(1, int(vocab_size - 1).bit_length())


def build_order(ids: np.ndarray, n: int, bits: int, min_count: int, min_share: float, barrier: np.ndarray):
    """-> (keys uint64 sorted, next uint32) of the order-n contexts kept."""
    count = len(ids) - n
    if count <= 0:
        return np.zeros(0, np.uint64), np.zeros(0, np.uint32)
    keys = np.zeros(count, np.uint64)
    crosses = np.zeros(count, bool)
    for k in range(n):
        keys = (keys << np.uint64(bits)) | ids[k:k + count].astype(np.uint64)
        crosses |= barrier[k:k + count]
    crosses |= barrier[n:n + count]
    nxt = ids[n:n + count].astype(np.uint32)
    keys, nxt = keys[~crosses], nxt[~crosses]
    order = np.lexsort((nxt, keys))
    keys, nxt = keys[order], nxt[order]
    # Runs of equal (context, next): their counts.
    new_pair = np.ones(len(keys), bool)
    new_pair[1:] = (keys[1:] != keys[:-1]) | (nxt[1:] != nxt[:-1])
    starts = np.flatnonzero(new_pair)
    pair_counts = np.diff(np.append(starts, len(keys)))
    pair_keys, pair_next = keys[starts], nxt[starts]
    # Per context: its total and its most frequent next token (the smallest id on ties).
    new_key = np.ones(len(pair_keys), bool)
    new_key[1:] = pair_keys[1:] != pair_keys[:-1]
    key_starts = np.flatnonzero(new_key)
    totals = np.add.reduceat(pair_counts, key_starts)
    group = np.cumsum(new_key) - 1
    best = np.lexsort((pair_next, -pair_counts, group))  # by context, then count desc, then id
    first = np.ones(len(best), bool)
    first[1:] = group[best][1:] != group[best][:-1]
    top = best[first]
    top_counts = pair_counts[top]
    keep = (top_counts >= min_count) & (top_counts >= min_share * totals)
    return pair_keys[top][keep], pair_next[top][keep]


def write(path: str, vocab_size: int, bits: int, orders) -> int:
    """orders[n - 1] = (keys, next) for n = 1..max_n; returns the file's size."""
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(MAGIC)
        f.write(struct.pack("<4I", VERSION, vocab_size, len(orders), bits))
        f.write(struct.pack(f"<{len(orders)}Q", *[len(k) for k, _ in orders]))
        for keys, nxt in orders:
            f.write(np.ascontiguousarray(keys, dtype="<u8").tobytes())
            f.write(np.ascontiguousarray(nxt, dtype="<u4").tobytes())
    os.replace(tmp, path)
    return os.path.getsize(path)


def build_parser():
    ap = argparse.ArgumentParser(prog="python3 -m training ngram-table", description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", default="training/data/corpus", help="packed corpus directory (scripts/build_corpus.sh)")
    ap.add_argument("--model", default="models/default",
                    help="model directory the table is for: its vocabulary size and tokenizer must match the corpus's")
    ap.add_argument("--out", default=None, help="output file (default: MODEL/ngram_table.bin)")
    ap.add_argument("--min-n", type=int, default=2, help="shortest context kept (default 2)")
    ap.add_argument("--max-n", type=int, default=3, help="longest context kept (default 3)")
    ap.add_argument("--min-count", type=int, default=8, help="times the kept continuation must occur (default 8)")
    ap.add_argument("--min-share", type=float, default=0.5,
                    help="share of the context's occurrences the kept continuation must have (default 0.5)")
    return ap


def main(argv=None) -> int:
    a = build_parser().parse_args(argv)
    if not 1 <= a.min_n <= a.max_n <= 8:
        raise SystemExit(f"--min-n {a.min_n} / --max-n {a.max_n}: need 1 <= min-n <= max-n <= 8")
    if a.min_count < 1 or not 0.0 < a.min_share <= 1.0:
        raise SystemExit("--min-count must be >= 1 and --min-share in (0, 1]")
    with open(os.path.join(a.model, "config.json")) as f:
        vocab_size = int(json.load(f)["vocab_size"])
    meta, tok_path, streams = packed_corpus.load(a.corpus, ("train",))
    model_tok = os.path.join(a.model, "tokenizer.json")
    if os.path.exists(model_tok) and packed_corpus.file_sha256(model_tok) != packed_corpus.file_sha256(tok_path):
        raise SystemExit(f"{model_tok} differs from the corpus's {tok_path}: the table's token ids would not be "
                         "the model's")
    ids = streams["train"]
    if len(ids) and int(ids.max()) >= vocab_size:
        raise SystemExit(f"corpus token {int(ids.max())} is outside the model's vocabulary of {vocab_size}")
    bits = bits_for(vocab_size)
    if a.max_n * bits > 64:
        raise SystemExit(f"--max-n {a.max_n}: {a.max_n} tokens of {bits} bits do not fit a 64-bit key")
    specials = meta["tokenizer"]["specials"]
    barrier = np.isin(ids, [specials["<|bos|>"], specials["<|eos|>"]])
    out = a.out or os.path.join(a.model, "ngram_table.bin")
    t0 = time.time()
    orders = []
    for n in range(1, a.max_n + 1):
        if n < a.min_n:
            orders.append((np.zeros(0, np.uint64), np.zeros(0, np.uint32)))
            continue
        keys, nxt = build_order(ids, n, bits, a.min_count, a.min_share, barrier)
        orders.append((keys, nxt))
        print(f"[ngram-table] order {n}: {len(keys):,} contexts kept ({time.time() - t0:.0f} s)", flush=True)
    size = write(out, vocab_size, bits, orders)
    print(f"[ngram-table] wrote {out}: {sum(len(k) for k, _ in orders):,} n-grams from {len(ids):,} corpus tokens, "
          f"{size / 2**20:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
